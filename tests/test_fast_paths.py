"""The native fast paths (exception entry/return, WFI sleep, idle-loop fast-forward,
the PKA's common path) change speed, never results: every image gives the same
cycles, instructions, sleep, exceptions, device counters and output with them off
(everything through the Python models, which specify the behaviour) and on."""

from __future__ import annotations

import contextlib
import ctypes
import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pkasim import native
from pkasim.chip.config import load_config
from pkasim.core.machine import StopReason
from pkasim.core.observe import Kind, Observer
from pkasim.peripherals.nvic import FIRST_IRQ, HARDFAULT, NMI, PENDSV, SVCALL, SYSTICK, Nvic
from pkasim.rsa.rsakey import demo_key

IMAGES = ["hello", "systick", "nested", "fault", "timing", "spin"]
BUDGET = 48_000_000 * 60


def _outcome(m, result):
    return (result.reason, result.exit_code, result.cycles, result.instructions, result.sleep_cycles,
            sorted(m.exceptions_taken.items()), m.stdout.getvalue(), m.stderr.getvalue(),
            [dev.stats() for dev in m.peripherals.values()])


def _run(make_machine, path, fast, symbols=()):
    m = make_machine()
    m.load(path)
    for name, data in symbols:
        m.write_symbol(name, data)
    m.fast_paths = fast
    return _outcome(m, m.run(max_cycles=BUDGET))


@pytest.mark.parametrize("image", IMAGES)
def test_image_runs_identically_with_and_without_fast_paths(make_machine, elf, image):
    assert _run(make_machine, elf(image), True) == _run(make_machine, elf(image), False)


def test_rsa2048_on_the_pka_runs_identically_with_and_without_fast_paths(make_machine, elf):
    """The PKA firmware end to end: thousands of MONTMULs, their interrupts and sleeps."""
    key = demo_key(2048)
    msg = 0x1234567 % key.n
    symbols = [("rsa_input_key", key.pack()), ("rsa_input_msg", msg.to_bytes(256, "big")),
               ("rsa_op", bytes(4)), ("rsa_check", bytes(4))]
    fast = _run(make_machine, elf("xrsa_opt"), True, symbols)
    assert fast[0] == StopReason.EXIT and fast[1] == 0
    assert fast == _run(make_machine, elf("xrsa_opt"), False, symbols)


class _Spins(Observer):
    def __init__(self) -> None:
        self.spins = 0

    def events(self, batch) -> None:
        self.spins += sum(1 for e in batch if e.kind == Kind.SPIN)


def test_unrolled_polls_of_the_pka_run_identically_and_are_fast_forwarded(make_machine, elf):
    """xrsa_win polls SR.BUSY in a loop the compiler unrolled four times (four blocks,
    the last branching back): it is fast-forwarded to the PKA's end like a one-block
    loop, skipping only whole iterations that end before it."""
    key = demo_key(2048)
    msg = 0x1234567 % key.n
    symbols = [("rsa_input_key", key.pack()), ("rsa_input_msg", msg.to_bytes(256, "big")),
               ("rsa_op", bytes(4)), ("rsa_check", bytes(4))]
    m = make_machine()
    m.load(elf("xrsa_win"))
    for name, data in symbols:
        m.write_symbol(name, data)
    spins = _Spins()
    m.observe(spins)
    fast = _outcome(m, m.run(max_cycles=BUDGET))
    assert fast[0] == StopReason.EXIT and fast[1] == 0
    assert spins.spins > 1000
    assert fast == _run(make_machine, elf("xrsa_win"), False, symbols)


def test_parallel_pair_firmware_on_victor_runs_identically_with_and_without_fast_paths(make_machine, elf):
    """MONTMUL2 (the Victor preset's parallel pair) from START to its interrupt, the
    polls and the MONTMULs around it: natively, or all through pka.py, the same run."""
    cfg = load_config(Path(__file__).resolve().parent.parent / "configs" / "presets" / "victor-radix16.yaml")
    key = demo_key(2048)
    symbols = [("rsa_input_key", key.pack()), ("rsa_input_msg", (0x1234567 % key.n).to_bytes(256, "big")),
               ("rsa_op", bytes(4)), ("rsa_check", bytes(4))]
    fast = _run(lambda: make_machine(cfg), elf("xrsa_pair"), True, symbols)
    assert fast[0] == StopReason.EXIT and fast[1] == 0
    pka = next(stats for stats in fast[-1] if "busy_cycles" in stats)
    assert pka["operations"]["MONTMUL2"] == 2 * 1024
    assert fast == _run(lambda: make_machine(cfg), elf("xrsa_pair"), False, symbols)


