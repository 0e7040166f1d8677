"""Is the emulator faster than the chip? Wall time over modeled time, per job.

Runs every `pkasim bench` job (each verified against Python integers, as the bench
does) and the demo images on the default chip, and prints for each the modeled
seconds of the whole run (reset to exit, at the chip's clock), the wall seconds the
host took for it (the image load excluded), their ratio wall/modeled (below 1: the
emulator runs faster than the chip it models) and the emulated MIPS. Each job runs
``--repeat`` times (default 5) and the median wall time is shown, with the fastest
beside it: the machine is shared and noisy, and timing belongs here, never in the
tests.

    .venv/bin/python benchmarks/realtime.py [--config FILE] [--json FILE] [--only JOB] [--repeat N]
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from pkasim import Machine, load_config  # noqa: E402
from pkasim.rsa.bench import BUILD_DIR, JOBS, run_job  # noqa: E402

DEMOS = ("hello.elf", "systick.elf", "nested.elf", "xrsa.elf", "xrsa_opt.elf")


def demo_once(config, image: str) -> tuple[int, int, float, bool]:
    m = Machine(config, stdout=io.BytesIO(), stderr=io.BytesIO())
    m.load(BUILD_DIR / image)
    wall = time.perf_counter()
    result = m.run(max_cycles=600 * config.core.clock_hz)
    wall = time.perf_counter() - wall
    return result.cycles, result.instructions, wall, result.exit_code == 0


def job_once(config, job) -> tuple[int, int, float, bool]:
    totals: dict[str, int] = {}
    r = run_job(config, job, totals=totals)
    return totals["cycles"], totals["instructions"], r.wall_seconds, r.verified


def _row(name: str, runs: list[tuple[int, int, float, bool]], hz: int) -> dict:
    cycles, instructions = runs[0][0], runs[0][1]
    if any(r[:2] != (cycles, instructions) for r in runs):
        raise SystemExit(f"{name}: the runs disagree on cycles or instructions")
    walls = [r[2] for r in runs]
    wall = statistics.median(walls)
    modeled = cycles / hz
    return {"job": name, "verified": all(r[3] for r in runs), "cycles": cycles, "instructions": instructions,
            "modeled_seconds": modeled, "wall_seconds": wall, "wall_seconds_min": min(walls), "runs": len(runs),
            "wall_over_modeled": wall / modeled if modeled else 0.0,
            "wall_over_modeled_min": min(walls) / modeled if modeled else 0.0,
            "mips": instructions / wall / 1e6 if wall else 0.0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=None, help="chip file (default: configs/ciu98320b.yaml)")
    parser.add_argument("--json", default=None, help="write the rows as JSON to FILE ('-' for stdout)")
    parser.add_argument("--only", action="append", default=[], help="run only these jobs (repeatable)")
    parser.add_argument("--repeat", type=int, default=5, help="runs per job; the median is shown (default 5)")
    args = parser.parse_args()
    config = load_config(args.config) if args.config else load_config()
    rows = []
    for job in JOBS:
        if args.only and job.key not in args.only:
            continue
        repeat = 1 if job.engine == "software" else args.repeat  # seconds each: once is enough
        rows.append(_row(job.key, [job_once(config, job) for _ in range(repeat)], config.core.clock_hz))
    for image in DEMOS:
        if args.only and f"demo {image}" not in args.only:
            continue
        rows.append(_row(f"demo {image}", [demo_once(config, image) for _ in range(args.repeat)],
                         config.core.clock_hz))
    print(f"{'job':<22} {'modeled s':>10} {'wall s':>8} {'wall/modeled':>13} {'(fastest)':>10} {'MIPS':>7}  verified")
    for r in rows:
        print(f"{r['job']:<22} {r['modeled_seconds']:>10.4f} {r['wall_seconds']:>8.3f} "
              f"{r['wall_over_modeled']:>13.3f} {r['wall_over_modeled_min']:>10.3f} {r['mips']:>7.1f}  "
              f"{'yes' if r['verified'] else 'NO'}")
    if args.json:
        text = json.dumps({"config": str(config.source), "rows": rows}, indent=2) + "\n"
        if args.json == "-":
            sys.stdout.write(text)
        else:
            Path(args.json).write_text(text)
    return 0 if all(r["verified"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
