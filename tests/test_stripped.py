"""Stripped images run exactly as their unstripped builds, and no byte pattern crashes
the decoder, the capstone model, the disassembler or a run.

Without symbols there are no ``$t``/``$d`` mapping symbols telling code from literal
pools; nothing in pkasim needs them to count cycles (blocks are decoded natively as
they execute), so the counts must not change. Images are stripped with GNU Arm's
strip (Debian binutils-arm-none-eabi, which .ci/run installs) or llvm-objcopy; the
pinned zig's objcopy cannot strip ARM ELF files ("unimplemented").
"""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from pkasim import native
from pkasim.chip.loader import load_image
from pkasim.core.cycles import CostRules, disassemble_one, model
from pkasim.core.machine import StopReason

REPO = Path(__file__).resolve().parent.parent
IMAGES = sorted(p.stem for p in (REPO / "firmware" / "images").glob("*.c")) + ["xrsa_opt"]
BUDGET = 3 * 10**7  # rsa_soft runs longer: both builds are compared at this budget


STRIP = next(([tool, "--strip-all"] for tool in ("arm-none-eabi-strip", "llvm-objcopy") if shutil.which(tool)), None)


def strip(src: Path, dst: Path) -> Path:
    if STRIP is None:
        pytest.skip("needs arm-none-eabi-strip (Debian binutils-arm-none-eabi) or llvm-objcopy to strip an ELF")
    subprocess.run([*STRIP, str(src), "-o", str(dst)], check=True)
    return dst


def outcome(m, r) -> tuple:
    return (r.reason, r.exit_code, r.cycles, r.instructions, m.stdout.getvalue(), m.stderr.getvalue(),
            r.fault.cause if r.fault else None, m.pc)


@pytest.mark.parametrize("name", IMAGES)
def test_a_stripped_image_runs_with_the_cycles_of_the_unstripped_one(make_machine, config, elf, tmp_path, name):
    stripped = strip(elf(name), tmp_path / f"{name}.stripped.elf")
    image = load_image(stripped, config)
    assert not image.symbols
    results = []
    for path in (elf(name), stripped):
        m = make_machine()
        m.load(path)
        results.append(outcome(m, m.run(max_cycles=BUDGET)))
    assert results[0] == results[1]


def test_random_bytes_never_crash_the_decoders_or_the_disassembler():
    rng = random.Random(1)
    lib = native.load()
    rules = native.Rules(32, 1, 0, 0x1000)
    insn = native.Insn()
    for _ in range(20000):
        data = bytes(rng.randrange(256) for _ in range(rng.choice((1, 2, 3, 4))))
        addr = rng.randrange(0, 1 << 32, 2)
        model(data, addr, CostRules(32, 1, 0, 0x1000), lambda a: rng.randrange(1 << 32))
        assert disassemble_one(data, addr)
        hw = data.ljust(4, b"\0")
        lib.pk_decode(addr, int.from_bytes(hw[:2], "little"), int.from_bytes(hw[2:4], "little"), rules, insn)
        assert insn.size in (2, 4)


@pytest.mark.parametrize("seed", range(8))
def test_random_code_in_sram_ends_in_a_modeled_stop(make_machine, elf, seed):
    """Random halfwords run from SRAM: whatever they do, the run ends as the core would
    (a fault, lockup, the budget, sleep), never in a Python error. Semihosting calls
    are left out (random host file operations)."""
    rng = random.Random(seed)
    code = bytearray(rng.randrange(256) for _ in range(512))
    for i in range(0, len(code), 2):
        if code[i + 1] == 0xBE and code[i] == 0xAB:
            code[i] = 0  # BKPT #0xab would be a semihosting call
    m = make_machine()
    m.load(elf("anywhere"))
    m.run(until="main", max_cycles=10**5)
    m.write_memory(0x20002000, bytes(code))
    m.set_reg("pc", 0x20002000)
    r = m.run(max_cycles=10**5)
    assert r.reason in set(StopReason)
