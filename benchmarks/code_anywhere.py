"""Code in SRAM against the same code in flash, and the code cache's memory.

Speed: firmware/build/anywhere.elf has one loop (load, add, store, count down,
branch) twice, byte for byte: loop_flash in flash and loop_ram in SRAM (a RAM
function the startup code copies). Both are called in one process, alternating, and
the script prints the median wall time of each, the emulated MIPS and the ratio
(issue #7 asks for SRAM within 2x of flash). The two must also take the same cycles.

Memory: the native code cache holds what executed, not a table per halfword of
flash; the script runs compute.elf on chips whose flash is 320 KiB and 16 MiB and
prints the cache's bytes for each (the per-halfword tables it replaced took 19 bytes
per byte of flash: cost, length and flags, a 12-byte descriptor and a 20-byte block
entry per halfword).

Timing belongs here, never in tests: the machine is shared, so only ratios measured
in one run mean much.

    .venv/bin/python benchmarks/code_anywhere.py [--iterations N] [--repeat R]
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from pkasim import Machine, load_config  # noqa: E402

BUILD = ROOT / "firmware" / "build"
OLD_TABLE_BYTES_PER_BYTE = 19  # (3 + 12 + 20) bytes per halfword, rounded down per byte


def timed_call(m: Machine, function: str, n: int, buf: int) -> tuple[float, int]:
    start = time.perf_counter()
    cycles = m.call(function, n, buf, max_cycles=20 * n + 1000)
    return time.perf_counter() - start, cycles


def speed(iterations: int, repeat: int) -> None:
    m = Machine(load_config(), stdout=io.BytesIO(), stderr=io.BytesIO())
    m.load(BUILD / "anywhere.elf")
    m.run(until="main", max_cycles=10**5)
    buf = (m.reg("sp") - 512) & ~3  # on the stack, away from the code
    m.write_u32(buf, 1)
    for name in ("loop_flash", "loop_ram"):
        timed_call(m, name, 1000, buf)  # decode and translate once
    times: dict[str, list[float]] = {"loop_flash": [], "loop_ram": []}
    cycles: dict[str, int] = {}
    for _ in range(repeat):
        for name in times:
            wall, cycles[name] = timed_call(m, name, iterations, buf)
            times[name].append(wall)
    insns = 5 * iterations + 3
    flash, ram = statistics.median(times["loop_flash"]), statistics.median(times["loop_ram"])
    ratios = [r / f for f, r in zip(times["loop_flash"], times["loop_ram"])]
    print(f"loop: {iterations:,} iterations, {insns:,} instructions, "
          f"{cycles['loop_flash']:,} cycles from flash, {cycles['loop_ram']:,} from SRAM")
    print(f"flash: median {flash:.3f} s ({insns / flash / 1e6:.0f} MIPS)")
    print(f"SRAM:  median {ram:.3f} s ({insns / ram / 1e6:.0f} MIPS)")
    print(f"SRAM/flash time: median {statistics.median(ratios):.2f} (min {min(ratios):.2f}, "
          f"max {max(ratios):.2f}), goal <= 2.00")


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
    parser.add_argument("--repeat", type=int, default=5, help="calls of each (default 5)")
    args = parser.parse_args()
    speed(args.iterations, args.repeat)
    memory()
    return 0


if __name__ == "__main__":
    sys.exit(main())
