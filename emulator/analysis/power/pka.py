"""The PKA's leakage: one number per busy cycle, from the digits its datapath moves.

The PKA model computes each result at START (peripherals/pka.py) and says nothing of
how; this module gives the operation a datapath to leak from, consistent with the
timing model's shape (docs/pka.md: busy = a d^2 + b d + c cycles, d = ceil(32 LEN /
w) digits of w = ``digit_bits`` bits):

* the first c/total of the busy time is set-up: no data moves;
* MONTMUL then runs the word-serial Montgomery multiplication in radix 2^w, row by
  row over the digits a_i of A: q = (T_0 + a_i b_0) (-N^-1) mod 2^w,
  T = (T + a_i B + q N) / 2^w. Each of its d^2 digit steps (i, j) reads b_j and n_j
  and writes the new digit j of T; the steps are spread evenly over the a d^2/total
  share of the busy time (several per cycle when a < 1);
* the last b d/total of the busy time is the final pass: read T's and N's digits,
  write the result's (after the conditional subtraction). MODADD and MODSUB make two
  passes (A + B, then the correction by N), ADD and SUB one.

Each cycle's leakage is ``constant`` plus ``hd_read`` times the bit flips on the read
buses (each carries one operand's digits in turn; A's digit bus changes once per row)
plus ``hd_write`` times the bit flips on the write bus, summed over the steps that
fall in that cycle. The buses start each operation at zero. MONTMUL2 (the parallel
pair) leaks as both of its products.

Computed per operation: natively (emulator/native/leakage.c, pk_pka_rows and
pk_pka_pass) for 32-bit digits, the default chip's, and in NumPy for any digit size
(the reference the tests hold the native code to). The row values T are exact
integers, so the last row gives the PKA's own result when w d = 32 LEN.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Iterable

import numpy as np

from pkasim import native
from pkasim.peripherals.pka import Started

MODULAR_TWO_PASSES = ("MODADD", "MODSUB")


def digit_bits_of(x: int, w: int, d: int) -> np.ndarray:
    """The d digits of w bits of x (least significant first), as a (d, w) array of bits."""
    nbits = w * d
    x &= (1 << nbits) - 1
    raw = np.frombuffer(x.to_bytes((nbits + 7) // 8, "little"), dtype=np.uint8)
    return np.unpackbits(raw, bitorder="little")[:nbits].reshape(d, w)


def _rows_bits(values: list[int], w: int, d: int) -> np.ndarray:
    """Several numbers' digits at once: (len(values), d, w) bits."""
    nbits = w * d
    nbytes = (nbits + 7) // 8
    mask = (1 << nbits) - 1
    raw = np.frombuffer(b"".join((v & mask).to_bytes(nbytes, "little") for v in values), dtype=np.uint8)
    bits = np.unpackbits(raw.reshape(len(values), nbytes), axis=1, bitorder="little")[:, :nbits]
    return bits.reshape(len(values), d, w)


def bus_flips(digits: np.ndarray) -> np.ndarray:
    """Bit flips on a bus that carries these digits in turn ((k, w) bits), from zero."""
    flips = np.empty(len(digits), dtype=np.int64)
    if len(digits):
        flips[0] = int(digits[0].sum())
        flips[1:] = np.count_nonzero(digits[1:] != digits[:-1], axis=1)
    return flips


def montgomery_rows(a: int, b: int, n: int, w: int, d: int) -> list[int]:
    """T after each row of the radix-2^w Montgomery multiplication of a and b mod n
    (n odd); T_d is a b 2^(-w d) mod n, less than 2n for a, b < n."""
    radix = 1 << w
    mask = radix - 1
    n_prime = (-pow(n, -1, radix)) % radix
    b0 = b & mask
    t = 0
    rows = []
    for i in range(d):
        ai = (a >> (w * i)) & mask
        q = (((t & mask) + ai * b0) * n_prime) & mask
        t = (t + ai * b + q * n) >> w
        rows.append(t)
    return rows