def test_spinning_main_loop_with_nothing_to_interrupt_it_stops_at_once_as_stuck(make_machine, elf):
    m = make_machine()
    m.load(elf("spin"))
    m.write_symbol("spin_mode", (1).to_bytes(4, "little"))
    result = m.run(max_cycles=BUDGET)
    assert result.reason == StopReason.STUCK
    assert "stuck in an endless loop at main+" in result.message and "no interrupt can fire" in result.message
    assert result.cycles < 1000  # stopped where it got stuck, not at the budget


def test_hardfault_handler_spinning_after_a_fault_stops_as_stuck_with_the_fault(make_machine, elf):
    m = make_machine()
    m.load(elf("spin"))
    m.write_symbol("spin_mode", (2).to_bytes(4, "little"))
    result = m.run(max_cycles=BUDGET)
    assert result.reason == StopReason.STUCK
    assert "HardFault_Handler" in result.message
    assert result.fault is not None and "unaligned access" in result.fault.cause


def test_spinning_main_loop_reaches_each_systick_at_the_same_cycle_as_without_fast_forward(make_machine, elf):
    """`while (1);` with SysTick at 1 ms: the fast-forward lands every tick exactly."""
    def ticks(fast):
        m = make_machine()
        m.load(elf("spin"))
        m.write_symbol("spin_mode", (0).to_bytes(4, "little"))
        m.fast_paths = fast
        m.add_breakpoint(m.image.symbol("SysTick_Handler").address)
        seen = []
        for _ in range(3):
            r = m.run(max_cycles=BUDGET)
            assert r.reason == StopReason.BREAKPOINT
            seen.append((m.cycles, m.instructions))
        return seen

    assert ticks(True) == ticks(False)


def test_poll_of_a_ram_flag_is_fast_forwarded_to_the_interrupt_that_sets_it(make_machine, elf):
    fast = _run(make_machine, elf("spin"), True, [("spin_mode", (3).to_bytes(4, "little"))])
    slow = _run(make_machine, elf("spin"), False, [("spin_mode", (3).to_bytes(4, "little"))])
    assert fast == slow
    assert fast[1] == 0  # the poll saw the flag the first SysTick set


# ------------------------------------------------------------------ the NVIC's decisions in C

def _nvic_from(pending, active, enabled, prios):
    n = Nvic("nvic", 0xE000E100, irqs=32)
    n.state.pending, n.state.active, n.state.enabled = pending, active, enabled
    for e, p in prios.items():
        n.state.prio[e] = p
    return n


EXC = st.sampled_from([NMI, HARDFAULT, SVCALL, PENDSV, SYSTICK] + [FIRST_IRQ + i for i in range(32)])


@settings(max_examples=300, deadline=None)
@given(pending=st.sets(EXC), active=st.sets(EXC), enabled=st.integers(0, 2**32 - 1),
       prio=st.dictionaries(st.sampled_from([SVCALL, PENDSV, SYSTICK] + [FIRST_IRQ + i for i in range(32)]),
                            st.sampled_from([0, 0x40, 0x80, 0xC0])),
       primask=st.booleans())
def test_native_nvic_decides_what_to_take_as_the_python_model_does(pending, active, enabled, prio, primask):
    lib = native.load()
    n = _nvic_from(sum(1 << e for e in pending), sum(1 << e for e in active), enabled, prio)
    expected = n.next_to_take(primask)
    assert lib.pk_next_to_take(ctypes.byref(n.state), int(primask)) == (-1 if expected is None else expected)
    assert bool(lib.pk_would_wake(ctypes.byref(n.state))) == n.would_wake()


# ------------------------------------------------------------------ the PKA's MONTMUL in C

