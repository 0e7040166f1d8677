"""What the alignment checks cost (docs/cycle-model.md, "Alignment"), measured in one run.

Runs one firmware image (default firmware/build/compute.elf; CoreMark is the usual
choice: ``--elf coremark.elf``) several times, alternating, each run in a fresh
process so no run warms another's caches:

* this checkout with the checks on, and with them off (``state.align_enabled = 0``);
* with ``--baseline DIR``: another pkasim checkout (its native library built in place,
  e.g. a worktree of main after ``.venv/bin/python setup.py build_ext --inplace``),
  checks on.

It prints the median emulated MIPS of each (CPU time of the run, which other load
on the machine disturbs less than wall time) and their ratios, and the ratios of the
fastest runs (the least disturbed). Timing belongs here,
never in tests: the machine is shared, so only ratios from one run mean much.

    .venv/bin/python benchmarks/align_overhead.py --elf coremark.elf --baseline /tmp/main --repeat 7
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The child imports pkasim from the checkout it is given, by the same folder mapping as
# setup.py (pkasim = emulator/, pkasim.peripherals = peripherals/, ...), whatever is
# installed; each checkout's native library is built in place.
CHILD = """
import importlib.util, io, sys, time
from pathlib import Path
root = Path(sys.argv[1])
for name, folder in (("pkasim", "emulator"), ("pkasim.peripherals", "peripherals"), ("pkasim.configs", "configs"),
                     ("pkasim.firmware", "firmware")):
    spec = importlib.util.spec_from_file_location(name, root / folder / "__init__.py",
                                                  submodule_search_locations=[str(root / folder)])
    if spec is None:  # a data folder without __init__.py
        spec = importlib.util.spec_from_loader(name, loader=None, is_package=True)
        spec.submodule_search_locations = [str(root / folder)]
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    if spec.loader is not None:
        spec.loader.exec_module(module)
from pkasim import Machine, load_config
m = Machine(load_config(), stdout=io.BytesIO(), stderr=io.BytesIO())
m.load(sys.argv[2])
if sys.argv[3] == "off":
    m.core.state.align_enabled = 0
start = time.process_time()
r = m.run()
wall = time.process_time() - start
print(r.instructions, r.cycles, wall, r.exit_code)
"""


def one(root: Path, elf: str, checks: str) -> tuple[int, int, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, str(root), elf, checks], capture_output=True, text=True,
                         check=True, cwd=root).stdout.split()
    return int(out[0]), int(out[1]), float(out[2])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elf", default=str(ROOT / "firmware" / "build" / "compute.elf"))
    parser.add_argument("--baseline", type=Path, help="another pkasim checkout to compare with (checks on)")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each (default 5)")
    args = parser.parse_args()
    elf = str(Path(args.elf).resolve())

    runs = {"on": (ROOT, "on"), "off": (ROOT, "off")}
    if args.baseline:
        runs["baseline"] = (args.baseline.resolve(), "on")
    walls: dict[str, list[float]] = {k: [] for k in runs}
    counts: dict[str, tuple[int, int]] = {}
    for _ in range(args.repeat):
        for key, (root, checks) in runs.items():
            insns, cycles, wall = one(root, elf, checks)
            walls[key].append(wall)
            counts[key] = (insns, cycles)
    insns, cycles = counts["on"]
    print(f"workload: {Path(elf).name}, {insns:,} instructions, {cycles:,} cycles, {args.repeat} runs each")
    mips = {k: insns / statistics.median(w) / 1e6 for k, w in walls.items()}
    labels = {"on": "checks on", "off": "checks off", "baseline": f"baseline {args.baseline}"}
    best = {k: min(w) for k, w in walls.items()}
    for key in runs:
        same = "" if counts[key] == counts["on"] else f"  (counts differ: {counts[key]})"
        print(f"{labels[key]:<40} median {statistics.median(walls[key]):.3f} s  {mips[key]:6.1f} MIPS"
              f"  (fastest {best[key]:.3f} s){same}")
    print(f"checks on / off:      {mips['on'] / mips['off']:.3f} (fastest runs: {best['off'] / best['on']:.3f})")
    if args.baseline:
        print(f"this / baseline:      {mips['on'] / mips['baseline']:.3f} "
              f"(fastest runs: {best['baseline'] / best['on']:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
