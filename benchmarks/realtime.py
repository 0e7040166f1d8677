"""Is the emulator faster than the chip? Wall time over modeled time, per job.

Runs every `pkasim bench` job (each verified against Python integers, as the bench
does) and the demo images on the default chip, and prints for each the modeled
seconds of the whole run (reset to exit, at the chip's clock), the wall seconds the
host took for it (the image load excluded), their ratio wall/modeled (below 1: the
emulator runs faster than the chip it models) and the emulated MIPS. Timing belongs
here, never in the tests; the machine is shared, so run it twice before believing a
figure.

    .venv/bin/python benchmarks/realtime.py [--config FILE] [--json FILE] [--only JOB]
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from emulator import Machine, load_config  # noqa: E402
from emulator.bench import BUILD_DIR, JOBS, run_job  # noqa: E402

DEMOS = ("hello.elf", "systick.elf", "nested.elf", "xrsa.elf", "xrsa_opt.elf")


def demo_row(config, image: str) -> dict:
    m = Machine(config, stdout=io.BytesIO(), stderr=io.BytesIO())
    m.load(BUILD_DIR / image)
    wall = time.perf_counter()
    result = m.run(max_cycles=600 * config.core.clock_hz)
    wall = time.perf_counter() - wall
    return _row(f"demo {image}", result.cycles, result.instructions, wall, config.core.clock_hz,
                ok=result.exit_code == 0)


def _row(name: str, cycles: int, instructions: int, wall: float, hz: int, ok: bool) -> dict:
    modeled = cycles / hz
    return {"job": name, "verified": ok, "cycles": cycles, "instructions": instructions,
            "modeled_seconds": modeled, "wall_seconds": wall,
            "wall_over_modeled": wall / modeled if modeled else 0.0,
            "mips": instructions / wall / 1e6 if wall else 0.0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=None, help="chip file (default: configs/ciu98320b.yaml)")
    parser.add_argument("--json", default=None, help="write the rows as JSON to FILE ('-' for stdout)")
    parser.add_argument("--only", action="append", default=[], help="run only these jobs (repeatable)")
    args = parser.parse_args()
    config = load_config(args.config) if args.config else load_config()
    rows = []
    for job in JOBS:
        if args.only and job.key not in args.only:
            continue
        totals: dict[str, int] = {}
        r = run_job(config, job, totals=totals)
        rows.append(_row(job.key, totals["cycles"], totals["instructions"], r.wall_seconds, config.core.clock_hz,
                         ok=r.verified))
    for image in DEMOS:
        if args.only and f"demo {image}" not in args.only:
            continue
        rows.append(demo_row(config, image))
    print(f"{'job':<24} {'modeled s':>10} {'wall s':>9} {'wall/modeled':>13} {'MIPS':>8}  verified")
    for r in rows:
        print(f"{r['job']:<24} {r['modeled_seconds']:>10.4f} {r['wall_seconds']:>9.3f} "
              f"{r['wall_over_modeled']:>13.3f} {r['mips']:>8.1f}  {'yes' if r['verified'] else 'NO'}")
    if args.json:
        text = json.dumps({"config": str(config.source), "rows": rows}, indent=2) + "\n"
        if args.json == "-":
            sys.stdout.write(text)
        else:
            Path(args.json).write_text(text)
    return 0 if all(r["verified"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
