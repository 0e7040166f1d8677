"""Host memory per MiB of emulated flash and SRAM, for the limits in docs/robustness.md.

Each measurement runs in a fresh process: the default chip with flash (or SRAM) set to
a given size, hello.elf loaded and run; the peak resident set (ru_maxrss) is read.
The cost per MiB is the slope between the smallest and the largest size, so the
interpreter, Unicorn and the libraries (the same in every process) cancel out.

    .venv/bin/python benchmarks/memory.py [--flash 1 4 16] [--sram 1 16 64]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import io, resource, sys
sys.path.insert(0, {root!r})
from pkasim.chip.config import DEFAULT_CONFIG, parse_config
from pkasim.core.machine import Machine
text = DEFAULT_CONFIG.read_text()
text = text.replace("size: 320 KiB", "size: {flash} KiB").replace("size: 16 KiB  ", "size: {sram} KiB  ")
m = Machine(parse_config(text), stdout=io.BytesIO(), stderr=io.BytesIO())
m.load({elf!r})
m.run(max_cycles=100_000)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def peak_kib(flash_kib: int, sram_kib: int) -> int:
    code = CHILD.format(root=str(ROOT), flash=flash_kib, sram=sram_kib,
                        elf=str(ROOT / "firmware" / "build" / "hello.elf"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1])


def slope(points: list[tuple[int, int]]) -> float:
    (x0, y0), (x1, y1) = points[0], points[-1]
    return (y1 - y0) / (x1 - x0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flash", type=int, nargs="+", default=[1, 4, 16], help="flash sizes, MiB")
    parser.add_argument("--sram", type=int, nargs="+", default=[1, 16, 64], help="SRAM sizes, MiB")
    args = parser.parse_args()
    flash = [(mib, peak_kib(mib * 1024, 16)) for mib in args.flash]
    sram = [(mib, peak_kib(320, mib * 1024)) for mib in args.sram]
    print("flash MiB  peak RSS MiB")
    for mib, kib in flash:
        print(f"{mib:9d}  {kib / 1024:12.1f}")
    print(f"host memory per MiB of flash: {slope(flash) / 1024:.1f} MiB")
    print("SRAM MiB   peak RSS MiB")
    for mib, kib in sram:
        print(f"{mib:8d}  {kib / 1024:12.1f}")
    print(f"host memory per MiB of SRAM: {slope(sram) / 1024:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
