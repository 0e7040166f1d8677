"""Start-up time of the `pkasim` command (docs/packaging.md): `pkasim --version` and
`pkasim run -q` of hello.elf (107 cycles, so the run is all start-up), against a bare
`python -c pass` in the same rounds, alternating, medians of N rounds.

    .venv/bin/python benchmarks/startup.py [ROUNDS] [--pkasim PATH]

--pkasim names another installation's console script (a wheel installed in a fresh
venv: `python benchmarks/startup.py 15 --pkasim /tmp/v/bin/pkasim`); by default the
one beside this Python.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def wall(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("rounds", nargs="?", type=int, default=11)
    ap.add_argument("--pkasim", default=str(Path(sys.executable).parent / "pkasim"))
    args = ap.parse_args()
    python = str(Path(args.pkasim).parent / "python")
    hello = str(REPO / "firmware" / "build" / "hello.elf")
    cases = {
        "python -c pass": [python, "-c", "pass"],
        "pkasim --version": [args.pkasim, "--version"],
        "pkasim run -q hello.elf": [args.pkasim, "run", "-q", hello],
    }
    for argv in cases.values():  # warm the page cache and the .pyc files once
        wall(argv)
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.rounds):
        for name, argv in cases.items():
            times[name].append(wall(argv))
    base = statistics.median(times["python -c pass"])
    print(f"{args.rounds} alternating rounds, load average {os.getloadavg()[0]:.2f}; {args.pkasim}")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"  {name:<26} median {med:.3f} s  min {min(values):.3f}  max {max(values):.3f}  "
              f"({med / base:.1f}x python -c pass)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
