"""Firmware that drives the PKA: wall time of the RSA bench jobs against another checkout,
and wall / modeled time of every ECC bench job, in one run.

* RSA: each job of ``pkasim bench`` whose image uses the PKA (and the software ones for
  scale), run as ``pkasim bench`` runs it (the job's ``wall_seconds``: reset to exit)
  four times in a fresh process: "cold" is the first run (a new machine in a process
  that has run nothing yet: every block translated for the first time), "reused" the
  median of the three later ones. In this checkout those restore the machine the first
  run loaded (pkasim.core.reuse, its translations kept); in a baseline without that
  (5eef755) each is a new machine in a warm process. The same in a process of the
  ``--baseline`` checkout (its own .venv's Python), alternately, each round. The ratio
  baseline / this checkout is taken within a round; the median of the rounds' ratios is
  printed (the machine is shared: only ratios measured side by side mean much).
  ``wall_seconds`` leaves out what comes before the reset, so a last table gives that
  too, for this checkout: the host time from the call of ``run_job`` to the machine
  ready for the job's inputs: on the first run a new machine built and loaded, on the
  later ones the checks and the restore of the kept one.
* ECC: each ECC bench job in a fresh process: "cold" is the job's whole run on a new
  machine in a process that has run nothing yet (``wall_seconds``: reset to exit, with
  the first translation of every block and the first check of every polling loop),
  "warm" the operation called again on that machine (``op_wall_seconds``). Both are
  divided by the modeled time of the operation (cycles / the chip's clock, 48 MHz on
  the default chip), as wall time and as the process's CPU time (which a loaded
  machine inflates less). Median of the rounds.

Cycle counts are compared between the two checkouts (they must be the same).

    .venv/bin/python benchmarks/pka_speed.py --baseline /work/wt/before [--repeat 5]
        [--rsa rsa2048-pka,...] [--ecc p256-verify,...] [--no-rsa] [--no-ecc]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKA_RSA = ["rsa2048-pka", "rsa4096-xrsa", "rsa4096-xrsa-opt", "rsa2048-win", "rsa4096-win", "rsa2048-win-sram",
           "rsa4096-win-sram", "rsa2048-pair", "rsa4096-pair", "rsa2048-soft", "rsa4096-soft"]


def _bench_module(root: str | None):
    """The RSA bench module and load_config of this checkout, or of ``root`` (a checkout
    of either layout: ``pkasim`` or the older ``emulator`` package)."""
    if root:
        sys.path.insert(0, root)
    try:
        from pkasim.chip.config import load_config
        from pkasim.rsa import bench
    except ImportError:
        from emulator import bench, load_config
    return bench, load_config


def child_rsa(job_key: str, root: str | None) -> dict:
    bench, load_config = _bench_module(root)
    job = next(j for j in bench.JOBS if j.key == job_key)
    config = load_config()
    setup: list[float] = []  # this checkout: host seconds from run_job's call to the machine ready (bench._run)
    if root is None:
        inner = bench._run

        def timed(*args, **kwargs):
            setup.append(time.perf_counter() - started)
            return inner(*args, **kwargs)

        bench._run = timed
    runs = []
    for _ in range(4):
        started = time.perf_counter()
        runs.append(bench.run_job(config, job))
    out = {"cold": runs[0].wall_seconds, "reused": statistics.median(r.wall_seconds for r in runs[1:]),
           "cycles": [r.cycles for r in runs], "verified": all(r.verified for r in runs)}
    if setup:
        out |= {"setup_new": setup[0], "setup_reused": statistics.median(setup[1:])}
    return out


def child_ecc(job_key: str) -> dict:
    from pkasim.chip.config import load_config
    from pkasim.core.machine import Machine
    from pkasim.ecc import bench
    job = next(j for j in bench.ECC_JOBS if j.key == job_key)
    config = load_config()
    cpu: list[float] = []  # CPU seconds of the whole run, then of the operation again

    def timed(fn):
        def run(*args, **kwargs):
            t = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                cpu.append(time.process_time() - t)
        return run

    bench.measure_call = timed(bench.measure_call)
    Machine.call = timed(Machine.call)
    r = bench.run_ecc_job(config, job)
    return {"cold": r.wall_seconds, "warm": r.op_wall_seconds, "cold_cpu": cpu[0], "warm_cpu": cpu[1],
            "cycles": r.cycles, "verified": r.verified, "modeled": r.cycles / config.core.clock_hz}


def run_child(python: str, args: list[str], root: str | None = None) -> dict:
    cmd = [python, str(Path(__file__).resolve()), "--child", *args] + (["--root", root] if root else [])
    env = {**os.environ}
    if root:
        env["PKASIM_ENGINE"] = "stock"  # (an older checkout may not know the variable's other values)
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        raise SystemExit(f"child {args} failed: {done.stderr.strip()[-800:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="another pkasim checkout (its .venv and native hook built)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rsa", help="comma-separated RSA job keys (default: all)")
    parser.add_argument("--ecc", help="comma-separated ECC job keys (default: all)")
    parser.add_argument("--no-rsa", action="store_true")
    parser.add_argument("--no-ecc", action="store_true")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        kind, key = args.child
        print(json.dumps(child_rsa(key, args.root) if kind == "rsa" else child_ecc(key)))
        return 0

    here = sys.executable
    print(f"load average at start: {os.getloadavg()[0]:.1f}", flush=True)
    if not args.no_rsa:
        jobs = args.rsa.split(",") if args.rsa else PKA_RSA
        base_py = None
        if args.baseline:
            base = Path(args.baseline).resolve()
            py = base / ".venv" / "bin" / "python"
            base_py = str(py if py.exists() else here)
        mine: dict[str, dict[str, list[float]]] = {}  # job -> "cold"/"reused"/"setup_new"/... -> rounds
        theirs: dict[str, dict[str, list[float]]] = {}
        ratios: dict[str, dict[str, list[float]]] = {}
        for rnd in range(args.repeat):
            for key in jobs:
                here_r = run_child(here, ["rsa", key])
                if not here_r["verified"] or len(set(here_r["cycles"])) != 1:
                    raise SystemExit(f"{key}: result not verified, or runs of different cycles {here_r['cycles']}")
                for what in ("cold", "reused", "setup_new", "setup_reused"):
                    mine.setdefault(key, {}).setdefault(what, []).append(here_r[what])
                if base_py:
                    base_r = run_child(base_py, ["rsa", key], root=str(base))
                    if base_r["cycles"] != here_r["cycles"]:
                        raise SystemExit(f"{key}: {here_r['cycles'][0]:,} cycles here, {base_r['cycles'][0]:,} "
                                         "in the baseline")
                    for what in ("cold", "reused"):
                        theirs.setdefault(key, {}).setdefault(what, []).append(base_r[what])
                        ratios.setdefault(key, {}).setdefault(what, []).append(base_r[what] / here_r[what])
            print(f"round {rnd + 1} of {args.repeat} (RSA) done", file=sys.stderr, flush=True)
        med = statistics.median
        print("\nRSA bench jobs: wall seconds of the job's run (reset to exit), median of rounds;")
        print("cold: the first run in a fresh process; reused: the median of the three later runs")
        head = f"{'job':18s}"
        for what in ("cold", "reused"):
            head += f"{what:>9s}" + (f"{'baseline':>10s}{'b/this':>8s}" if base_py else "")
        print(head)
        for key in jobs:
            line = f"{key:18s}"
            for what in ("cold", "reused"):
                line += f"{med(mine[key][what]):9.4f}"
                if base_py:
                    line += f"{med(theirs[key][what]):10.4f}{med(ratios[key][what]):7.2f}x"
            print(line)
        print("\nbefore the reset, this checkout (ms, median of rounds): the first run's new machine built and "
              "loaded / a later run's kept machine checked and restored")
        for key in jobs:
            print(f"{key:18s}{med(mine[key]['setup_new']) * 1e3:9.2f}{med(mine[key]['setup_reused']) * 1e3:9.3f}")
    if not args.no_ecc:
        from pkasim.ecc.bench import ECC_JOBS
        jobs = args.ecc.split(",") if args.ecc else [j.key for j in ECC_JOBS]
        cold: dict[str, list[float]] = {}
        warm: dict[str, list[float]] = {}
        cold_cpu: dict[str, list[float]] = {}
        warm_cpu: dict[str, list[float]] = {}
        modeled: dict[str, float] = {}
        for rnd in range(args.repeat):
            for key in jobs:
                r = run_child(here, ["ecc", key])
                if not r["verified"]:
                    raise SystemExit(f"{key}: result not verified")
                modeled[key] = r["modeled"]
                cold.setdefault(key, []).append(r["cold"] / r["modeled"])
                warm.setdefault(key, []).append(r["warm"] / r["modeled"])
                cold_cpu.setdefault(key, []).append(r["cold_cpu"] / r["modeled"])
                warm_cpu.setdefault(key, []).append(r["warm_cpu"] / r["modeled"])
            print(f"round {rnd + 1} of {args.repeat} (ECC) done", file=sys.stderr, flush=True)
        print("\nECC bench jobs: host time / modeled time (median of rounds; wall range), wall and CPU")
        print(f"{'job':22s}{'modeled ms':>11s}{'cold':>7s}{'warm':>7s}{'cold CPU':>10s}{'warm CPU':>10s}"
              "   cold range    warm range")
        for key in jobs:
            c, w = cold[key], warm[key]
            print(f"{key:22s}{modeled[key] * 1e3:11.2f}{statistics.median(c):7.2f}{statistics.median(w):7.2f}"
                  f"{statistics.median(cold_cpu[key]):10.2f}{statistics.median(warm_cpu[key]):10.2f}"
                  f"   {min(c):.2f}-{max(c):.2f}     {min(w):.2f}-{max(w):.2f}")
    print(f"load average at end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
