"""Wall time of a run hashed for `pkasim ct-check` over a plain run, in one process.

For each image, the same Machine run (the image's built-in demo input) is timed
alternately without and with emulator/native/cthash.c attached (its block hook, its memory
hook on every CPU load and store, the observer's events), several rounds. It prints
the median wall time of each, the median of the per-round ratios, and what the hash
counted. The cycle counts of both runs are checked equal.

Timing belongs here, never in tests: the machine is shared, so only ratios measured in
one run mean much.

    .venv/bin/python benchmarks/ctcheck_overhead.py [--repeat R] [IMAGE ...]
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from pkasim.analysis.cthash import CtHash  # noqa: E402
from pkasim.chip.config import load_config  # noqa: E402
from pkasim.chip.loader import load_image  # noqa: E402
from pkasim.core.machine import Machine  # noqa: E402

DEFAULT_IMAGES = ["xrsa", "xrsa_win", "ctleak"]


def once(image: object, hashed: bool) -> tuple[float, int, tuple[int, ...]]:
    config = load_config()
    m = Machine(config, stdout=io.BytesIO(), stderr=io.BytesIO())
    m.load(image)
    h = CtHash(m) if hashed else None
    start = time.perf_counter()
    r = m.run(max_cycles=10**11)
    wall = time.perf_counter() - start
    counts: tuple[int, ...] = ()
    if h is not None:
        counts = h.result().counts
        h.close()
    return wall, r.cycles, counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="rounds (default 5)")
    parser.add_argument("images", nargs="*", default=DEFAULT_IMAGES)
    args = parser.parse_args()
    config = load_config()
    print(f"{args.repeat} rounds per image, medians of wall time (run() only, not machine set-up)")
    print(f"{'image':16} {'cycles':>12} {'plain':>9} {'hashed':>9} {'ratio':>6}   blocks/accesses/PKA ops hashed")
    for name in args.images:
        image = load_image(ROOT / "firmware" / "build" / f"{name}.elf", config)
        plain, hashed, ratios = [], [], []
        counts: tuple[int, ...] = ()
        cycles = None
        for _ in range(args.repeat):
            a, ca, _ = once(image, False)
            b, cb, counts = once(image, True)
            if ca != cb or (cycles is not None and ca != cycles):
                raise SystemExit(f"{name}: cycle counts differ ({ca} vs {cb})")
            cycles = ca
            plain.append(a)
            hashed.append(b)
            ratios.append(b / a)
        print(f"{name:16} {cycles:>12,} {statistics.median(plain):>8.3f}s {statistics.median(hashed):>8.3f}s "
              f"{statistics.median(ratios):>5.2f}x   {counts[0]:,} / {counts[1]:,} / {counts[2]:,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
