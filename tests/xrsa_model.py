"""A pure-Python model of the xRSA firmware (firmware/src/rsa.c), step for step.

It runs the same sequence of PKA operations as the firmware, on a model of the PKA RAM
with the firmware's layout (read from firmware/src/rsa_layout.h), with the operations'
arithmetic as docs/pka.md defines it. It counts every operation by the step of the
paper it belongs to, so the Montgomery-multiplication counts of docs/xrsa.md can be
checked without the emulator, and any reuse of a PKA RAM region that clobbers a live
operand shows up as a wrong result.

    from xrsa_model import Key, rsa_private, rsa_get_public_key
    s, counts = rsa_private(Key.from_numbers(p, q, e=65537), m, variant="paper")

``variant`` is "paper" (Algorithms 1-3 as printed, Algorithm 2 read as
s_i = s_(i-1) (x) s_1) or "opt" (the optimized variant): the firmware's xrsa.elf and
xrsa_opt.elf. ``strict=True`` is the sequence of their builds for a PKA with
strict_operands (rsa.c with RSA_STRICT=1), run on a model PKA that refuses a modular
operand at or above the modulus as that chip does.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

LAYOUT_H = Path(__file__).resolve().parent.parent / "firmware" / "src" / "rsa_layout.h"
VARIANTS = ("paper", "opt")


def read_layout(path: Path = LAYOUT_H) -> tuple[dict[str, tuple[int, int]], dict[str, list[str]], int]:
    """(regions name -> (offset, length) in words, phases name -> region names, RAM words)."""
    text = path.read_text()
    values = {m[1]: int(m[2]) for m in re.finditer(r"^#define\s+LAY_(\w+)\s+(\d+)\b", text, re.M)}
    regions = {name: (off, values[f"{name}_LEN"]) for name, off in values.items()
               if f"{name}_LEN" in values}
    phases = {m[1]: m[2].split() for m in re.finditer(r'^#define\s+LAY_PHASE_(\w+)\s+"([^"]*)"', text, re.M)}
    return regions, phases, values["RAM_WORDS"]


REGIONS, PHASES, RAM_WORDS = read_layout()
L4096 = 64  # words per prime for RSA-4096 (LEN of the exponentiation)


def _r(name: str) -> int:
    return REGIONS[name][0]


@dataclass(frozen=True)
class Key:
    """An RSA key with its CRT components (rsa_key_t's fields as integers)."""

    nbits: int
    e: int
    p: int
    q: int
    dp: int
    dq: int
    qinv: int

    @classmethod
    def from_numbers(cls, p: int, q: int, e: int = 65537, nbits: int | None = None) -> Key:
        n = p * q
        d = pow(e, -1, (p - 1) * (q - 1) // _gcd(p - 1, q - 1))
        return cls(nbits or n.bit_length(), e, p, q, d % (p - 1), d % (q - 1), pow(q, -1, p))

    @property
    def n(self) -> int:
        return self.p * self.q

    @property
    def d(self) -> int:
        lam = (self.p - 1) * (self.q - 1) // _gcd(self.p - 1, self.q - 1)
        return pow(self.e, -1, lam)

    def pack(self, nbits: int | None = None) -> bytes:
        """rsa_key_t (firmware/src/rsa.h): each value big-endian in the first nbits/16
        bytes of its 256-byte field. ``nbits`` overrides the size field only (tests of
        refused sizes); the CRT values stay the key's own."""
        half = self.nbits // 16
        out = (self.nbits if nbits is None else nbits).to_bytes(2, "little") + bytes(2) + self.e.to_bytes(4, "big")
        out += b"".join(v.to_bytes(half, "big").ljust(256, b"\0") for v in (self.p, self.q, self.dp, self.dq, self.qinv))
        assert len(out) == 1288
        return out


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a


class PkaError(Exception):
    """A request the PKA would refuse (docs/pka.md: ADDRERRF or OPERRF)."""


class Pka:
    """PKA RAM (words) and the five operations of docs/pka.md, counted by step."""

    def __init__(self, ram_words: int = RAM_WORDS, max_words: int = 64, strict: bool = False) -> None:
        self.ram = bytearray(4 * ram_words)
        self.max_words = max_words
        self.strict = strict
        self.step = ""
        self.counts: Counter[tuple[str, str]] = Counter()  # (step, op) -> count
        self.by_length: Counter[tuple[str, int]] = Counter()  # (op, LEN) -> count
        self.carry = 0
        self._inverses: dict[tuple[int, int], int] = {}

    def _rinv(self, n: int, words: int) -> int:
        """R^-1 mod n, R = 2^(32*words), kept per modulus (it changes only between phases)."""
        key = (n, words)
        if key not in self._inverses:
            self._inverses[key] = pow(2, -32 * words, n)
        return self._inverses[key]

    # CPU side: word loads and fetches, as the driver does them.
    def load(self, off: int, value: int, words: int) -> None:
        self._check(off, words)
        self.ram[4 * off:4 * (off + words)] = value.to_bytes(4 * words, "little")

    def fetch(self, off: int, words: int) -> int:
        self._check(off, words)
        return int.from_bytes(self.ram[4 * off:4 * (off + words)], "little")

    def write_word(self, off: int, value: int) -> None:
        self.load(off, value, 1)

    def fill(self, off: int, word: int, words: int) -> None:
        self.load(off, sum(word << (32 * i) for i in range(words)), words)

    def _check(self, off: int, words: int) -> None:
        if off < 0 or off + words > len(self.ram) // 4:
            raise PkaError(f"{words} words at word {off} run past the end of PKA RAM ({len(self.ram) // 4} words)")

    # The engine.
    def op(self, name: str, words: int, a: int, b: int, n: int | None, r: int) -> int:
        if not 1 <= words <= self.max_words:
            raise PkaError(f"LEN {words}")
        va, vb = self.fetch(a, words), self.fetch(b, words)
        self._check(r, words)
        vn = self.fetch(n, words) if n is not None else 0
        self.carry = 0
        if self.strict and n is not None and (va >= vn or vb >= vn):
            raise PkaError(f"{name}: an operand >= N (strict_operands)")
        if name == "MONTMUL":
            if vn % 2 == 0 or vn <= 1:
                raise PkaError("MONTMUL needs an odd N > 1")
            res = va * vb * self._rinv(vn, words) % vn
        elif name == "MODADD":
            res = (va + vb) % vn
        elif name == "MODSUB":
            res = (va - vb) % vn
        elif name == "ADD":
            total = va + vb
            res, self.carry = total & ((1 << (32 * words)) - 1), total >> (32 * words)
        elif name == "SUB":
            res, self.carry = (va - vb) & ((1 << (32 * words)) - 1), int(vb > va)
        else:
            raise PkaError(name)
        self.load(r, res, words)
        self.counts[(self.step, name)] += 1
        self.by_length[(name, words)] += 1
        return self.carry

    def montmuls(self, step: str | None = None) -> int:
        return sum(c for (s, o), c in self.counts.items() if o == "MONTMUL" and (step is None or s == step))

    def steps(self) -> dict[str, int]:
        """MONTMULs per step, in the order the steps ran."""
        out: dict[str, int] = {}
        for (s, o), c in self.counts.items():
            if o == "MONTMUL":
                out[s] = out.get(s, 0) + c
        return out


# --------------------------------------------------------------------------- the firmware's steps

def _words(nbits: int) -> int:
    if nbits not in (2048, 4096):
        raise ValueError(f"nbits must be 2048 or 4096, got {nbits}")
    return nbits // 64  # LEN of the exponentiation: nbits/2 bits per prime


def _r_mod_p(pka: Pka, L: int, dst: int) -> None:
    """R mod p into dst: (R - 1) (+) 1, or 0 - p by SUB in the strict builds."""
    P, T, ONE = _r("P"), _r("T"), _r("ONE")
    if pka.strict:
        pka.fill(T, 0, L)
        pka.op("SUB", L, T, P, None, dst)           # 0 - p = R - p = R mod p (p > R/2)
    else:
        pka.fill(T, 0xFFFFFFFF, L)                  # R - 1
        pka.op("MODADD", L, T, ONE, P, dst)


def _reduce_once(pka: Pka, L: int, x: int) -> int:
    """The region holding x mod p for x < 2p: x, or x - p in RED (strict builds)."""
    borrow = pka.op("SUB", L, x, _r("P"), None, _r("RED"))
    return x if borrow else _r("RED")


def _mont_r2(pka: Pka, L: int, variant: str, tag: str) -> None:
    """R^2 mod p into RR (Algorithm 2). The optimized variant leaves R mod p in Y."""
    P, RR, T, Y = _r("P"), _r("RR"), _r("T"), _r("Y")
    pka.step = f"R^2 mod {tag}"
    if variant == "paper":
        _r_mod_p(pka, L, RR)                        # s = (R-1) (+) 1 = R mod p
        pka.op("MODADD", L, RR, RR, P, T)           # s_1 = s (+) s = 2R mod p
        pka.op("MONTMUL", L, T, T, P, RR)           # s_2 = s_1 (x) s_1
        for _ in range(3, 32 * L + 1):              # s_i = s_(i-1) (x) s_1, i = 3..n
            pka.op("MONTMUL", L, RR, T, P, RR)
    else:
        _r_mod_p(pka, L, Y)                         # R mod p: Montgomery form of 1, kept as y
        pka.op("MODADD", L, Y, Y, P, RR)            # 2R mod p: Montgomery form of 2
        k = 1
        while k < 32 * L:                            # (2^k R) (x) (2^k R) = 2^(2k) R
            pka.op("MONTMUL", L, RR, RR, P, RR)
            k *= 2
        assert k == 32 * L                          # 2^n R = R^2


def _exp(pka: Pka, L: int, variant: str, tag: str, prime: int, d: int, m: int, dest: str | None) -> None:
    """S = m^d mod prime (Algorithms 2, eq. (2), Algorithm 3); result in Y (or dest)."""
    P, RR, T, Y, DUM, ONE = (_r(x) for x in ("P", "RR", "T", "Y", "DUM", "ONE"))
    pka.load(P, prime, L)
    _mont_r2(pka, L, variant, tag)
    pka.step = f"m mod {tag}"
    pka.load(T, m >> (32 * L), L)                   # m1
    pka.load(DUM, m & ((1 << (32 * L)) - 1), L)     # m2
    pka.op("MONTMUL", L, T, RR, P, T)               # m1 (x) R^2 = m1 R mod p
    m2 = _reduce_once(pka, L, DUM) if pka.strict else DUM  # m2 < R < 2p
    pka.op("MODADD", L, T, m2, P, T)                # (+) m2 = m mod p
    pka.step = f"Algorithm 3 mod {tag}"
    if variant == "paper":
        pka.op("MONTMUL", L, ONE, RR, P, Y)         # y = 1 (x) R^2
    pka.op("MONTMUL", L, T, RR, P, T)               # t = m (x) R^2
    bits = 32 * L
    for i in range(bits):
        bit = (d >> i) & 1
        pka.op("MONTMUL", L, Y, T, P, Y if bit else DUM)
        if variant == "paper" or i < bits - 1:
            pka.op("MONTMUL", L, T, T, P, T)
    if dest is not None:
        pka.op("MONTMUL", L, Y, ONE, P, _r(dest))   # y (x) 1


def _load_halves(pka: Pka, off: int, x: int, L: int) -> None:
    """[LO(x), 0, HI(x), 0] for L = 64 (halves of 32 words); [x, 0] for L = 32."""
    if L == L4096:
        pka.load(off, x & ((1 << 1024) - 1), 32)
        pka.fill(off + 32, 0, 32)
        pka.load(off + 64, x >> 1024, 32)
        pka.fill(off + 96, 0, 32)
    else:
        pka.load(off, x, 32)
        pka.fill(off + 32, 0, 32)


def _wide_mul(pka: Pka, L: int, acc: int) -> None:
    """acc = x*y from XH and YQ: Table II (4 products, 3 additions) or 1 product."""
    MOD1, T2, T3, CW, XH, YQ = (_r(x) for x in ("MOD1", "T2", "T3", "CW", "XH", "YQ"))
    if L != L4096:
        pka.op("MONTMUL", 64, XH, YQ, MOD1, acc)    # x*y < 2^2048 - 1
        return
    pka.op("MONTMUL", 64, XH, YQ, MOD1, acc)            # x2*y2 -> bits 0..2047
    pka.op("MONTMUL", 64, XH + 64, YQ + 64, MOD1, acc + 64)  # x1*y1 -> bits 2048..4095
    pka.op("MONTMUL", 64, XH + 64, YQ, MOD1, T2)        # x1*y2
    pka.op("MONTMUL", 64, XH, YQ + 64, MOD1, T3)        # x2*y1
    c1 = pka.op("ADD", 64, T2, T3, None, T2)
    c2 = pka.op("ADD", 64, acc + 32, T2, None, acc + 32)
    pka.write_word(CW, c1 + c2)
    c = pka.op("ADD", 32, acc + 96, CW, None, acc + 96)
    assert c == 0


def rsa_private(key: Key, m: int, variant: str = "paper", strict: bool = False) -> tuple[int, Pka]:
    """m^d mod N as the firmware computes it; returns (S, the PKA with its counters).
    ``strict``: the RSA_STRICT build's sequence, on a PKA that refuses operands >= N."""
    if variant not in VARIANTS:
        raise ValueError(variant)
    L = _words(key.nbits)
    if not 0 <= m < 1 << key.nbits:
        raise ValueError("message longer than the key")
    pka = Pka(strict=strict)
    P, RR, T, Y, DUM, ONE, SQ = (_r(x) for x in ("P", "RR", "T", "Y", "DUM", "ONE", "SQ"))
    pka.load(ONE, 1, L)
    # Algorithm 1, step 2 first (section III-D): S_q, parked in SQ.
    _exp(pka, L, variant, "q", key.q, key.dq, m, "SQ")
    # Step 1: S_p in Y (the optimized variant keeps it in Montgomery form).
    _exp(pka, L, variant, "p", key.p, key.dp, m, "Y" if variant == "paper" else None)
    # Step 3: h = qinv * (S_p - S_q) mod p.
    pka.step = "step 3: h"
    if variant == "paper":
        sq = _reduce_once(pka, L, SQ) if strict else SQ  # S_q < q < 2p
        pka.op("MODSUB", L, Y, sq, P, DUM)          # S_p (-) S_q
        pka.load(T, key.qinv, L)
        pka.op("MONTMUL", L, T, RR, P, T)           # qinv R
        pka.op("MONTMUL", L, DUM, RR, P, DUM)       # (S_p - S_q) R
        pka.op("MONTMUL", L, T, DUM, P, Y)          # h R
        pka.op("MONTMUL", L, Y, ONE, P, Y)          # h
    else:
        sq = _reduce_once(pka, L, SQ) if strict else SQ  # S_q < q < 2p
        pka.op("MONTMUL", L, sq, RR, P, DUM)        # S_q R mod p
        pka.op("MODSUB", L, Y, DUM, P, DUM)         # (S_p - S_q) R
        pka.load(T, key.qinv, L)
        pka.op("MONTMUL", L, T, DUM, P, Y)          # qinv (S_p - S_q) R R^-1 = h
    # Step 4: M = S_q + h*q.
    pka.step = "step 4: S_q + h*q"
    MOD1, CW, XH, YQ, ACC, NACC = (_r(x) for x in ("MOD1", "CW", "XH", "YQ", "ACC", "NACC"))
    h = pka.fetch(Y, L)
    _load_halves(pka, XH, h, L)                     # the firmware copies word by word
    pka.fill(MOD1, 0xFFFFFFFF, 64)
    pka.fill(CW, 0, 64)
    _load_halves(pka, YQ, key.q, L)
    _wide_mul(pka, L, ACC)
    if L == L4096:
        c3 = pka.op("ADD", 64, ACC, SQ, None, ACC)
        pka.write_word(CW, c3)
        assert pka.op("ADD", 64, ACC + 64, CW, None, ACC + 64) == 0
    else:
        c3 = pka.op("ADD", 32, ACC, SQ, None, ACC)
        pka.write_word(CW, c3)
        assert pka.op("ADD", 32, ACC + 32, CW, None, ACC + 32) == 0
    words = 2 * L
    if variant == "opt":
        return pka.fetch(ACC, words), pka
    # Equation (3): M - N if M >= N (the paper variant computes N = p*q for it).
    pka.step = "equation 3: N = p*q"
    _load_halves(pka, XH, key.p, L)
    _wide_mul(pka, L, NACC)
    pka.step = "equation 3: M - N"
    if L == L4096:
        b1 = pka.op("SUB", 64, ACC, NACC, None, XH)
        b2 = pka.op("SUB", 64, ACC + 64, NACC + 64, None, XH + 64)
        pka.write_word(CW, b1)
        b3 = pka.op("SUB", 64, XH + 64, CW, None, XH + 64)
        borrow = b2 | b3
    else:
        borrow = pka.op("SUB", 64, ACC, NACC, None, XH)
    return pka.fetch(ACC if borrow else XH, words), pka


def rsa_get_public_key(key: Key) -> tuple[int, Pka]:
    """N = p*q as the firmware computes it (Table II on the multiplier)."""
    L = _words(key.nbits)
    pka = Pka()
    pka.step = "N = p*q"
    pka.fill(_r("MOD1"), 0xFFFFFFFF, 64)
    pka.fill(_r("CW"), 0, 64)
    _load_halves(pka, _r("XH"), key.p, L)
    _load_halves(pka, _r("YQ"), key.q, L)
    _wide_mul(pka, L, _r("NACC"))
    return pka.fetch(_r("NACC"), 2 * L), pka


def algorithm2(p: int, n: int, reading: str) -> tuple[int, int]:
    """Algorithm 2 on integers for an odd p < 2^n: (result, MONTMULs).

    ``"printed"``: s_i = s_(i-1) (x) s_(i-1), i = 2..n, as the paper prints it;
    ``"corrected"``: s_i = s_(i-1) (x) s_1 (the paper variant);
    ``"squaring"``: square s_1 = 2R until 2^n R = R^2 (the optimized variant).
    """
    r_inv = pow(2, -n, p)

    def mont(a: int, b: int) -> int:
        return a * b * r_inv % p

    s = ((1 << n) - 1 + 1) % p                   # s = (R - 1) (+) 1
    s1 = 2 * s % p                               # s_1 = s (+) s
    si, count = s1, 0
    if reading == "squaring":
        k = 1
        while k < n:
            si, k, count = mont(si, si), 2 * k, count + 1
        return si, count
    for _ in range(2, n + 1):
        si = mont(si, si) if reading == "printed" else mont(si, s1)
        count += 1
    return si, count


def expected_montmuls(nbits: int, variant: str) -> dict[str, int]:
    """docs/xrsa.md's step-by-step count of MONTMULs for one rsa_private."""
    n = nbits // 2  # bits per prime = 32 * LEN
    if variant == "paper":
        per_prime = {"R^2 mod {}": n - 1, "m mod {}": 1, "Algorithm 3 mod {}": 2 + 2 * n + 1}
        tail = {"step 3: h": 4, "step 4: S_q + h*q": 4 if nbits == 4096 else 1,
                "equation 3: N = p*q": 4 if nbits == 4096 else 1}
        q_alg3 = p_alg3 = per_prime["Algorithm 3 mod {}"]
    else:
        per_prime = {"R^2 mod {}": n.bit_length() - 1, "m mod {}": 1}
        q_alg3 = 1 + (2 * n - 1) + 1   # t = m (x) R^2, the loop without its last squaring, y (x) 1
        p_alg3 = 1 + (2 * n - 1)       # S_p stays in Montgomery form for step 3
        tail = {"step 3: h": 2, "step 4: S_q + h*q": 4 if nbits == 4096 else 1}
    out: dict[str, int] = {}
    for tag, alg3 in (("q", q_alg3), ("p", p_alg3)):
        out[f"R^2 mod {tag}"] = per_prime["R^2 mod {}"]
        out[f"m mod {tag}"] = per_prime["m mod {}"]
        out[f"Algorithm 3 mod {tag}"] = alg3
    out.update(tail)
    return out
