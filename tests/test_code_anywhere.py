"""Code runs anywhere with exact cycles, and changed code is timed as it now is.

The anywhere image (firmware/images/anywhere.c) has the same loop in flash and in
SRAM, a function in SRAM that the core patches itself, and f_mul (three MULS) in
flash for the debugger to overwrite.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from stock_util import on_stock_wheel

from pkasim.cli.main import main

NOPS = bytes.fromhex("00bf00bf00bf")  # three NOPs over f_mul's three MULS
MULS = 0x4340  # muls r0, r0, r0
ADDS1 = 0x3001  # adds r0, #1


def muls32(config):
    return dataclasses.replace(config, core=dataclasses.replace(config.core, muls_cycles=32))


def buffer(m) -> int:
    """A word pair on the stack, away from any code."""
    return (m.reg("sp") - 512) & ~3


def test_the_anywhere_image_runs_its_sram_code_and_patches_itself(make_machine, elf):
    m = make_machine()
    m.load(elf("anywhere"))
    r = m.run(max_cycles=10**6)
    assert r.exit_code == 0
    assert m.stdout.getvalue() == b"loops 300 300, smc 1 -> 2\n"


def test_the_same_loop_takes_the_same_cycles_from_sram_as_from_flash(make_machine, elf):
    m = make_machine()
    m.load(elf("anywhere"))
    m.run(until="main", max_cycles=10**5)
    p = buffer(m)
    m.write_u32(p, 5)
    flash = m.call("loop_flash", 1000, p)
    assert m.reg("r0") == 5000
    ram = m.call("loop_ram", 1000, p)
    assert m.reg("r0") == 5000
    assert m.image.symbol("loop_ram").address >= m.config.sram.base
    # movs (1); 1000 x (ldr 2, adds 1, str 2, subs 1, bne 3 taken) - 2 (last bne not
    # taken); movs (1); bx lr (3)
    assert flash == ram == 1 + 1000 * 9 - 2 + 1 + 3


def test_overwriting_code_with_the_debugger_changes_the_next_calls_cycles(make_machine, config, elf):
    m = make_machine(muls32(config))
    m.load(elf("anywhere"))
    m.run(until="main", max_cycles=10**5)
    assert m.call("f_mul", 2) == 3 * 32 + 3 and m.reg("r0") == 256
    m.write_symbol("f_mul", NOPS)
    assert m.call("f_mul", 2) == 3 * 1 + 3 and m.reg("r0") == 2


def test_load_into_text_changes_the_run_by_the_replaced_instructions(tmp_path, capsys, repo, elf):
    nops = tmp_path / "nops.bin"
    nops.write_bytes(NOPS)
    cycles = []
    for extra in ([], ["--load", f"f_mul={nops}"]):
        out = tmp_path / "run.json"
        code = main(["run", str(elf("anywhere")), "--config", str(repo / "configs" / "ciu98320b-muls32.yaml"), "-q",
                     "--json", str(out), *extra])
        assert code == 0
        cycles.append(json.loads(out.read_text())["cycles"])
    capsys.readouterr()
    assert cycles[0] - cycles[1] == 3 * 31  # three MULS of 32 cycles became NOPs of 1


def test_code_the_core_rewrites_is_timed_as_rewritten(make_machine, config, elf):
    m = make_machine(muls32(config))
    m.load(elf("anywhere"))
    m.run(until="main", max_cycles=10**5)
    before = m.call("smc_target")  # movs; nop; bx lr
    assert m.reg("r0") == 1
    m.call("smc_patch", MULS)  # the core's own STRH over the NOP
    assert m.call("smc_target") == before + 31
    m.call("smc_patch", ADDS1)
    assert m.call("smc_target") == before and m.reg("r0") == 2


def test_stores_beside_sram_code_keep_its_decoded_blocks(make_machine, elf):
    m = make_machine()
    m.load(elf("anywhere"))
    m.run(until="main", max_cycles=10**5)
    m.call("smc_target")
    blocks = m.core.code.blocks()
    target = m.image.symbol("smc_target").address
    guest_buf = m.image.symbol("buf").address  # .data, in the watched span beside the SRAM code
    assert abs(guest_buf - target) < 256
    m.call("loop_ram", 10, guest_buf)  # stores into buf, next to the code
    assert m.core.code.blocks() >= blocks  # nothing was dropped


def test_firmware_that_never_runs_code_from_sram_watches_no_writes(make_machine, elf):
    m = make_machine()
    m.load(elf("compute"))
    m.run(max_cycles=10**6)
    assert m.core.code.watched() == {}


def test_code_run_from_sram_has_its_writes_watched_over_its_own_span_only(make_machine, elf):
    m = make_machine()
    m.load(elf("anywhere"))
    if m.core.code.by_translation:
        pytest.skip("the stock wheel finds code changes by translation, with no write watch")
    m.run(max_cycles=10**6)
    (lo, hi), = m.core.code.watched().values()
    sram = m.config.sram
    assert sram.base <= lo < hi <= sram.base + 1024  # the RAM functions, not all of SRAM
    assert lo <= m.image.symbol("loop_ram").address < hi


def test_a_decoded_machine_reports_the_memory_its_code_cache_holds(make_machine, elf):
    m = make_machine()
    m.load(elf("compute"))
    before = m.core.code.memory_bytes()
    m.run(max_cycles=10**6)
    assert m.core.code.blocks() > 10
    assert m.core.code.memory_bytes() >= before


# The stock Unicorn wheel (its own process: the engine is chosen once per process).
STOCK_SMC = """
import dataclasses, io, json, sys
from pkasim import Machine, load_config
from pkasim.native import engine
config = load_config()
config = dataclasses.replace(config, core=dataclasses.replace(config.core, muls_cycles=32))
m = Machine(config, stdout=io.BytesIO(), stderr=io.BytesIO())
m.load(sys.argv[1])
m.run(until="main", max_cycles=10**5)
out = {"engine": engine.selected(), "by_translation": m.core.code.by_translation}
out["before"] = m.call("smc_target")
m.call("smc_patch", MULS)
out["muls"], out["muls_r0"] = m.call("smc_target"), m.reg("r0")
blocks = m.core.code.blocks()
m.core.uc.ctl_flush_tb()  # every block translated again, no byte changed
out["again"] = m.call("smc_target")
out["kept"] = m.core.code.blocks() >= blocks
m.call("smc_patch", ADDS1)
out["adds"], out["adds_r0"] = m.call("smc_target"), m.reg("r0")
out["watched"] = m.core.code.watched()
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def stock_smc(elf) -> dict:
    script = f"MULS, ADDS1 = {MULS}, {ADDS1}\n" + STOCK_SMC
    out = on_stock_wheel(script, elf("anywhere"))
    assert out["by_translation"]
    return out


def test_code_the_core_rewrites_is_timed_as_rewritten_on_the_stock_wheel_without_a_write_watch(stock_smc):
    assert stock_smc["watched"] == {}  # no memory hook: every access keeps the engine's fast path
    assert stock_smc["muls"] == stock_smc["before"] + 31 and stock_smc["muls_r0"] == 1
    assert stock_smc["adds"] == stock_smc["before"] and stock_smc["adds_r0"] == 2


def test_sram_code_translated_again_unchanged_keeps_its_decoded_blocks_on_the_stock_wheel(stock_smc):
    assert stock_smc["again"] == stock_smc["muls"] and stock_smc["kept"]