def _span(first: int, length: int, cycles: int) -> tuple[int, int]:
    """A phase's cycles within the operation's: a phase the rounding left without a
    cycle of its own gets one (its steps happen, on the cycle where it would start)."""
    first = max(0, min(first, cycles - 1))
    return first, max(1, min(length, cycles - first))


def _place(steps: np.ndarray, first: int, length: int, out: np.ndarray) -> None:
    """Spread a phase's per-step leakage evenly over its cycles [first, first + length)."""
    if not len(steps) or not len(out):
        return
    first, length = _span(first, length, len(out))
    cycle = first + (np.arange(len(steps), dtype=np.int64) * length) // len(steps)
    out += np.bincount(cycle, weights=steps, minlength=len(out))[:len(out)]


def _phases(op: Started, timing: dict[str, tuple[float, float, float]], d: int) -> tuple[int, int]:
    """(end of set-up, end of the main phase), in cycles from the start, in proportion to
    the timing model's terms c, a d^2 and b d."""
    a, b, c = (float(x) for x in timing[_timing_key(op.name)])
    total = a * d * d + b * d + c
    if total <= 0:
        return 0, op.cycles
    setup = min(op.cycles, math.floor(op.cycles * c / total))
    main = min(op.cycles, math.floor(op.cycles * (c + a * d * d) / total))
    return setup, main


def _timing_key(name: str) -> str:
    return "montmul" if name in ("MONTMUL", "MONTMUL2") else name.lower()


