"""A run with power tracing off costs what it cost before power existed (docs/power.md,
"What it costs").

The same ELF files (this checkout's firmware/build) run to their exit on several
emulators, alternately, in one benchmark run:

* main just before `pkasim power` landed (``--pre``, default e0be2f5) and main just
  after (``--post``, default 9d16658): the two differ by power alone (the commits of
  the power branch, docs/power.md), so their ratio is its cost on a run that does not
  trace. Each is exported from git (``git archive``) into a temporary folder, its
  native library built in place with this checkout's Python, and run from there;
* this checkout, on the stock Unicorn wheel (PKASIM_ENGINE=stock, as the two exports)
  and on its own engine (the default, docs/engine.md), for today's figure;
* with ``--before DIR``, an older checkout with a .venv of its own.

Each measurement is a fresh process that loads the ELF, runs it once (Unicorn
translates the code), then resets the core and times ``Machine.run`` to the exit, again
and again (the start-up code copies .data anew at each reset). Printed: the best, 10th
percentile and median of all runs of all rounds. The
cycle counts are printed: they must agree, or the model changed in between.

The firmware: aes.elf (the power demo, short: ten times as many runs), compute.elf
(the CPU alone, 6.7 million cycles), xrsa.elf (RSA-2048 on the PKA) and ecc.elf (P-256
on the PKA, 4,200 operations): a START that goes through Python is where the only
power code on the path of a run that does not trace sits (one attribute test).

Timing belongs here, never in tests; the machine is shared, so only the ratios
measured in one run mean much.

    .venv/bin/python benchmarks/power_off_cost.py [--rounds 5] [--runs 20] [--before DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "firmware" / "build"
FIRMWARE = (("aes.elf", 10), ("compute.elf", 1), ("xrsa.elf", 1), ("ecc.elf", 1))

# Runs in the emulator's own Python; an older checkout had the package emulator, flat.
PROBE = r"""
import io, json, sys, time
try:
    from pkasim.core.machine import Machine
    from pkasim.chip.config import load_config
except ImportError:
    from emulator.machine import Machine
    from emulator.config import load_config
elf, runs = sys.argv[1], int(sys.argv[2])
m = Machine(load_config(), stdout=io.BytesIO(), stderr=io.BytesIO())
m.load(elf)
m.run(max_cycles=10**9)  # translates the code once: the runs timed are warm
times, ends = [], set()
for _ in range(runs):
    m.reset()
    before = (m.cycles, m.instructions)
    start = time.perf_counter()
    r = m.run(max_cycles=10**9)
    times.append(time.perf_counter() - start)
    ends.add((r.cycles - before[0], r.instructions - before[1], r.exit_code))
print(json.dumps({"times": times, "ends": sorted(ends)}))
"""


def export(rev: str) -> Path:
    """The tree of ``rev``, its native library built in place, importable as pkasim from
    ``.shim`` (kept in the temporary folder for the next run)."""
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", rev], capture_output=True, text=True,
                         check=True).stdout.strip()
    where = Path(tempfile.gettempdir()) / f"pkasim-rev-{sha}"
    shim = where / ".shim"
    if (shim / "pkasim").exists():
        return where
    where.mkdir(parents=True, exist_ok=True)
    tree = subprocess.run(["git", "-C", str(ROOT), "archive", sha], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(where)], input=tree, check=True)
    subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=where, check=True,
                   capture_output=True)
    for name in ("peripherals", "configs", "firmware"):  # pkasim.peripherals, pkasim.configs, ...
        (where / "emulator" / name).symlink_to(where / name)
    shim.mkdir()
    (shim / "pkasim").symlink_to(where / "emulator")
    return where


QUANTILES = {0.0: "best", 0.1: "p10", 0.5: "median"}


def _quantile(values: list[float], q: float) -> float:
    """The q-quantile of the runs. On a shared machine a run's time is bimodal (a core
    to itself or half of one): the best and the 10th percentile are the uncontended
    runs, the median often a contended one."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(python: Path, cwd: Path, elf: Path, runs: int, env_extra: dict[str, str]) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PKASIM_ENGINE", "PYTHONPATH")}
    env.update(env_extra)
    out = subprocess.run([str(python), "-c", PROBE, str(elf), str(runs)], cwd=cwd, env=env, capture_output=True,
                         text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{python} in {cwd}: the probe failed: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pre", default="e0be2f5", help="main just before power (default e0be2f5)")
    parser.add_argument("--post", default="9d16658", help="main just after power (default 9d16658)")
    parser.add_argument("--before", type=Path, help="also an older checkout with its own .venv")
    parser.add_argument("--rounds", type=int, default=5, help="alternations of the emulators (default 5)")
    parser.add_argument("--runs", type=int, default=20, help="runs per measurement (aes.elf: ten times as many)")
    args = parser.parse_args()
    me = Path(sys.executable)
    emulators: dict[str, tuple[Path, Path, dict[str, str]]] = {}
    for label, rev in (("before power", args.pre), ("with power", args.post)):
        tree = export(rev)
        emulators[f"main {label} ({tree.name[11:]}), stock"] = (me, tree, {"PKASIM_ENGINE": "stock",
                                                                           "PYTHONPATH": str(tree / ".shim")})
    emulators["this checkout, stock Unicorn"] = (me, ROOT, {"PKASIM_ENGINE": "stock"})
    emulators["this checkout, its own engine"] = (me, ROOT, {})
    if args.before is not None:
        emulators[f"{args.before}, stock"] = (args.before / ".venv" / "bin" / "python", args.before, {})
    keys = list(emulators)
    for name, scale in FIRMWARE:
        runs = args.runs * scale
        times: dict[str, list[float]] = {k: [] for k in keys}
        ends: dict[str, set] = {k: set() for k in keys}
        for _ in range(args.rounds):
            for key in keys:
                python, cwd, env = emulators[key]
                r = measure(python, cwd, BUILD / name, runs, env)
                times[key].extend(r["times"])
                ends[key].update(tuple(e) for e in r["ends"])
        base = {q: _quantile(times[keys[0]], q) for q in QUANTILES}
        print(f"{name}: {args.rounds} rounds x {runs} runs, Machine.run only; ratios to the first line")
        for key in keys:
            (cycles, insns, code), *more = sorted(ends[key])
            note = "" if not more else f" (and {len(more)} other outcomes!)"
            cols = "  ".join(f"{label} {_quantile(times[key], q) * 1e3:8.3f} ms {_quantile(times[key], q) / base[q]:6.3f}x"
                             for q, label in QUANTILES.items())
            print(f"  {key:38} {cols}  {cycles:,} cycles, {insns:,} instructions, exit {code}{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
