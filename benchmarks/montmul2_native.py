"""MONTMUL2 (the parallel pair) in native code against MONTMUL2 through pka.py.

On the Victor preset (configs/presets/victor-radix16.yaml) xrsa_pair.elf makes two
MONTMUL2s per exponent bit. pka_fast.c serves them from START to the done interrupt;
with the record's ``pair`` field cleared the fast path declines them and pka.py
computes and schedules each one (what every MONTMUL2 did before the native path:
a Python call, a clock event and an engine stop per operation). Both ways run in one
process, alternating, on the image's built-in RSA-4096 input and on an RSA-2048
bench key; the script prints the median wall time of each, their ratio, and checks
that cycles and outputs are the same.

Timing belongs here, never in tests: the machine is shared, so only ratios measured
in one run mean much.

    .venv/bin/python benchmarks/montmul2_native.py [--repeat R]
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from pathlib import Path

from pkasim import Machine, load_config
from pkasim.rsa.rsakey import demo_key

ROOT = Path(__file__).resolve().parent.parent

VICTOR = ROOT / "configs" / "presets" / "victor-radix16.yaml"
IMAGE = ROOT / "firmware" / "build" / "xrsa_pair.elf"


def once(native_pair: bool, symbols: list[tuple[str, bytes]]) -> tuple[float, tuple]:
    m = Machine(load_config(VICTOR), stdout=io.BytesIO(), stderr=io.BytesIO())
    m.load(IMAGE)
    for name, data in symbols:
        m.write_symbol(name, data)
    pka = m.peripherals["pka"]
    pka.state.pair = int(native_pair)
    t0 = time.perf_counter()
    r = m.run(max_cycles=10**10)
    wall = time.perf_counter() - t0
    assert r.exit_code == 0, r.message
    stats = pka.stats()
    outcome = (r.cycles, r.instructions, bytes(m.read_symbol("rsa_output")), sorted(stats["operations"].items()),
               sorted(stats["by_length"].items()), stats["busy_cycles"], pka.log)
    return wall, outcome


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    key = demo_key(2048)
    jobs = {"RSA-4096 (built-in input)": [],
            "RSA-2048 (demo key)": [("rsa_input_key", key.pack()),
                                    ("rsa_input_msg", (0x1234567 % key.n).to_bytes(256, "big")),
                                    ("rsa_op", bytes(4)), ("rsa_check", bytes(4))]}
    print(f"{'job':28} {'MONTMUL2':>9} {'native s':>9} {'pka.py s':>9} {'ratio':>6}  cycles")
    for name, symbols in jobs.items():
        walls: dict[bool, list[float]] = {True: [], False: []}
        outcomes = set()
        for _ in range(args.repeat):
            for native_pair in (False, True):
                wall, outcome = once(native_pair, symbols)
                walls[native_pair].append(wall)
                outcomes.add(repr(outcome))
        assert len(outcomes) == 1, "the two paths disagree"
        cycles, pairs = outcome[0], dict(outcome[3]).get("MONTMUL2", 0)
        fast, slow = statistics.median(walls[True]), statistics.median(walls[False])
        print(f"{name:28} {pairs:>9,} {fast:>9.3f} {slow:>9.3f} {slow / fast:>5.1f}x  {cycles:,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