def operation_leakage(op: Started, digit_bits: int, timing: dict[str, tuple[float, float, float]],
                      weights: dict[str, float], *, use_native: bool = True) -> np.ndarray:
    """The leakage of each busy cycle of one operation (``op.cycles`` values)."""
    w = digit_bits
    d = -(-32 * op.words // w)
    out = np.full(op.cycles, float(weights["constant"]))
    hd_read, hd_write = float(weights["hd_read"]), float(weights["hd_write"])
    setup, main = _phases(op, timing, d)
    if use_native and w == 32:
        _native32(op, d, hd_read, hd_write, setup, main, out)
        return out
    if op.name in ("MONTMUL", "MONTMUL2") and op.n & 1 and op.n > 1:
        products = [op.a] + ([op.a2] if op.name == "MONTMUL2" and op.a2 is not None else [])
        for a in products:
            _montmul(a, op.b, op.n, w, d, hd_read, hd_write, setup, main, out)
    elif op.name in ("MONTMUL", "MONTMUL2"):
        pass  # refused by the PKA (N even): it never started
    else:
        _additive(op, w, d, hd_read, hd_write, main, out)
    return out


def _montmul(a: int, b: int, n: int, w: int, d: int, hd_read: float, hd_write: float, setup: int, main: int,
             out: np.ndarray) -> None:
    rows = montgomery_rows(a, b, n, w, d)
    t_rows = _rows_bits(rows, w, d)                    # (d, d, w): digit j of T after row i
    a_bits, b_bits, n_bits = _rows_bits([a, b, n], w, d)
    # Read buses over the d*d steps: B's and N's digits row after row; A's digit per row.
    b_seq = np.tile(b_bits, (d, 1))
    n_seq = np.tile(n_bits, (d, 1))
    reads = bus_flips(b_seq) + bus_flips(n_seq)
    a_flips = bus_flips(a_bits)
    reads[::d] += a_flips
    writes = bus_flips(t_rows.reshape(d * d, w))
    _place(hd_read * reads + hd_write * writes, setup, main - setup, out)
    final = rows[-1] - n if rows[-1] >= n else rows[-1]
    last_t = t_rows[-1]
    r_bits = digit_bits_of(final, w, d)
    reads = bus_flips(last_t) + bus_flips(n_bits)
    writes = bus_flips(np.concatenate([last_t[-1:], r_bits]))[1:]
    _place(hd_read * reads + hd_write * writes, main, len(out) - main, out)


def _additive(op: Started, w: int, d: int, hd_read: float, hd_write: float, main: int, out: np.ndarray) -> None:
    """ADD, SUB (one pass over the digits) and MODADD, MODSUB (a second pass by N)."""
    size = 1 << (32 * op.words)
    if op.name in ("ADD", "MODADD"):
        first = (op.a + op.b) % size
    else:
        first = (op.a - op.b) % size
    a_bits, b_bits, s_bits = _rows_bits([op.a, op.b, first], w, d)
    passes = [(bus_flips(a_bits) + bus_flips(b_bits), bus_flips(s_bits))]
    if op.name in MODULAR_TWO_PASSES and op.n > 0:
        exact = op.a + op.b if op.name == "MODADD" else op.a - op.b
        final = exact % op.n
        n_bits, r_bits = _rows_bits([op.n, final], w, d)
        passes.append((bus_flips(s_bits) + bus_flips(n_bits), bus_flips(np.concatenate([s_bits[-1:], r_bits]))[1:]))
    steps = np.concatenate([hd_read * r + hd_write * wr for r, wr in passes])
    _place(steps, main, len(out) - main, out)  # no d^2 phase (a = 0): the passes follow set-up


def _words(x: int, d: int) -> ctypes.Array:
    return (ctypes.c_uint32 * d).from_buffer_copy((x & ((1 << (32 * d)) - 1)).to_bytes(4 * d, "little"))


def _native32(op: Started, d: int, hd_read: float, hd_write: float, setup: int, main: int, out: np.ndarray) -> None:
    """``operation_leakage`` for 32-bit digits, natively (the same model, step for step)."""
    lib = native.load()
    dst = out.ctypes.data_as(ctypes.POINTER(ctypes.c_double))
    cycles = len(out)
    if op.name in ("MONTMUL", "MONTMUL2"):
        if not (op.n & 1 and op.n > 1):
            return
        b, n = _words(op.b, d), _words(op.n, d)
        for a in [op.a] + ([op.a2] if op.name == "MONTMUL2" and op.a2 is not None else []):
            t = (ctypes.c_uint32 * (d + 2))()
            lib.pk_pka_rows(d, _words(a, d), b, n, t, *_span(setup, main - setup, cycles), hd_read, hd_write, dst)
            last = int.from_bytes(bytes(t), "little")
            final = last - op.n if last >= op.n else last
            lib.pk_pka_pass(d, t, n, _words(final, d), t[d - 1], *_span(main, cycles - main, cycles), 0, d, hd_read,
                            hd_write, dst)
        return
    size = 1 << (32 * op.words)
    first = (op.a + op.b) % size if op.name in ("ADD", "MODADD") else (op.a - op.b) % size
    s = _words(first, d)
    two = op.name in MODULAR_TWO_PASSES and op.n > 0
    steps = 2 * d if two else d
    span = _span(main, cycles - main, cycles)
    lib.pk_pka_pass(d, _words(op.a, d), _words(op.b, d), s, 0, *span, 0, steps, hd_read, hd_write, dst)
    if two:
        exact = op.a + op.b if op.name == "MODADD" else op.a - op.b
        lib.pk_pka_pass(d, s, _words(op.n, d), _words(exact % op.n, d), s[d - 1], *span, d, steps, hd_read, hd_write,
                        dst)


def add_operations(samples: np.ndarray, lo: int, ops: Iterable[Started], digit_bits: int,
                   timing: dict[str, tuple[float, float, float]], weights: dict[str, float]) -> int:
    """Add the leakage of the operations that overlap the window [lo, lo + len(samples))
    to ``samples``; the number of operations that did."""
    hi = lo + len(samples)
    count = 0
    for op in ops:
        if op.start >= hi or op.start + op.cycles <= lo:
            continue
        leak = operation_leakage(op, digit_bits, timing, weights)
        first, last = max(op.start, lo), min(op.start + op.cycles, hi)
        samples[first - lo:last - lo] += leak[first - op.start:last - op.start]
        count += 1
    return count
