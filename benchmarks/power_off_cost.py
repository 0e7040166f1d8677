"""A run with power tracing off costs what it cost before power existed (docs/power.md,
"What it costs").

The same ELF files (this checkout's firmware/build) run to their exit on two emulators:
this checkout and an older checkout from before `pkasim power` (its own .venv, given
with --before), alternately in one benchmark run. Each measurement is a fresh process
of that checkout's Python that builds a machine per run and times ``Machine.run`` only
(best and median of its runs). This checkout runs twice, on the stock Unicorn wheel
(PKASIM_ENGINE=stock, as the older checkout does) and on its own engine (the default,
docs/engine.md), so the ratio against the older checkout on the same Unicorn is the
cost of everything that changed on a run's path since (power among it), not the
engine's gain.

The firmware: aes.elf (the CPU only, the power demo) and xrsa.elf (an RSA-2048
signature on the PKA, whose START is where the only power code on a run's path sits:
one attribute test when it goes through Python). The cycle counts of the two
checkouts are printed: a difference means the cycle model itself changed in between.

Timing belongs here, never in tests; the machine is shared, so only the ratios
measured in one run mean much.

    .venv/bin/python benchmarks/power_off_cost.py --before /work/wt/before [--rounds 5] [--runs 20]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "firmware" / "build"

# Runs in the checkout's own Python: the older layout had pkasim.machine and pkasim.config.
PROBE = r"""
import io, json, sys, time
try:
    from pkasim.core.machine import Machine
    from pkasim.chip.config import load_config
except ImportError:
    from pkasim.machine import Machine
    from pkasim.config import load_config
elf, runs = sys.argv[1], int(sys.argv[2])
config = load_config()
times, ends = [], set()
for _ in range(runs):
    m = Machine(config, stdout=io.BytesIO(), stderr=io.BytesIO())
    m.load(elf)
    start = time.perf_counter()
    r = m.run(max_cycles=10**9)
    times.append(time.perf_counter() - start)
    ends.add((r.cycles, r.instructions, r.exit_code))
print(json.dumps({"times": times, "ends": sorted(ends)}))
"""


def measure(python: Path, cwd: Path, elf: Path, runs: int, engine: str | None) -> dict:
    env = dict(os.environ)
    env.pop("PKASIM_ENGINE", None)
    if engine is not None:
        env["PKASIM_ENGINE"] = engine
    out = subprocess.run([str(python), "-c", PROBE, str(elf), str(runs)], cwd=cwd, env=env, capture_output=True,
                         text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{python}: the probe failed: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="a checkout from before pkasim power, with its .venv")
    parser.add_argument("--rounds", type=int, default=5, help="alternations of the emulators (default 5)")
    parser.add_argument("--runs", type=int, default=20, help="runs per measurement for aes.elf (xrsa.elf: a fifth)")
    args = parser.parse_args()
    before_py = args.before / ".venv" / "bin" / "python"
    if not before_py.exists():
        raise SystemExit(f"{before_py}: no such file (the older checkout needs its .venv)")
    commit = subprocess.run(["git", "-C", str(args.before), "log", "-1", "--format=%h %ad", "--date=short"],
                            capture_output=True, text=True, check=False).stdout.strip()
    emulators = {
        f"before power ({commit}), stock Unicorn": (before_py, args.before, None),
        "this checkout, stock Unicorn": (Path(sys.executable), ROOT, "stock"),
        "this checkout, its own engine": (Path(sys.executable), ROOT, None),
    }
    for name, runs in (("aes.elf", args.runs), ("xrsa.elf", max(2, args.runs // 5))):
        elf = BUILD / name
        best: dict[str, list[float]] = {k: [] for k in emulators}
        med: dict[str, list[float]] = {k: [] for k in emulators}
        ends: dict[str, set] = {k: set() for k in emulators}
        for _ in range(args.rounds):
            for key, (python, cwd, engine) in emulators.items():
                r = measure(python, cwd, elf, runs, engine)
                best[key].append(min(r["times"]))
                med[key].append(statistics.median(r["times"]))
                ends[key].update(tuple(e) for e in r["ends"])
        base = min(best[next(iter(emulators))])
        print(f"{name}: {args.rounds} rounds x {runs} runs, Machine.run only")
        for key in emulators:
            (cycles, insns, code), *more = sorted(ends[key])
            note = "" if not more else f" (and {len(more)} other outcomes!)"
            b = min(best[key])
            print(f"  {key:45} best {b * 1e3:9.3f} ms  median {statistics.median(med[key]) * 1e3:9.3f} ms  "
                  f"{b / base:5.3f}x   {cycles:,} cycles, {insns:,} instructions, exit {code}{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
