"""A device model that raises while the engine calls it from C (a native device's slow
path, the rest of a page dispatched in C) ends the run with that exception, as one
called through the Unicorn binding does: a ctypes callback cannot raise, so the bus
stops the engine and the run loop raises it after the engine returns."""

from __future__ import annotations

import pytest

from pkasim.peripherals.pka import Reg

SRAM_CODE = 0x20002000
EXIT = "1820022109042631abbe"  # movs r0,#0x18; movs r1,#2; lsls r1,#16; adds r1,#0x26; bkpt 0xab
# movs r0,#0xE0; lsls r0,#24; movs r1,#0xE1; lsls r1,#8; adds r0,r1 (0xE000E100: ISER); movs r1,#1; str r1,[r0]
WRITE_ISER = "e0200006e1210902401801210160"
# movs r0,#0x40; lsls r0,#24; movs r1,#1; lsls r1,#16; adds r0,r1 (0x40010000: the PKA); movs r1,#64; str r1,[r0,#0xc]
WRITE_PKA_LEN = "402000060121090440184021c160"


class ModelBug(Exception):
    pass


def _raising(offset: int, size: int, value: int = 0) -> int:
    raise ModelBug(f"offset 0x{offset:x}")


def _machine(make_machine, elf, code: str):
    m = make_machine()
    m.load(elf("bench"))
    m.write_memory(SRAM_CODE, bytes.fromhex(code + EXIT))
    m.set_reg("pc", SRAM_CODE)
    return m


def test_an_exception_in_the_nvic_model_on_the_shared_page_ends_the_run(make_machine, elf):
    m = _machine(make_machine, elf, WRITE_ISER)
    m.peripherals["nvic"].write = _raising
    with pytest.raises(ModelBug, match="offset 0x0"):
        m.run(max_cycles=10**5)
    assert m.bus.callback_error is None  # raised once, not left for the next run


def test_an_exception_in_a_native_devices_slow_path_ends_the_run(make_machine, elf):
    m = _machine(make_machine, elf, WRITE_PKA_LEN)
    m.fast_paths = False  # every PKA access through pka.py, by the native window's slow path
    m.peripherals["pka"].write = _raising
    with pytest.raises(ModelBug, match="offset 0xc"):
        m.run(max_cycles=10**5)


def test_the_same_programs_run_to_their_exit_with_the_models_as_they_are(make_machine, elf):
    for code in (WRITE_ISER, WRITE_PKA_LEN):
        m = _machine(make_machine, elf, code)
        r = m.run(max_cycles=10**5)
        assert r.exit_code == 0, r.message
    assert m.peripherals["pka"].regs[Reg.LEN] == 64