@settings(max_examples=200, deadline=None)
@given(words=st.integers(1, 128), data=st.data())
def test_native_montmul_equals_the_python_maths_or_declines(words, data):
    lib = native.load()
    bits = 32 * words
    n = data.draw(st.integers(3, 2**bits - 1)) | 1
    a = data.draw(st.integers(0, 2**bits - 1))
    b = data.draw(st.integers(0, 2**bits - 1))
    arr = ctypes.c_uint32 * words
    r = arr()
    rc = lib.pk_montmul(r, arr.from_buffer_copy(a.to_bytes(4 * words, "little")),
                        arr.from_buffer_copy(b.to_bytes(4 * words, "little")),
                        arr.from_buffer_copy(n.to_bytes(4 * words, "little")), words)
    if rc == 0:
        assert int.from_bytes(bytes(r), "little") == a * b * pow(2, -bits, n) % n
    else:
        assert n.bit_length() < bits - 1  # declines only for a modulus well below the operand length


def _montmul(lib, a: int, b: int, n: int, words: int) -> tuple[int, int]:
    arr = ctypes.c_uint32 * words
    r = arr()
    rc = lib.pk_montmul(r, arr.from_buffer_copy(a.to_bytes(4 * words, "little")),
                        arr.from_buffer_copy(b.to_bytes(4 * words, "little")),
                        arr.from_buffer_copy(n.to_bytes(4 * words, "little")), words)
    return rc, int.from_bytes(bytes(r), "little")


def _declines(a: int, b: int, n: int, bits: int) -> bool:
    """CIOS's rule: (a b + M n) / R, M the one below R that makes it exact, is left at or
    above N after four subtractions (at or above 5N)."""
    r = 1 << bits
    m = -a * b * pow(n, -1, r) % r
    return (a * b + m * n) // r >= 5 * n


ROWS = ["ifma", "adx", "c"]  # AVX-512 IFMA at every length, MULX/ADX, plain C: each where the CPU has it


@contextlib.contextmanager
def _rows(lib, rows: str):
    """The row primitive pk_montmul uses inside the block (then the default again):
    'ifma' the 52-bit IFMA rows at every length (skipped on a CPU without them),
    'adx' the 64-bit MULX/ADX rows, 'c' the portable C rows."""
    lib.pk_montmul_use_adx(int(rows != "c"))
    lib.pk_montmul_use_ifma(2 if rows == "ifma" else 0)
    try:
        if rows == "ifma" and not lib.pk_montmul_use_ifma(2):
            pytest.skip("this CPU has no AVX-512 IFMA")
        yield
    finally:
        lib.pk_montmul_use_adx(1)
        lib.pk_montmul_use_ifma(1)


@pytest.mark.parametrize("rows", ROWS)
@settings(max_examples=300, deadline=None)
@given(words=st.integers(1, 128), square=st.booleans(), data=st.data())
def test_native_montmul_of_products_and_squares_is_exact_and_declines_by_the_cios_rule(rows, words, square, data):
    bits = 32 * words
    n = data.draw(st.one_of(st.integers(3, 2**bits - 1), st.integers(2**(bits - 1), 2**bits - 1))) | 1
    a = data.draw(st.one_of(st.integers(0, 2**bits - 1), st.just(2**bits - 1)))
    b = a if square else data.draw(st.integers(0, 2**bits - 1))
    lib = native.load()
    with _rows(lib, rows):
        rc, r = _montmul(lib, a, b, n, words)
    assert rc == (-1 if _declines(a, b, n, bits) else 0)
    if rc == 0:
        assert r == a * b * pow(2, -bits, n) % n


@pytest.mark.parametrize("words", [2, 4, 6, 8, 10, 16, 32, 62, 64, 128])
def test_native_montmul_rows_agree_at_every_even_length_with_all_ones_operands(words):
    """All-ones limbs take every carry of the two chains (the largest sums a row can make)."""
    lib = native.load()
    bits = 32 * words
    n = 2**bits - 1  # odd, every limb all ones
    for a, b in ((n - 1, n - 1), (n - 1, n - 2), (2**bits - 2, 2**(bits - 1) + 1)):
        got = set()
        for rows in ROWS:
            with contextlib.suppress(pytest.skip.Exception), _rows(lib, rows):
                got.add(_montmul(lib, a, b, n, words))
        assert got == {(0, a * b * pow(2, -bits, n) % n)}


