"""Fit the default chip's PKA timing to ONE figure of the xRSA paper, and show the fit.

The paper measures the xRSA RSA-4096 private-key operation at 2.2 ops/s on the
CIU98320B; its Mbed TLS comparison gives the time as 455 ms (203x faster than
software). The CIU98320B's PKA timing is not public, so pkasim's default chip keeps
the shape of a 32-bit digit-serial Montgomery multiplier,

    MONTMUL cycles = ceil(a * d^2 + b * d + c),  d = LEN words,  b = 3, c = 16,

and fits the one free scale ``a`` so that the paper variant of xRSA (xrsa.elf, the
paper's own algorithms) takes 455 ms at 48 MHz. Every other figure of the paper is
then a prediction (docs/reproduction.md).

Busy time is linear in ``a`` (up to the ceiling), so two runs give the line and a
third checks the fitted value:

    .venv/bin/python traces/fit_pka.py
"""

from __future__ import annotations

import dataclasses
import io
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from pkasim import Machine, load_config  # noqa: E402

TARGET_MS = 455.0  # xRSA paper: RSA-4096 private-key operation on the CIU98320B
IMAGE = ROOT / "firmware" / "build" / "xrsa.elf"


def with_montmul_a(a: float):
    cfg = load_config()
    pka = cfg.peripherals["pka"]
    timing = dict(pka.params["timing"])
    b, c = timing["montmul"][1], timing["montmul"][2]
    timing["montmul"] = [a, b, c]
    params = {**pka.params, "timing": timing}
    return dataclasses.replace(cfg, peripherals={**cfg.peripherals, "pka": dataclasses.replace(pka, params=params)})


def rsa4096_cycles(a: float) -> int:
    cfg = with_montmul_a(a)
    m = Machine(cfg, stdout=io.BytesIO(), stderr=io.BytesIO())
    m.load(IMAGE)
    m.run(until="rsa_private", max_cycles=10**10)
    start = m.cycles
    m.add_breakpoint(m.reg("lr") & ~1)
    m.run(max_cycles=10**10)
    return m.cycles - start


def main() -> int:
    hz = load_config().core.clock_hz
    target = round(TARGET_MS * 1e-3 * hz)
    a0, a1 = 0.25, 0.5
    c0, c1 = rsa4096_cycles(a0), rsa4096_cycles(a1)
    slope = (c1 - c0) / (a1 - a0)
    a = round(a0 + (target - c0) / slope, 4)
    got = rsa4096_cycles(a)
    print(f"target: {TARGET_MS} ms = {target:,} cycles at {hz / 1e6:g} MHz (xRSA RSA-4096, paper variant)")
    print(f"a = {a0}: {c0:,} cycles; a = {a1}: {c1:,} cycles; {slope:,.0f} cycles per unit of a")
    print(f"fitted a = {a}: {got:,} cycles = {got / hz * 1e3:.1f} ms ({100 * (got - target) / target:+.2f}%)")
    print(f"2048-bit MONTMUL at a = {a}: ceil({a} * 64^2 + 3 * 64 + 16) = {int(-(-(a * 4096 + 3 * 64 + 16) // 1))} cycles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
