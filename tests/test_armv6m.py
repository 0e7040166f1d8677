"""Only ARMv6-M executes: every other encoding is UNDEFINED and takes HardFault with
the instruction named, after the instructions before it in its block have run.

Unicorn's cortex-m0 model executes some ARMv7-M instructions (MOVW, UDIV, LDR.W, CBZ,
IT, VFP loads) and gives results; the native decoder stops them. Programs in SRAM
are hand-assembled, their disassembly beside them.
"""

from __future__ import annotations

import pytest

from pkasim.core.machine import StopReason

SRAM_CODE = 0x20002000

PROBES = {
    "v7m_udiv": "udiv r0, r1, r2",
    "v7m_movw": "movw r0, #0x1234",
    "v7m_ldrw": "ldr.w r0, [r1, #4]",
    "v7m_cbz": "cbz r0",
    "v7m_it": "it eq",
    "v7m_vldr": "vldr d14, [pc]",
}


def at_main(make_machine, elf, name="anywhere"):
    m = make_machine()
    m.load(elf(name))
    m.run(until="main", max_cycles=10**5)
    return m


@pytest.mark.parametrize("function", sorted(PROBES))
def test_an_armv7m_instruction_is_undefined_and_named_in_the_fault(make_machine, elf, function):
    m = at_main(make_machine, elf)
    m.set_reg("pc", m.image.symbol(function).address)
    r = m.run(max_cycles=10**5)
    assert r.reason == StopReason.EXIT and r.exit_code == 3  # the image's HardFault handler ran
    assert m.stdout.getvalue() == b"HardFault\n"
    assert r.fault.cause.startswith(f"undefined instruction ({PROBES[function]}")
    assert r.fault.where == function
    assert m.exceptions_taken == {"HardFault": 1}


def run_sram(m, code: str, max_cycles: int = 10**4):
    m.write_memory(SRAM_CODE, bytes.fromhex(code))
    m.set_reg("pc", SRAM_CODE)
    return m.run(max_cycles=max_cycles)


def test_the_instructions_before_an_undefined_one_run_first(make_machine, elf):
    """``movs r0, #5`` (2005); ``adds r0, #1`` (3001); ``udiv r0, r1, r2`` (fbb1 f0f2)."""
    m = at_main(make_machine, elf)
    before = m.cycles
    r = run_sram(m, "05200130b1fbf2f0")
    assert r.fault.pc == SRAM_CODE + 4
    assert r.fault.registers["r0"] == 6
    assert r.fault.instruction == "udiv r0, r1, r2"
    # movs, adds: 2 cycles; then exception entry (16), then the handler's own cycles
    assert r.fault.registers["pc"] == SRAM_CODE + 4
    assert m.cycles - before > 2 + 16


def test_a_step_executes_the_valid_instruction_before_an_undefined_one(make_machine, elf):
    """Same program: single steps run MOVS, then ADDS, then fault at UDIV."""
    m = at_main(make_machine, elf)
    m.write_memory(SRAM_CODE, bytes.fromhex("05200130b1fbf2f0"))
    m.set_reg("pc", SRAM_CODE)
    assert m.step().reason == StopReason.STEP and m.pc == SRAM_CODE + 2 and m.reg("r0") == 5
    assert m.step().reason == StopReason.STEP and m.pc == SRAM_CODE + 4 and m.reg("r0") == 6
    m.step()
    assert m.active_exception() == 3  # HardFault
    assert "udiv" in m.last_fault.cause


def test_yield_is_a_one_cycle_nop(make_machine, elf):
    """``yield`` (bf10); ``movs r0, #7`` (2007); ``b .`` (e7fe). Unicorn raises after
    YIELD as if it were undefined; the core treats it as a NOP."""
    m = at_main(make_machine, elf)
    r = run_sram(m, "10bf0720fee7", max_cycles=100)
    assert r.reason in (StopReason.BUDGET, StopReason.STUCK) and r.fault is None
    assert m.reg("r0") == 7


def test_wfe_sleeps_like_wfi(make_machine, elf):
    """``wfe`` (bf20); ``b .`` (e7fe): nothing can wake the core."""
    m = at_main(make_machine, elf)
    r = run_sram(m, "20bffee7")
    assert r.reason == StopReason.SLEEP_FOREVER and r.fault is None


def test_a_branch_without_the_thumb_bit_faults_with_invstate(make_machine, elf):
    """``movs r0, #0x20`` (2020); ``lsls r0, r0, #24`` (0600); ``bx r0`` (4700): to an
    even address, so the core leaves Thumb state and faults at the target."""
    m = at_main(make_machine, elf)
    r = run_sram(m, "202000060047")
    assert "INVSTATE" in r.fault.cause
    assert r.fault.pc == 0x20000000


@pytest.mark.parametrize("code,what", [("00b1", "cbz"), ("08bf", "it eq"), ("62b6", None), ("50b6", None)])
def test_sixteen_bit_encodings_outside_armv6m_are_undefined(make_machine, elf, code, what):
    """CBZ and IT are ARMv7-M; 0xB662 is CPSIE i (ARMv6-M has it), 0xB650 is SETEND
    (never on M-profile)."""
    m = at_main(make_machine, elf)
    r = run_sram(m, code + "fee7", max_cycles=200)
    if code == "62b6":
        assert r.fault is None
    else:
        assert r.fault is not None and r.fault.cause.startswith("undefined instruction")
        if what:
            assert what in r.fault.cause