@settings(max_examples=200, deadline=None)
@given(words=st.sampled_from([13, 26, 39, 52, 65, 78, 91, 104, 117]), data=st.data())
def test_native_montmul_ifma_rows_are_exact_when_the_length_is_whole_52_bit_digits(words, data):
    """32w a multiple of 52: no partial last digit, and no shift of the sum."""
    bits = 32 * words
    n = data.draw(st.integers(2**(bits - 2), 2**bits - 1)) | 1
    a, b = data.draw(st.integers(0, 2**bits - 1)), data.draw(st.integers(0, 2**bits - 1))
    lib = native.load()
    with _rows(lib, "ifma"):
        rc, r = _montmul(lib, a, b, n, words)
    assert (rc, r) == (0, a * b * pow(2, -bits, n) % n)


@settings(max_examples=100, deadline=None)
@given(words=st.integers(9, 128), data=st.data())
def test_native_montmul_uses_the_same_bits_with_and_without_ifma_where_the_default_picks_it(words, data):
    """The default picks IFMA from 576 bits (odd lengths from 288) where the CPU has it:
    the 64-bit and 32-bit rows agree."""
    bits = 32 * words
    n = data.draw(st.integers(3, 2**bits - 1)) | 1
    a, b = data.draw(st.integers(0, 2**bits - 1)), data.draw(st.integers(0, 2**bits - 1))
    lib = native.load()
    default = _montmul(lib, a, b, n, words)
    with _rows(lib, "adx"):
        assert _montmul(lib, a, b, n, words) == default


@pytest.mark.parametrize("rows", ROWS)
@settings(max_examples=60, deadline=None)
@given(words=st.sampled_from([8, 9, 17, 18, 32, 33, 64]), data=st.data())
def test_native_montmul_is_exact_when_a_modulus_is_reused_then_changed_then_reused(rows, words, data):
    """The firmware runs thousands of MONTMULs on one modulus, then another of the same
    length: no path may keep anything of a modulus that serves the next one wrongly."""
    bits = 32 * words
    first, other = (data.draw(st.integers(2**(bits - 1), 2**bits - 1)) | 1 for _ in range(2))
    lib = native.load()
    with _rows(lib, rows):
        for n in (first, first, other, first, other):
            for _ in range(3):
                a, b = data.draw(st.integers(0, n - 1)), data.draw(st.integers(0, n - 1))
                assert _montmul(lib, a, b, n, words) == (0, a * b * pow(2, -bits, n) % n)
                assert _montmul(lib, a, a, n, words) == (0, a * a * pow(2, -bits, n) % n)


ROOT = Path(__file__).resolve().parent.parent
IFMA_SUM_C = r"""
#include "pka_montmul.c"
/* the IFMA rows' sum (t, h) as pk_montmul reads it: shifted right by dp, w / 2 + 1 words */
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) void sum_words(uint64_t *u, const uint64_t *t,
                                                                       const uint64_t *h, uint32_t w) {
    uint32_t bits = 32 * w, digits = bits / 52 + (bits % 52 != 0);
    to_words(u, t, h, (digits + 7) / 8, bits % 52, w / 2 + 1);
}
"""


@pytest.fixture(scope="module")
def ifma_sum(tmp_path_factory):
    """pka_montmul.c's carry resolution alone, built with the C compiler (CC, else cc)."""
    lib = native.load()
    if not lib.pk_montmul_use_ifma(1):
        pytest.skip("this CPU has no AVX-512 IFMA")
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        pytest.skip(f"no C compiler {cc}")
    tmp = tmp_path_factory.mktemp("ifma_sum")
    (tmp / "sum.c").write_text(IFMA_SUM_C)
    subprocess.run([cc, "-O2", "-std=c99", "-fPIC", "-shared", "-I", str(ROOT / "peripherals"),
                    "-o", str(tmp / "sum.so"), str(tmp / "sum.c")], check=True)
    return ctypes.CDLL(str(tmp / "sum.so"))


ALL_ONES = 2**52 - 1


