"""Code in SRAM against the same code in flash, and the code cache's memory.

Speed: firmware/build/anywhere.elf has one loop (load, add, store, count down,
branch) twice, byte for byte: loop_flash in flash and loop_ram in SRAM (a RAM
function the startup code copies). Both are called in one process, alternating, and
the script prints the median wall time of each, the emulated MIPS and the ratio
(issue #7 asks for SRAM within 2x of flash). The two must also take the same cycles.
It also times loop_flash in a machine that never ran code from SRAM: how much slower
a program becomes by running some code from SRAM (issue #20: within 2x). Each engine
(``--engines``, docs/engine.md) runs in its own process, the rounds alternate between
them, and ``--baseline DIR`` adds another checkout's pkasim on the stock wheel (DIR
holds a ``pkasim`` package, or links one to its ``emulator`` folder, with its native
library built in place).

Memory: the native code cache holds what executed, not a table per halfword of
flash; the script runs compute.elf on chips whose flash is 320 KiB and 16 MiB and
prints the cache's bytes for each (the per-halfword tables it replaced took 19 bytes
per byte of flash: cost, length and flags, a 12-byte descriptor and a 20-byte block
entry per halfword).

Timing belongs here, never in tests: the machine is shared, so only ratios measured
in one run mean much.

    .venv/bin/python benchmarks/code_anywhere.py [--iterations N] [--repeat R]
        [--engines stock,patched] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if "--root" in sys.argv:  # a child for another checkout: its pkasim first
    sys.path.insert(0, sys.argv[sys.argv.index("--root") + 1])

from pkasim import Machine, load_config  # noqa: E402

BUILD = ROOT / "firmware" / "build"
OLD_TABLE_BYTES_PER_BYTE = 19  # (3 + 12 + 20) bytes per halfword, rounded down per byte


def timed_call(m: Machine, function: str, n: int, buf: int) -> tuple[float, int]:
    start = time.perf_counter()
    cycles = m.call(function, n, buf, max_cycles=20 * n + 1000)
    return time.perf_counter() - start, cycles


def _machine() -> tuple[Machine, int]:
    m = Machine(load_config(), stdout=io.BytesIO(), stderr=io.BytesIO())
    m.load(BUILD / "anywhere.elf")
    m.run(until="main", max_cycles=10**5)
    buf = (m.reg("sp") - 512) & ~3  # on the stack, away from the code
    m.write_u32(buf, 1)
    return m, buf


def child_round(iterations: int) -> dict:
    """One round: loop_flash in a machine that never ran code from SRAM, then
    loop_flash and loop_ram in one that did."""
    from pkasim.native import engine

    alone, buf = _machine()
    timed_call(alone, "loop_flash", 1000, buf)  # decode and translate once
    out = {"engine": engine.selected(), "flash_only": timed_call(alone, "loop_flash", iterations, buf)[0]}
    m, buf = _machine()
    for name in ("loop_flash", "loop_ram"):
        timed_call(m, name, 1000, buf)
    for name in ("loop_flash", "loop_ram"):
        out[name], out[f"{name}_cycles"] = timed_call(m, name, iterations, buf)
    return out


def speed(iterations: int, repeat: int, engines: list[str], baseline: str | None) -> None:
    runners = [(f"pkasim:{e}", {**os.environ, "PKASIM_ENGINE": e}, []) for e in engines]
    if baseline:
        runners.append(("baseline", {**os.environ, "PKASIM_ENGINE": "stock"}, ["--root", baseline]))
    rounds: dict[str, list[dict]] = {name: [] for name, _, _ in runners}
    for _ in range(repeat):
        for name, env, extra in runners:
            done = subprocess.run([sys.executable, __file__, "--child", "--iterations", str(iterations), *extra],
                                  env=env, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise SystemExit(f"{name}: child failed: {done.stderr.strip()[-800:]}")
            rounds[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
    insns = 5 * iterations + 3
    cycles = {r["loop_flash_cycles"] for rs in rounds.values() for r in rs} | \
        {r["loop_ram_cycles"] for rs in rounds.values() for r in rs}
    if len(cycles) != 1:
        raise SystemExit(f"the loops' cycle counts differ: {sorted(cycles)}")
    print(f"loop: {iterations:,} iterations, {insns:,} instructions, {cycles.pop():,} cycles from flash and SRAM; "
          f"median of {repeat} rounds")
    print(f"{'':18s}{'no SRAM code':>14s}{'flash':>10s}{'SRAM':>10s}   (MIPS)   SRAM/flash  SRAM/no-SRAM-code")
    for name, rs in rounds.items():
        mips = [insns / statistics.median(r[k] for r in rs) / 1e6 for k in ("flash_only", "loop_flash", "loop_ram")]
        per_flash = statistics.median(r["loop_ram"] / r["loop_flash"] for r in rs)
        per_alone = statistics.median(r["loop_ram"] / r["flash_only"] for r in rs)
        label = name if name != "pkasim:auto" else f"pkasim:{rs[0]['engine']}"
        print(f"{label:18s}{mips[0]:14,.0f}{mips[1]:10,.0f}{mips[2]:10,.0f}{per_flash:20.2f}{per_alone:19.2f}")
    print("(goals: SRAM/flash <= 2.00, issue #7; SRAM/no-SRAM-code <= 2.00, issue #20)")


def memory() -> None:
    base = load_config()
    for size in (320 << 10, 16 << 20):
        flash = dataclasses.replace(base.flash, size=size)
        config = dataclasses.replace(base, memory={**base.memory, "flash": flash})
        m = Machine(config, stdout=io.BytesIO(), stderr=io.BytesIO())
        m.load(BUILD / "compute.elf")
        m.run(max_cycles=10**8)
        cache = m.core.code.memory_bytes()
        print(f"flash {size >> 10:>6} KiB: code cache {cache / 1024:.1f} KiB for {m.core.code.blocks()} blocks "
              f"(per-halfword tables: {OLD_TABLE_BYTES_PER_BYTE * size / (1 << 20):.1f} MiB)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2_000_000, help="loop iterations per call (default 2,000,000)")
    parser.add_argument("--repeat", type=int, default=5, help="rounds (default 5)")
    parser.add_argument("--engines", default="stock,patched", help="pkasim engines to run (docs/engine.md)")
    parser.add_argument("--baseline", help="another checkout's pkasim, run on the stock wheel")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child_round(args.iterations)))
        return 0
    speed(args.iterations, args.repeat, args.engines.split(","),
          str(Path(args.baseline).resolve()) if args.baseline else None)
    memory()
    return 0


if __name__ == "__main__":
    sys.exit(main())
