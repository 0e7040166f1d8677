"""Emulation speed with and without cycle accounting, measured in one process.

Runs firmware/build/compute.elf (a 64x64-limb schoolbook multiply, repeated) two ways,
alternating, several times:

* plain:  bare Unicorn with the same memory map, no hooks but the one semihosting
          needs to end the run (an interrupt hook, called once);
* pkasim: the full Machine: native cycle hook, alignment checks, exception model.

It prints the median wall time of each, the emulated MIPS, and the ratio of the
two speeds (issue #2 asks for pkasim >= 0.7 of plain). Timing belongs here, never in
tests: the machine is shared, so only ratios measured in one run mean much.

    .venv/bin/python benchmarks/emu_speed.py [--iterations N] [--repeat R]
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from pathlib import Path

from unicorn import UC_ARCH_ARM, UC_HOOK_INTR, UC_MODE_MCLASS, UC_MODE_THUMB, Uc
from unicorn import arm_const as A

ROOT = Path(__file__).resolve().parent.parent

from pkasim import Machine, load_config  # noqa: E402
from pkasim.chip.loader import load_image  # noqa: E402


def plain_unicorn(image, config, iterations: int) -> float:
    uc = Uc(UC_ARCH_ARM, UC_MODE_THUMB | UC_MODE_MCLASS)
    uc.ctl_set_cpu_model(A.UC_CPU_ARM_CORTEX_M0)
    for region in config.memory.values():
        uc.mem_map(region.base, region.size)
    for base, data in image.segments:
        uc.mem_write(base, data)
    sym = image.symbol("iterations")
    sec = image.section_of(sym.address)
    uc.mem_write(sec.lma + sym.address - sec.vma, iterations.to_bytes(4, "little"))
    sp = int.from_bytes(uc.mem_read(0, 4), "little")
    pc = int.from_bytes(uc.mem_read(4, 4), "little")
    uc.reg_write(A.UC_ARM_REG_SP, sp)
    uc.reg_write(A.UC_ARM_REG_PC, pc)
    done = [False]

    def on_bkpt(uc, intno, _):
        if uc.reg_read(A.UC_ARM_REG_R0) in (0x18, 0x20):
            done[0] = True
        uc.reg_write(A.UC_ARM_REG_PC, (uc.reg_read(A.UC_ARM_REG_PC) + 2) | 1)
        uc.emu_stop()

    uc.hook_add(UC_HOOK_INTR, on_bkpt)
    start = time.perf_counter()
    while not done[0]:
        uc.emu_start(uc.reg_read(A.UC_ARM_REG_PC) | 1, 0xFFFFFFFF)
    return time.perf_counter() - start


def pkasim(image, config, iterations: int) -> tuple[float, int, int]:
    m = Machine(config, stdout=io.BytesIO(), stderr=io.BytesIO())
    m.load(image)
    m.write_symbol("iterations", iterations.to_bytes(4, "little"))
    start = time.perf_counter()
    result = m.run()
    wall = time.perf_counter() - start
    assert result.exit_code == 0, result
    return wall, result.instructions, result.cycles


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=150, help="multiplies per run (default 150)")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each (default 5)")
    parser.add_argument("--elf", default=str(ROOT / "firmware" / "build" / "compute.elf"))
    args = parser.parse_args()

    config = load_config()
    image = load_image(args.elf, config)
    plain_t, ours_t, ratios = [], [], []
    insns = cycles = 0
    plain_unicorn(image, config, 2)  # warm caches and imports
    for _ in range(args.repeat):
        p = plain_unicorn(image, config, args.iterations)
        o, insns, cycles = pkasim(image, config, args.iterations)
        plain_t.append(p)
        ours_t.append(o)
        ratios.append(p / o)
    p_med, o_med, r_med = statistics.median(plain_t), statistics.median(ours_t), statistics.median(ratios)
    print(f"workload: {Path(args.elf).name}, {args.iterations} iterations, {insns:,} instructions, {cycles:,} cycles")
    print(f"plain Unicorn:           median {p_med:.3f} s  ({insns / p_med / 1e6:.0f} MIPS)")
    print(f"pkasim (cycle-counted):  median {o_med:.3f} s  ({insns / o_med / 1e6:.0f} MIPS)")
    print(f"speed ratio pkasim/plain: median {r_med:.2f} (min {min(ratios):.2f}, max {max(ratios):.2f}), target >= 0.70")
    return 0


if __name__ == "__main__":
    sys.exit(main())
