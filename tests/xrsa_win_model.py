"""A pure-Python model of the fixed-window RSA firmware (firmware/src/rsa_win.c).

The same sequence of PKA operations as the firmware, on xrsa_model's PKA model with the
firmware's layout (read from firmware/src/rsa_win_layout.h), counted by step, so the
Montgomery-multiplication counts of docs/xrsa.md ("Fixed-window images") are checked
without the emulator and a clobbered operand shows up as a wrong result. The model PKA
is strict (operands of modular operations below N), as the firmware is written for.

    from xrsa_win_model import rsa_private
    s, pka = rsa_private(key, m)          # raises InputOutOfRange for m >= n
"""

from __future__ import annotations

import re
from pathlib import Path

from xrsa_model import Key, Pka

LAYOUT_H = Path(__file__).resolve().parent.parent / "firmware" / "src" / "rsa_win_layout.h"
R2_SQUARINGS = 7  # R^2 = (2^(L/4) R) squared 7 times
WIDE = 64


class InputOutOfRange(ValueError):
    """m >= n: the firmware returns RSA_ERR_INPUT (RSASP1 / RSADP step 1)."""


def read_layout(path: Path = LAYOUT_H) -> tuple[dict[str, tuple[int, int]], dict[str, list[str]], int]:
    """(regions "W2_P" -> (offset, length) in words, phases "W2_EXP" -> names, RAM words)."""
    text = path.read_text()
    values = {m[1]: int(m[2]) for m in re.finditer(r"^#define\s+(W[24]_\w+|WIN_RAM_WORDS)\s+(\d+)\b", text, re.M)}
    regions = {name: (off, values[f"{name}_LEN"]) for name, off in values.items() if f"{name}_LEN" in values}
    phases = {m[1]: m[2].split() for m in re.finditer(r'^#define\s+WIN_PHASE_(\w+)\s+"([^"]*)"', text, re.M)}
    return regions, phases, values["WIN_RAM_WORDS"]


REGIONS, PHASES, RAM_WORDS = read_layout()


class Layout:
    """One size's regions (word offsets), as rsa_win.c's win_layout_t."""

    def __init__(self, prefix: str) -> None:
        values = {m[1]: int(m[2]) for m in re.finditer(rf"^#define\s+{prefix}_(L|WINDOW)\s+(\d+)\b",
                                                        LAYOUT_H.read_text(), re.M)}
        self.L, self.window = values["L"], values["WINDOW"]
        for name in ("P", "Y", "RR", "TAB", "SQ", "MOD1", "XH", "YQ", "ACC", "CW", "MM", "T2", "T3"):
            key = f"{prefix}_{name}"
            setattr(self, name.lower(), REGIONS[key][0] if key in REGIONS else None)


LAYOUTS = {2048: Layout("W2"), 4096: Layout("W4")}


def _split_load(pka: Pka, ly: Layout, dst: int, x: int) -> None:
    if ly.L == 64:
        pka.load(dst, x & ((1 << 1024) - 1), 32)
        pka.fill(dst + 32, 0, 32)
        pka.load(dst + 64, x >> 1024, 32)
        pka.fill(dst + 96, 0, 32)
    else:
        pka.load(dst, x, 32)
        pka.fill(dst + 32, 0, 32)


def _wide_mul(pka: Pka, ly: Layout) -> None:
    """ACC = x*q from XH and YQ: one product (RSA-2048) or Table II (RSA-4096)."""
    x2, x1, y2, y1, acc = ly.xh, ly.xh + 64, ly.yq, ly.yq + 64, ly.acc
    pka.op("MONTMUL", WIDE, x2, y2, ly.mod1, acc)
    if ly.L != 64:
        return
    pka.op("MONTMUL", WIDE, x1, y1, ly.mod1, acc + WIDE)
    pka.op("MONTMUL", WIDE, x1, y2, ly.mod1, ly.t2)
    pka.op("MONTMUL", WIDE, x2, y1, ly.mod1, ly.t3)
    c = pka.op("ADD", WIDE, ly.t2, ly.t3, None, ly.t2)
    c += pka.op("ADD", WIDE, acc + 32, ly.t2, None, acc + 32)
    pka.write_word(ly.cw, c)
    assert pka.op("ADD", 32, acc + 96, ly.cw, None, acc + 96) == 0
    pka.write_word(ly.cw, 0)


def _public_n(pka: Pka, ly: Layout, key: Key) -> None:
    pka.fill(ly.mod1, 0xFFFFFFFF, WIDE)
    pka.fill(ly.cw, 0, ly.L)
    _split_load(pka, ly, ly.xh, key.p)
    _split_load(pka, ly, ly.yq, key.q)
    _wide_mul(pka, ly)