@settings(max_examples=400, deadline=None)
@given(words=st.integers(1, 128), data=st.data())
def test_ifma_sum_resolves_carries_through_runs_of_all_ones_digits(ifma_sum, words, data):
    """Lanes of 52 ones that take a carry pass it on (the ripple of the lane masks):
    lanes drawn around 2^52 - 1 make long runs of them, against Python's integer. The
    rows leave lanes far below 2^63 (at most 4 terms below 2^52 a digit), so a lane of
    t plus one of h stays below 2^64."""
    bits = 32 * words
    digits = bits // 52 + (bits % 52 != 0)
    lanes = 8 * ((digits + 7) // 8)
    lane = st.one_of(st.just(ALL_ONES), st.integers(ALL_ONES - 2, ALL_ONES),
                     st.integers(1, 3).map(lambda c: c << 52 | ALL_ONES), st.integers(0, 2**63 - 1))
    t = data.draw(st.lists(lane, min_size=lanes, max_size=lanes)) + [0]
    h = data.draw(st.lists(st.one_of(st.just(0), st.integers(0, 2**63 - 1)), min_size=lanes, max_size=lanes))
    total = sum(x << (52 * i) for i, x in enumerate(t)) + sum(x << (52 * (i + 1)) for i, x in enumerate(h))
    arr = ctypes.c_uint64 * (lanes + 1)
    u = (ctypes.c_uint64 * (words // 2 + 1))()
    ifma_sum.sum_words(u, arr(*t), arr(*h, 0), ctypes.c_uint32(words))
    assert int.from_bytes(bytes(u), "little") == (total >> (bits % 52)) % 2**(64 * (words // 2 + 1))


def test_native_montmul_serves_full_length_moduli():
    lib = native.load()
    rng = random.Random(7)
    for words in (32, 64):
        bits = 32 * words
        n = rng.getrandbits(bits) | 1 | 1 << (bits - 1)
        a, b = rng.getrandbits(bits), rng.getrandbits(bits)
        arr = ctypes.c_uint32 * words
        r = arr()
        assert lib.pk_montmul(r, arr.from_buffer_copy(a.to_bytes(4 * words, "little")),
                              arr.from_buffer_copy(b.to_bytes(4 * words, "little")),
                              arr.from_buffer_copy(n.to_bytes(4 * words, "little")), words) == 0
        assert int.from_bytes(bytes(r), "little") == a * b * pow(2, -bits, n) % n


def test_reset_vector_to_unmapped_memory_ends_stuck_in_the_hardfault_handler_with_the_fault(make_machine, elf):
    """A broken image whose handler spins: the fetch fault is reported, and the run
    ends where it spins instead of running out the budget."""
    m = make_machine()
    m.load(elf("spin"))
    m.write_u32(m.config.flash.base + 4, 0x10000001)  # reset vector: unmapped, Thumb bit set
    m.reset()
    result = m.run(max_cycles=BUDGET)
    assert result.reason == StopReason.STUCK and "HardFault_Handler" in result.message
    assert result.fault is not None and "0x10000000" in result.fault.cause


# ------------------------------------------------------------------ the PKA's other operations in C

@settings(max_examples=400, deadline=None)
@given(op=st.sampled_from([2, 3, 4, 5]), words=st.integers(1, 128), data=st.data())
def test_native_modadd_modsub_add_sub_equal_the_python_maths_or_decline(op, words, data):
    """pk_pka_arith serves ADD and SUB always, and MODADD and MODSUB whose result is at
    most four subtractions of N away (operands below N, or a few times N); it declines
    the rest (N = 0, operands far above N), which pka.py reduces or refuses."""
    from pkasim.peripherals.pka_math import COMMANDS

    lib = native.load()
    bits = 32 * words
    wide = data.draw(st.booleans())  # N of the operands' width (RSA's CRT), else any
    n = data.draw(st.integers(2 ** (bits - 1), 2**bits - 1) if wide else st.integers(0, 2**bits - 1))
    below = data.draw(st.booleans()) and n > 0
    a = data.draw(st.integers(0, n - 1)) if below else data.draw(st.integers(0, 2**bits - 1))
    b = data.draw(st.integers(0, n - 1)) if below else data.draw(st.integers(0, 2**bits - 1))
    arr = ctypes.c_uint32 * words
    r, carry = arr(), ctypes.c_uint32(7)
    rc = lib.pk_pka_arith(op, r, *(arr.from_buffer_copy(v.to_bytes(4 * words, "little")) for v in (a, b, n)),
                          words, ctypes.byref(carry))
    if op in (2, 3):
        steps = None if n == 0 else (a + b) // n if op == 2 else abs(a - b) // n
        if steps is None or steps > 4:
            assert rc == -1  # pka.py's: a full reduction, or OPERRF for N = 0
            return
    assert rc == 0
    assert (int.from_bytes(bytes(r), "little"), carry.value) == COMMANDS[op].function(a, b, n, words)


def test_ecc_image_runs_identically_with_and_without_fast_paths(make_machine, elf):
    """Ed25519 verification on the PKA: thousands of MONTMULs, MODADDs and MODSUBs served
    natively, and one-block polls whose PKA operation may end after the poll's read in a
    block of several (the RFC 8032 TEST 1 vector)."""
    pub = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
    sig = bytes.fromhex("e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e"
                        "39701cf9b46bd25bf5f0595bbe24655141438e7a100b")
    symbols = [("ecc_op", (8).to_bytes(4, "little")), ("ecc_peer", pub.ljust(65, b"\0")), ("ecc_sig", sig),
               ("ecc_check", bytes(4))]
    fast = _run(make_machine, elf("ecc"), True, symbols)
    assert fast[0] == StopReason.EXIT and fast[1] == 0
    pka = next(stats for stats in fast[-1] if "busy_cycles" in stats)
    assert {"MONTMUL", "MODADD", "MODSUB"} <= set(pka["operations"])
    assert fast == _run(make_machine, elf("ecc"), False, symbols)


def _verdicts(m) -> dict[tuple[int, int], tuple[int, int]]:
    s = m.core.state
    return {(s.verdict_addr[i], s.verdict_end[i]): (s.verdict[i], s.verdict_regs[i])
            for i in range(native.VERDICTS) if s.verdict_addr[i] != 0xFFFFFFFF}


@pytest.mark.parametrize("image", ["ecc", "xrsa_win", "xrsa", "spin"])
def test_loop_verdicts_made_natively_equal_the_run_loops_and_change_nothing(make_machine, elf, image):
    """idle.c decides loops of 16-bit code itself (no stop per new loop): the same table
    entries as the run loop's Python verdicts, and the same run, with an 'until' and a
    breakpoint set (at main's first instruction, where the run stands: passed once)."""
    outcomes, tables = [], []
    for natively in (True, False):
        m = make_machine()
        m.load(elf(image))
        m._loop.native_verdicts = natively
        first = m.run(until="main", max_cycles=BUDGET)
        m.add_breakpoint(m.image.symbol("main").address & ~1)
        at_bp = m.run(max_cycles=BUDGET)
        outcomes.append((first.reason, first.cycles, at_bp.reason, _outcome(m, m.run(max_cycles=BUDGET))))
        tables.append(_verdicts(m))
    assert outcomes[0] == outcomes[1]
    assert tables[0] == tables[1]
    assert tables[0]


def _xrsa_win_at(make_machine, elf, natively: bool, cycles: int):
    key = demo_key(2048)
    m = make_machine()
    m.load(elf("xrsa_win"))
    m._loop.native_verdicts = natively
    for name, data in [("rsa_input_key", key.pack()), ("rsa_input_msg", (0x1234567 % key.n).to_bytes(256, "big")),
                       ("rsa_op", bytes(4)), ("rsa_check", bytes(4))]:
        m.write_symbol(name, data)
    assert m.run(max_cycles=cycles).reason == StopReason.BUDGET
    return m


def test_breakpoint_added_in_a_loop_decided_natively_stops_where_python_verdicts_stop(make_machine, elf):
    """A polling loop idle.c decided itself (the run loop never saw it) is decided again
    when a breakpoint comes into its code: the run stops at the breakpoint at the same
    cycle as with every verdict Python's."""
    m = _xrsa_win_at(make_machine, elf, True, 200_000)
    s = m.core.state
    idle = sorted(s.verdict_addr[i] & ~1 for i in range(native.VERDICTS)
                  if s.verdict_addr[i] != 0xFFFFFFFF and s.verdict[i] & 3 == 1
                  and (s.verdict_addr[i], s.verdict_end[i]) not in m._loop._loops)
    hits = 0
    for start in idle:
        stops = []
        for natively in (True, False):
            m = _xrsa_win_at(make_machine, elf, natively, 200_000)
            m.add_breakpoint(start)
            r = m.run(max_cycles=BUDGET)
            stops.append((r.reason, m.core.pc, r.cycles))
        assert stops[0] == stops[1]
        hits += stops[0][:2] == (StopReason.BREAKPOINT, start)
    assert hits >= 2  # (a loop of the start-up code is not entered again)
