"""How fast `pkasim faults` runs faults, and whether its memory stays flat.

1. VerifyPIN (firmware/build/verifypin.elf), the whole run, skip + reg-flip, every
   fault, in this process: faults per wall second and per CPU second of this process
   (the machine is shared: the CPU figure is the one core's rate). Goal (issue #22):
   >= 2,000 faults/s per core.
2. The same campaign through the command with --jobs 2 (fresh database, process
   start-up and the golden runs included): wall seconds. Goal: < 60 s on 2 cores.
3. RSA-2048 by CRT on the PKA (firmware/build/rsacrt.elf), window crt_recombine,
   a sample of skip, reg-flip and pka-result faults: faults per CPU second. Goal:
   >= 50 faults/s per core.
4. Memory: the command's peak RSS for two campaign sizes, 4x apart (hardened
   VerifyPIN, instr-flip + reg-flip + load-flip, sampled): flat means the same.

Timing belongs here, never in tests.

    .venv/bin/python benchmarks/faults_speed.py [--rounds R] [--rsa-sample N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "firmware" / "build"

from pkasim.analysis.faults import Setup  # noqa: E402
from pkasim.analysis.faults.campaign import _PREPARED, plan, prepared, run_indices  # noqa: E402
from pkasim.chip.config import load_config  # noqa: E402


def rate(setup: Setup, sample: int | None = None, seed: int = 1) -> tuple[int, float, float, dict]:
    """(faults, wall s, CPU s, outcomes) of one in-process campaign; the one-off costs
    (the golden run, reading the DWARF line table) are not in it: setup() reports them."""
    _PREPARED.clear()
    golden, space, _ = prepared(setup)
    golden.where(golden.pcs[0])
    p = plan(len(space), 1, sample, seed)
    indices = list(p.indices())
    outcomes: dict[str, int] = {}

    def each(row: dict) -> None:
        outcomes[row["outcome"]] = outcomes.get(row["outcome"], 0) + 1

    w, c = time.perf_counter(), time.process_time()
    run_indices(setup, 1, indices, each)
    return len(indices), time.perf_counter() - w, time.process_time() - c, outcomes


def command(args: list[str], db: Path) -> float:
    """Wall seconds of `pkasim faults ARGS` in a child process."""
    w = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pkasim", "faults", *args, "--db", str(db), "-q",
                           "--fail-on", "never"], capture_output=True, text=True)
    wall = time.perf_counter() - w
    if proc.returncode != 0:
        raise SystemExit(f"pkasim faults failed ({proc.returncode}): {proc.stderr.strip()}")
    return wall


def peak_rss(args: list[str], db: Path) -> int:
    """Peak RSS (KiB) of one command in a fresh Python that reports its own."""
    code = ("import resource, sys; from pkasim.cli.main import main; main(sys.argv[1:]); "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code, "faults", *args, "--db", str(db), "-q", "--fail-on", "never"],
                          capture_output=True, text=True)
    return int(proc.stderr.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rsa-sample", type=int, default=1500)
    args = ap.parse_args()
    config = load_config()
    print(f"load average at the start: {os.getloadavg()[0]:.1f} (2 cores, shared)")

    pin = BUILD / "verifypin.elf"
    setup = Setup(str(pin), pin.read_bytes(), config, models=("skip", "reg-flip"), oracles=("exit=0",),
                  detected=("exit=3",))
    c = time.process_time()
    _PREPARED.clear()
    golden, _, _ = prepared(setup)
    golden.where(golden.pcs[0])
    print(f"VerifyPIN golden run, trace and line table: {time.process_time() - c:.2f} CPU s (once per campaign)")
    rows = [rate(setup) for _ in range(args.rounds)]
    n = rows[0][0]
    walls, cpus = [r[1] for r in rows], [r[2] for r in rows]
    print(f"VerifyPIN, whole run, skip + reg-flip: {n:,} faults; {n / statistics.median(walls):,.0f} faults/s "
          f"wall, {n / statistics.median(cpus):,.0f} faults/s per CPU second (median of {args.rounds}; "
          f"goal >= 2,000 per core); outcomes {rows[0][3]}")

    with tempfile.TemporaryDirectory() as tmp:
        wall = command([str(pin), "-m", "skip", "-m", "reg-flip", "-o", "exit=0", "--detected", "exit=3",
                           "--jobs", "2"], Path(tmp) / "j2.sqlite")
        print(f"the same through `pkasim faults --jobs 2` (start-up and golden runs included): {wall:.1f} s "
              "(goal < 60 s)")

    rsa = BUILD / "rsacrt.elf"
    setup = Setup(str(rsa), rsa.read_bytes(), config, window="crt_recombine",
                  models=("skip", "reg-flip", "pka-result"), oracles=("rsa-crt-bellcore",))
    t = time.perf_counter()
    _PREPARED.clear()
    prepared(setup)
    golden_s = time.perf_counter() - t
    n, wall, cpu, outcomes = rate(setup, args.rsa_sample)
    print(f"RSA-2048 CRT, window crt_recombine, skip + reg-flip + pka-result, {n:,} sampled: "
          f"{n / wall:,.0f} faults/s wall, {n / cpu:,.0f} per CPU second (goal >= 50 per core); golden run and "
          f"trace {golden_s:.2f} s; outcomes {outcomes}")

    hard = BUILD / "verifypin_hardened.elf"
    base = [str(hard), "-m", "instr-flip", "-m", "reg-flip", "-m", "load-flip", "-o", "exit=0", "--detected",
            "exit=3"]
    with tempfile.TemporaryDirectory() as tmp:
        small = peak_rss([*base, "--sample", "1000"], Path(tmp) / "small.sqlite")
        large = peak_rss([*base, "--sample", "4000"], Path(tmp) / "large.sqlite")
    print(f"peak RSS: {small / 1024:.1f} MiB for 1,000 faults, {large / 1024:.1f} MiB for 4,000 "
          f"({(large - small) / 1024:+.1f} MiB)")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