def _windows(d: int, bits: int, w: int) -> list[int]:
    """The exponent's windows of w bits, most significant first."""
    nwin = -(-bits // w)
    return [(d >> (w * k)) & ((1 << w) - 1) for k in reversed(range(nwin))]


def _crt_exp(pka: Pka, ly: Layout, tag: str, prime: int, d: int, m: int) -> None:
    """m^d R mod prime into Y: crt_setup and crt_pow."""
    L, w = ly.L, ly.window
    t = [ly.tab + j * L for j in range(1 << w)]
    pka.load(ly.p, prime, L)
    pka.fill(t[1], 0, L)
    pka.load(t[2], m >> (32 * L), L)                    # m1
    pka.load(t[3], m & ((1 << (32 * L)) - 1), L)        # m2
    pka.step = f"m mod {tag}"
    m2 = t[3] if pka.op("SUB", L, t[3], ly.p, None, t[4]) else t[4]
    pka.step = f"R^2 mod {tag}"
    pka.op("SUB", L, t[1], ly.p, None, t[0])            # R mod p = 0 - p
    pka.op("MODADD", L, t[0], t[0], ly.p, ly.rr)        # 2R
    for _ in range(1, L // 4):
        pka.op("MODADD", L, ly.rr, ly.rr, ly.p, ly.rr)  # 2^(L/4) R
    for _ in range(R2_SQUARINGS):
        pka.op("MONTMUL", L, ly.rr, ly.rr, ly.p, ly.rr)
    pka.step = f"m mod {tag}"
    pka.op("MONTMUL", L, t[2], ly.rr, ly.p, t[1])       # m1 R
    pka.op("MODADD", L, t[1], m2, ly.p, t[1])           # m mod p
    pka.step = f"table mod {tag}"
    pka.op("MONTMUL", L, t[1], ly.rr, ly.p, t[1])       # T1 = m R
    for j in range(2, 1 << w):
        pka.op("MONTMUL", L, t[j - 1], t[1], ly.p, t[j])
    pka.step = f"exponent mod {tag}"
    top, *rest = _windows(d, 32 * L, w)
    first = True
    for win in rest:
        for _ in range(w):
            a = t[top] if first else ly.y
            pka.op("MONTMUL", L, a, a, ly.p, ly.y)
            first = False
        pka.op("MONTMUL", L, ly.y, t[win], ly.p, ly.y)


def rsa_private(key: Key, m: int) -> tuple[int, Pka]:
    """m^d mod n as rsa_win.c computes it; returns (S, the PKA with its counters)."""
    ly = LAYOUTS[key.nbits]
    L = ly.L
    pka = Pka(ram_words=RAM_WORDS, strict=True)
    pka.step = "range check: n = p*q"
    _public_n(pka, ly, key)
    pka.step = "range check: m - n"
    pka.load(ly.mm, m, 2 * L)
    borrow = pka.op("SUB", WIDE, ly.mm, ly.acc, None, ly.mm)
    if L == 64:
        pka.write_word(ly.cw, borrow)
        borrow = pka.op("SUB", WIDE, ly.mm + WIDE, ly.acc + WIDE, None, ly.mm + WIDE)
        borrow |= pka.op("SUB", WIDE, ly.mm + WIDE, ly.cw, None, ly.mm + WIDE)
        pka.write_word(ly.cw, 0)
    if not borrow:
        raise InputOutOfRange("m >= n")
    t0, t1, t2 = ly.tab, ly.tab + L, ly.tab + 2 * L
    _crt_exp(pka, ly, "q", key.q, key.dq, m)
    pka.step = "S_q = y (x) 1"
    pka.load(t0, 1, L)
    pka.op("MONTMUL", L, ly.y, t0, ly.p, ly.sq)
    _crt_exp(pka, ly, "p", key.p, key.dp, m)
    pka.step = "step 3: h"
    sq = ly.sq if pka.op("SUB", L, ly.sq, ly.p, None, t0) else t0
    pka.op("MONTMUL", L, sq, ly.rr, ly.p, t1)
    pka.op("MODSUB", L, ly.y, t1, ly.p, t1)
    pka.load(t2, key.qinv, L)
    pka.op("MONTMUL", L, t2, t1, ly.p, ly.y)
    pka.step = "step 4: S_q + h*q"
    _split_load(pka, ly, ly.xh, pka.fetch(ly.y, L))   # the firmware copies word by word
    pka.fill(ly.mod1, 0xFFFFFFFF, WIDE)
    pka.fill(ly.cw, 0, L)
    _split_load(pka, ly, ly.yq, key.q)
    _wide_mul(pka, ly)
    pka.write_word(ly.cw, pka.op("ADD", L, ly.acc, ly.sq, None, ly.acc))
    assert pka.op("ADD", L, ly.acc + L, ly.cw, None, ly.acc + L) == 0
    return pka.fetch(ly.acc, 2 * L), pka


def rsa_get_public_key(key: Key) -> tuple[int, Pka]:
    """n = p*q as rsa_win.c computes it."""
    ly = LAYOUTS[key.nbits]
    pka = Pka(ram_words=RAM_WORDS, strict=True)
    pka.step = "n = p*q"
    _public_n(pka, ly, key)
    return pka.fetch(ly.acc, 2 * ly.L), pka


def expected_montmuls(nbits: int) -> dict[str, int]:
    """docs/xrsa.md's count of MONTMULs for one rsa_private of the fixed-window image."""
    ly = LAYOUTS[nbits]
    bits, w = 32 * ly.L, ly.window
    nwin = -(-bits // w)
    wide = 4 if nbits == 4096 else 1
    out = {"range check: n = p*q": wide}
    for tag in ("q", "p"):
        out[f"R^2 mod {tag}"] = R2_SQUARINGS
        out[f"m mod {tag}"] = 1
        out[f"table mod {tag}"] = 1 + (1 << w) - 2
        out[f"exponent mod {tag}"] = (nwin - 1) * (w + 1)
        if tag == "q":
            out["S_q = y (x) 1"] = 1
    out["step 3: h"] = 2
    out["step 4: S_q + h*q"] = wide
    return out
