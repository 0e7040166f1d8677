"""What debugging costs: RSA-4096 xRSA (firmware/build/xrsa.elf) run to a breakpoint
near its end against the same run without one, and what reverse execution adds.

* plain: ``Machine.run()`` to the firmware's exit, no breakpoint.
* breakpoint: ``Machine.run()`` with one breakpoint at main's instruction after the
  call of rsa_private returns (hit once, about 7,000 cycles before the exit).
* debugger: the same stop through ``pkasim debug``'s engine (``continue``), with
  reverse execution off, then on (snapshots every ``--interval`` cycles).
* snapshots: their count and host memory, the median time of one snapshot, the
  time of one reverse-stepi and of a reverse-continue back to rsa_private's start.

Wall times are medians of ``--repeat`` runs in this one process; the machine is
shared, so only the ratios mean much. Timing belongs here, never in tests (issue 10
asks for the breakpoint run within 1.5x of the plain one).

    .venv/bin/python benchmarks/debug_overhead.py [--repeat R] [--interval CYCLES]
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from pkasim import Machine, load_config  # noqa: E402
from pkasim.core.snapshot import LogArchive, capture  # noqa: E402
from pkasim.debugger.engine import Debugger  # noqa: E402
from pkasim.debugger.timetravel import DEFAULT_INTERVAL  # noqa: E402

XRSA = ROOT / "firmware" / "build" / "xrsa.elf"


def machine() -> Machine:
    m = Machine(load_config(), stdout=io.BytesIO(), stderr=io.BytesIO())
    m.load(XRSA)
    return m


def stop_address(m: Machine) -> int:
    """main's instruction after the call of rsa_private (the call's return address)."""
    probe = machine()
    probe.run(until="rsa_private")
    return probe.reg("lr") & ~1


def timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--interval", type=int, default=DEFAULT_INTERVAL, help="cycles between snapshots")
    args = ap.parse_args()
    bp = stop_address(machine())
    walls: dict[str, list[float]] = {"plain": [], "breakpoint": [], "debugger": [], "debugger+reverse": []}
    cycles: dict[str, int] = {}
    snaps = None
    for _ in range(args.repeat):
        m = machine()
        wall, r = timed(m.run)
        walls["plain"].append(wall)
        cycles["plain (exit)"] = r.cycles

        m = machine()
        m.add_breakpoint(bp)
        wall, r = timed(m.run)
        walls["breakpoint"].append(wall)
        cycles["breakpoint"] = r.cycles

        m = machine()
        d = Debugger(m, reverse=False)
        d.execute(f"break *{bp:#x}")
        wall, _ = timed(lambda d=d: d.execute("continue"))
        walls["debugger"].append(wall)
        cycles["debugger"] = m.cycles

        m = machine()
        d = Debugger(m, reverse=True, interval_cycles=args.interval)
        d.execute(f"break *{bp:#x}")
        wall, _ = timed(lambda d=d: d.execute("continue"))
        walls["debugger+reverse"].append(wall)
        cycles["debugger+reverse"] = m.cycles
        snaps = d
    plain = statistics.median(walls["plain"])
    print(f"xRSA RSA-4096 to a breakpoint at 0x{bp:08x} (main, after rsa_private returns); "
          f"median of {args.repeat} runs")
    for name, times in walls.items():
        med = statistics.median(times)
        print(f"  {name:<18} {med:7.3f} s  {med / plain:5.2f}x plain")
    print("  cycles: " + ", ".join(f"{k} {v:,}" for k, v in cycles.items()))

    tt = snaps.tt
    m = snaps.machine
    per = tt.snapshot_bytes / tt.snapshot_count
    logs = LogArchive()
    one = [timed(lambda: capture(m, logs))[0] for _ in range(50)]
    extra = statistics.median(walls["debugger+reverse"]) - statistics.median(walls["debugger"])
    print(f"reverse execution, a snapshot every {tt.interval:,} cycles:")
    print(f"  {tt.snapshot_count} snapshots, {tt.snapshot_bytes / 1024:,.0f} KiB in all, "
          f"{per / 1024:,.1f} KiB each; one snapshot takes {statistics.median(one) * 1e6:,.0f} us "
          f"(median of 50); the run took {extra:+.3f} s with them "
          f"({extra / max(tt.snapshot_count, 1) * 1e3:,.2f} ms per interval)")
    wall, _ = timed(lambda: snaps.execute("reverse-stepi"))
    print(f"  reverse-stepi at the end: {wall * 1e3:,.0f} ms")
    snaps.execute("stepi")
    snaps.execute("break rsa_private")
    wall, out = timed(lambda: snaps.execute("reverse-continue"))
    print(f"  reverse-continue to rsa_private's start (cycle {m.cycles:,}): {wall:,.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
