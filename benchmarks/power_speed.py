"""Speed of pkasim power and tvla (docs/power.md, "What it costs"), in one process.

1. Traces per second on one core for a 10,000-cycle window: ctleak.elf in its
   constant-time mode (ct_mode = 1), window cycles:0-9999, a random exponent per trace,
   noise 1; a `power` campaign (the traces kept) and a first-order `tvla` (moments
   only), both in this process (--jobs 1), after the reference run.
2. What tracing costs a run, on aes.elf run to its exit from the same snapshot,
   alternately: a machine with no leakage hook (what every other command runs), with
   the hook installed but not armed, and armed over the whole run (median of rounds;
   cycle counts checked equal).
3. With --tvla100k: the TVLA of the unprotected AES round on 2 local workers, through
   the command, with 10,000 and 100,000 traces: wall time and peak memory.

Timing belongs here, never in tests: the machine is shared, so only figures measured in
one run and ratios mean much.

    .venv/bin/python benchmarks/power_speed.py [--traces N] [--repeat R] [--tvla100k]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

from pkasim.analysis.power import campaign as cm  # noqa: E402
from pkasim.analysis.power.cpu import CpuLeakage  # noqa: E402
from pkasim.analysis.power.inputs import InputSpec  # noqa: E402
from pkasim.analysis.power.stats import Moments  # noqa: E402
from pkasim.analysis.power.tracer import Setup, Tracer  # noqa: E402
from pkasim.analysis.windows import parse_window  # noqa: E402
from pkasim.chip.config import load_config  # noqa: E402
from pkasim.core.machine import Machine  # noqa: E402
from pkasim.core.snapshot import LogArchive, capture, restore  # noqa: E402

BUILD = ROOT / "firmware" / "build"


def per_core(traces: int) -> None:
    config = load_config()
    setup = Setup(str(BUILD / "ctleak.elf"), config, budget=10**8)
    tracer = Tracer(setup)
    mode = {"ct_mode": (1).to_bytes(4, "little")}
    ref = tracer.reference(parse_window("cycles:0-9999"), mode)
    spec = InputSpec(tuple(mode.items()), (("ct_secret", None),), None, {"ct_mode": 4, "ct_secret": 4})
    cm.adopt(tracer)
    for kind in ("power", "tvla"):
        camp = cm.Campaign(setup, spec, ref.lo, ref.hi, ref.digest, traces, 1.0, 1, kind)
        acc = {"n": 0, "misaligned": 0}
        groups = [Moments.empty(camp.samples, 1), Moments.empty(camp.samples, 1)]

        def on_chunk(r: dict, acc: dict = acc, groups: list = groups) -> None:
            acc["n"] += r["count"]
            acc["misaligned"] += r["misaligned"]
            if "fixed" in r:
                groups[0].merge(r["fixed"])
                groups[1].merge(r["random"])

        start = time.perf_counter()
        cm.run(camp, None, on_chunk)
        wall = time.perf_counter() - start
        print(f"  {kind:5}: {acc['n']:,} traces x {camp.samples:,} samples ({ref.instructions:,} instructions in "
              f"the window) in {wall:.2f} s = {acc['n'] / wall:,.0f} traces/s on one core "
              f"(misaligned {acc['misaligned']})")


def overhead(repeat: int) -> None:
    config = load_config()
    machines = {}
    for kind in ("plain", "hook, disarmed", "hook, armed"):
        m = Machine(config, stdout=io.BytesIO(), stderr=io.BytesIO())
        m.load(BUILD / "aes.elf")
        snap = capture(m, LogArchive())
        leak = CpuLeakage(m, config.power) if kind != "plain" else None
        machines[kind] = (m, snap, leak)
    times: dict[str, list[float]] = {k: [] for k in machines}
    cycles = set()
    for _ in range(repeat):
        for kind, (m, snap, leak) in machines.items():
            total = 0.0
            for _ in range(50):
                restore(m, snap)
                buf = np.zeros(8000)
                if kind == "hook, armed":
                    leak.arm(0, 8000, buf)
                start = time.perf_counter()
                r = m.run(max_cycles=10**6)
                total += time.perf_counter() - start
                if kind == "hook, armed":
                    leak.disarm()
                cycles.add((r.cycles, r.instructions))
            times[kind].append(total / 50)
    assert len(cycles) == 1, cycles
    base = statistics.median(times["plain"])
    print(f"  aes.elf to its exit ({next(iter(cycles))[0]:,} cycles, {next(iter(cycles))[1]:,} instructions), "
          f"median of {repeat} rounds of 50 runs, run() only:")
    for kind, ts in times.items():
        med = statistics.median(ts)
        print(f"    {kind:15} {med * 1e6:8.0f} us per run  {med / base:5.2f}x")


def tvla100k() -> None:
    """The AES round's TVLA with 10,000 and 100,000 traces: the wall time, and the peak
    resident memory of the command and its workers (wait4's rusage of the command,
    which includes its reaped workers): flat when the two are alike."""
    for traces in (10_000, 100_000):
        with tempfile.TemporaryDirectory() as tmp:
            report = Path(tmp) / "t.json"
            start = time.perf_counter()
            proc = subprocess.Popen([sys.executable, "-m", "pkasim.cli.main", "tvla", str(BUILD / "aes.elf"),
                                     "--window", "aes_round#1", "--fixed", "aes_pt=00112233445566778899aabbccddeeff",
                                     "--random", "aes_pt", "--traces", str(traces), "--noise", "20", "--jobs", "2",
                                     "--json", str(report), "-q"], stderr=subprocess.DEVNULL)
            _, _, usage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - start
            doc = json.loads(report.read_text())
        print(f"  {traces:,} traces x {doc['window']['cycles']} samples on 2 workers: {wall:.1f} s wall "
              f"({doc['traces_per_second']:,.0f} traces/s in the campaign), max |t| {doc['max_abs_t']:.1f}, "
              f"peak memory {usage.ru_maxrss / 1024:.0f} MiB (the largest of the command and its workers)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=2000, help="traces per campaign of part 1 (default 2000)")
    parser.add_argument("--repeat", type=int, default=5, help="rounds of part 2 (default 5)")
    parser.add_argument("--tvla100k", action="store_true", help="also part 3 (about a minute)")
    args = parser.parse_args()
    print("1. a 10,000-cycle window, one core:")
    per_core(args.traces)
    print("2. what tracing costs a run:")
    overhead(args.repeat)
    if args.tvla100k:
        print("3. TVLA of the unprotected AES round:")
        tvla100k()
    return 0


if __name__ == "__main__":
    sys.exit(main())
