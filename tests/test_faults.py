"""Faults are taken as the core would: HardFault with the cause, or lockup when the
fault happens in HardFault itself; each path reports cause, PC symbol and registers."""

from __future__ import annotations

import pytest

from pkasim.core.machine import StopReason

SRAM_CODE = 0x20002000
KINDS = {
    1: ("unaligned access", "fault_unaligned_ldr"),
    2: ("read of unmapped address 0x30000000", "fault_unmapped_read"),
    3: ("undefined instruction", "fault_undefined"),
    4: ("write to unmapped address 0x30000000", "fault_unmapped_write"),
    5: ("instruction fetch from unmapped address 0x30000000", "0x30000000"),
    6: ("unaligned access", "fault_unaligned_strh"),
    7: ("unaligned access", "fault_unaligned_loaded_ptr"),
}


def fault_machine(make_machine, elf, kind: int, handler_mode: int):
    m = make_machine()
    m.load(elf("fault"))
    m.write_symbol("fault_kind", kind.to_bytes(4, "little"))
    m.write_symbol("fault_handler_mode", handler_mode.to_bytes(4, "little"))
    return m


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_fault_enters_hardfault_with_its_cause(make_machine, elf, kind):
    cause, where = KINDS[kind]
    m = fault_machine(make_machine, elf, kind, handler_mode=1)
    r = m.run(max_cycles=10**6)
    assert r.reason == StopReason.EXIT and r.exit_code == 3  # the firmware's handler ran
    assert b"HardFault caught" in m.stdout.getvalue()
    assert cause in r.fault.cause
    assert r.fault.where.startswith(where)
    assert m.exceptions_taken == {"HardFault": 1}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_fault_inside_hardfault_locks_up_with_a_report(make_machine, elf, kind):
    cause, where = KINDS[kind]
    m = fault_machine(make_machine, elf, kind, handler_mode=0)
    r = m.run(max_cycles=10**6)
    assert r.reason == StopReason.LOCKUP
    assert r.lockup.exception == "HardFault"
    assert "BKPT" in r.lockup.cause
    assert set(r.lockup.registers) >= {"r0", "sp", "lr", "pc", "xpsr"}
    assert r.lockup.recent_blocks
    assert cause in r.fault.cause and r.fault.where.startswith(where)


def test_unaligned_load_faults_before_it_executes(make_machine, elf):
    m = fault_machine(make_machine, elf, 1, handler_mode=1)
    r = m.run(max_cycles=10**6)
    assert r.fault.instruction.startswith("ldr")
    assert r.fault.registers["r0"] % 4 != 0  # the address register still holds the bad address
    assert r.fault.address == r.fault.registers["r0"]


def test_no_fault_runs_clean(make_machine, elf):
    m = fault_machine(make_machine, elf, 0, handler_mode=0)
    r = m.run(max_cycles=10**6)
    assert r.reason == StopReason.EXIT and r.exit_code == 0 and r.fault is None


def test_invalid_exc_return_is_a_fault(make_machine, elf):
    """A PendSV handler in SRAM returns with a bad EXC_RETURN:
    ``movs r0, #10`` (200a); ``mvns r0, r0`` (43c0) -> 0xfffffff5; ``bx r0`` (4700)."""
    m = make_machine()
    m.load(elf("bench"))
    m.write_memory(SRAM_CODE, bytes.fromhex("0a20c0430047"))
    m.write_u32(14 * 4, SRAM_CODE | 1)  # PendSV vector
    m.nvic.set_pending(14)
    r = m.run(max_cycles=10**5)
    assert r.reason == StopReason.LOCKUP  # bench's HardFault handler is a BKPT
    assert "EXC_RETURN 0xfffffff5" in r.fault.cause


def test_store_to_flash_is_a_fault(make_machine, elf):
    """``movs r0, #0`` (2000); ``str r0, [r0]`` (6000): flash is read-only to the core."""
    m = make_machine()
    m.load(elf("bench"))
    m.write_memory(SRAM_CODE, bytes.fromhex("00200060"))
    m.set_reg("pc", SRAM_CODE)
    r = m.run(max_cycles=10**5)
    assert "write to read-only memory 0x00000000" in r.fault.cause


def test_budget_ends_a_run_that_never_exits(make_machine, elf):
    """``adds r0, #1; b .-2`` (3001 e7fd) forever: a loop that changes a register each
    time round, so it is run, not fast-forwarded, until the budget."""
    m = make_machine()
    m.load(elf("bench"))
    m.write_memory(SRAM_CODE, bytes.fromhex("0130fde7"))
    m.set_reg("pc", SRAM_CODE)
    r = m.run(max_cycles=3000)
    assert r.reason == StopReason.BUDGET
    assert 3000 <= r.cycles < 3010


def test_branch_to_itself_with_nothing_to_interrupt_it_stops_at_once(make_machine, elf):
    """``b .`` (e7fe) with no event scheduled can never end: the run says so at once
    instead of spending the budget (docs/cycle-model.md, idle loops)."""
    m = make_machine()
    m.load(elf("bench"))
    m.write_memory(SRAM_CODE, bytes.fromhex("fee7"))
    m.set_reg("pc", SRAM_CODE)
    r = m.run(max_cycles=10**9)
    assert r.reason == StopReason.STUCK
    assert r.cycles < 100 and "no interrupt can fire" in r.message


def test_a_fault_report_lists_the_last_eight_block_starts_newest_first(make_machine, elf):
    m = fault_machine(make_machine, elf, 2, handler_mode=1)
    r = m.run(max_cycles=10**6)
    way = r.fault.recent_blocks
    assert len(way) == 8
    assert way[0].startswith("fault_unmapped_read")  # the block holding the faulting load
    assert way[-1].startswith("Reset_Handler")


def test_a_fault_before_any_block_ran_reports_no_way_there(make_machine, elf):
    m = make_machine()
    m.load(elf("fault"))
    m.set_reg("pc", 0x30000000)
    r = m.run(max_cycles=10**6)
    assert "instruction fetch from unmapped address" in r.fault.cause
    assert r.fault.recent_blocks == []  # (no empty slot of the ring shows as an address)
