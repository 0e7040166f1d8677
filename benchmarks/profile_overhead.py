"""Wall time of `pkasim profile` over plain `pkasim run`, on RSA-4096 xRSA, in one process.

Runs firmware/build/xrsa.elf (the paper variant, the demo key) three ways, alternating,
several times, each through the CLI's own entry point with its output discarded:

* run:      pkasim run FW -q
* profile:  pkasim profile FW -q --json F            (issue #9's target: at most 2x run)
* traces:   the same plus --folded, --trace-events and --vcd (Tarmac is exempt: it
            costs a Python call per traced instruction)

It prints the median wall time of each and the medians of the per-round ratios.
Timing belongs here, never in tests: the machine is shared, so only ratios measured
in one run mean much.

    .venv/bin/python benchmarks/profile_overhead.py [--repeat R] [--elf FW]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from pkasim.cli.main import main as pkasim  # noqa: E402


def timed(argv: list[str]) -> float:
    """Wall seconds of one CLI call, its stdout (the firmware's output) discarded."""
    sys.stdout.flush()
    fd = os.dup(1)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 1)
        try:
            start = time.perf_counter()
            code = pkasim(argv)
            wall = time.perf_counter() - start
            sys.stdout.flush()
        finally:
            os.dup2(fd, 1)
            os.close(fd)
    if code != 0:
        raise SystemExit(f"pkasim {' '.join(argv)} exited {code}")
    return wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--elf", default=str(ROOT / "firmware" / "build" / "xrsa.elf"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        runs = {
            "run": ["run", args.elf, "-q"],
            "profile": ["profile", args.elf, "-q", "--json", str(d / "p.json")],
            "traces": ["profile", args.elf, "-q", "--json", str(d / "p.json"), "--folded", str(d / "s.folded"),
                       "--trace-events", str(d / "t.json"), "--vcd", str(d / "s.vcd")],
        }
        walls: dict[str, list[float]] = {k: [] for k in runs}
        for _ in range(args.repeat):
            for key, argv in runs.items():
                walls[key].append(timed(argv))
    med = {k: statistics.median(v) for k, v in walls.items()}
    ratio = {k: statistics.median(a / b for a, b in zip(walls[k], walls["run"])) for k in ("profile", "traces")}
    print(f"workload: {Path(args.elf).name}, {args.repeat} rounds, medians of wall time")
    print(f"pkasim run:                          {med['run']:.2f} s")
    print(f"pkasim profile --json:               {med['profile']:.2f} s   ratio {ratio['profile']:.2f}x  (target <= 2)")
    print(f"  + --folded --trace-events --vcd:   {med['traces']:.2f} s   ratio {ratio['traces']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
