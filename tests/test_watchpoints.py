"""Machine watchpoints (emulator/core/watchpoints.py): a run stops exactly at the
instruction that reads or writes a watched range, with the registers, memory and
cycle count forward execution has there, before or after that instruction."""

from __future__ import annotations

import pytest

from pkasim.base.errors import UsageError
from pkasim.core.results import StopReason

CODE = 0x20002000
DATA = 0x20003000
STACK = 0x20003800
PROGRAM = [
    0xB40F,  # push {r0, r1, r2, r3}: stores at SP-16 .. SP-4
    0xCCE0,  # ldm r4!, {r5, r6, r7}: loads DATA, DATA+4, DATA+8
    0xBE00,  # bkpt #0
]


def small_program(m) -> None:
    """Three instructions in SRAM exercising multiple-register stores and loads."""
    m.write_memory(CODE, b"".join(hw.to_bytes(2, "little") for hw in PROGRAM))
    m.write_memory(DATA, bytes.fromhex("11111111" "22222222" "33333333"))
    for i in range(4):
        m.set_reg(f"r{i}", 0xA0A0A0A0 + i)
    m.set_reg("r4", DATA)
    m.set_reg("sp", STACK)
    m.set_reg("pc", CODE)
    m.debugger_attached = True


@pytest.fixture
def compute(make_machine, elf):
    def make():
        m = make_machine()
        m.load(elf("compute"))
        return m
    return make


def forward_reference(make, pc: int, instructions: int):
    """The machine a run without watchpoints reaches after ``instructions``
    instructions, the last one at ``pc`` (a breakpoint there, then one step)."""
    m = make()
    m.add_breakpoint(pc)
    while m.instructions < instructions - 1:
        assert m.run().reason == StopReason.BREAKPOINT
    assert m.instructions == instructions - 1 and m.pc == pc
    m.remove_breakpoint(pc)
    m.step()
    return m


def test_a_write_watchpoint_stops_after_the_store_with_the_forward_counts(compute):
    m = compute()
    a5 = m.image.symbol("a").address + 5 * 4
    m.add_watchpoint(a5, 4, "write")
    first = m.run()  # the startup code zeroing .bss
    assert first.reason == StopReason.WATCHPOINT
    result = m.run()  # main's a[i] = rng()
    assert result.reason == StopReason.WATCHPOINT
    hit = result.watch
    assert hit.write and hit.address == a5 and hit.pc == m.pc - 2
    assert hit.old == bytes(4) and hit.new == m.read_memory(a5, 4) != bytes(4)
    ref = forward_reference(compute, hit.pc, m.instructions)
    assert (ref.cycles, ref.instructions, ref.registers()) == (m.cycles, m.instructions, m.registers())
    assert ref.read_memory(a5, 4) == hit.new


def test_a_read_watchpoint_stops_after_the_load(compute):
    m = compute()
    b3 = m.image.symbol("b").address + 3 * 4
    m.add_watchpoint(b3, 4, "read")
    result = m.run()
    assert result.reason == StopReason.WATCHPOINT
    assert not result.watch.write and result.watch.address == b3
    ref = forward_reference(compute, result.watch.pc, m.instructions)
    assert (ref.cycles, ref.registers()) == (m.cycles, m.registers())


def test_stopping_before_leaves_the_instruction_unexecuted_and_resuming_runs_it_once(compute):
    m = compute()
    a5 = m.image.symbol("a").address + 5 * 4
    m.watchpoint_stop = "before"
    m.add_watchpoint(a5, 4, "write")
    m.run()
    result = m.run()
    hit = result.watch
    assert result.reason == StopReason.WATCHPOINT and hit.new is None
    assert m.pc == hit.pc and m.read_memory(a5, 4) == bytes(4)
    ref = forward_reference(compute, hit.pc, m.instructions + 1)
    m.step()
    assert (m.cycles, m.registers()) == (ref.cycles, ref.registers())
    assert m.read_memory(a5, 4) != bytes(4)


def test_resuming_from_a_stop_before_does_not_stop_at_the_same_access_again(compute):
    m = compute()
    m.watchpoint_stop = "before"
    m.add_watchpoint("compute_checksum", kind="write")
    stops = []
    while (r := m.run()).reason == StopReason.WATCHPOINT:
        stops.append((r.watch.pc, m.instructions))
    assert r.reason == StopReason.EXIT and len(stops) == len(set(stops)) >= 2


def test_a_push_is_stopped_before_any_of_its_stores(make_machine, elf):
    m = make_machine()
    m.load(elf("compute"))
    small_program(m)
    m.watchpoint_stop = "before"
    m.add_watchpoint(STACK - 8, 4, "write")  # r2's slot, the third store
    result = m.run()
    assert result.reason == StopReason.WATCHPOINT and m.pc == CODE
    assert result.watch.address == STACK - 8 and m.reg("sp") == STACK
    assert m.read_memory(STACK - 16, 16) == bytes(16)
    assert result.cycles == m.cycles


def test_an_ldm_stopped_after_has_loaded_every_register_and_written_back(make_machine, elf):
    m = make_machine()
    m.load(elf("compute"))
    small_program(m)
    m.add_watchpoint(DATA + 4, 4, "read")
    before = m.cycles
    result = m.run()
    assert result.reason == StopReason.WATCHPOINT and m.pc == CODE + 4
    assert [m.reg(r) for r in ("r5", "r6", "r7", "r4")] == [0x11111111, 0x22222222, 0x33333333, DATA + 12]
    assert m.cycles - before == (1 + 4) + (1 + 3)  # PUSH and LDM of N registers: 1 + N (DDI0432C table 3-1)


def test_an_ldm_stopped_before_has_loaded_nothing(make_machine, elf):
    m = make_machine()
    m.load(elf("compute"))
    small_program(m)
    m.watchpoint_stop = "before"
    m.add_watchpoint(DATA + 8, 4, "access")
    result = m.run()
    assert result.reason == StopReason.WATCHPOINT and m.pc == CODE + 2
    assert [m.reg(r) for r in ("r5", "r6", "r7", "r4")] == [0, 0, 0, DATA]


def test_a_step_over_a_watched_store_completes_and_reports_it(make_machine, elf):
    m = make_machine()
    m.load(elf("compute"))
    small_program(m)
    m.add_watchpoint(STACK - 4, 4, "write")
    result = m.step()
    assert result.reason == StopReason.STEP and m.pc == CODE + 2
    assert result.watch.address == STACK - 4 and result.watch.new == (0xA0A0A0A3).to_bytes(4, "little")


def test_a_removed_watchpoint_no_longer_stops(compute):
    m = compute()
    m.add_watchpoint("compute_checksum", kind="access")
    assert m.remove_watchpoint("compute_checksum", kind="access")
    assert m.watchpoints == []
    assert m.run().reason == StopReason.EXIT


def test_device_registers_cannot_be_watched(compute):
    m = compute()
    with pytest.raises(UsageError, match="not device registers"):
        m.add_watchpoint(0xE000E010, 4, "read")


def test_an_unknown_kind_is_refused(compute):
    with pytest.raises(UsageError, match="kind 'change'"):
        compute().add_watchpoint("compute_checksum", kind="change")


def test_a_load_in_the_middle_of_a_translated_block_is_found_exactly(make_machine, elf):
    """Unicorn's PC in a memory hook is often the start of the translated block, not
    the load (xRSA's exponent loop reads a key byte mid-block): the stop must still be
    at the load, with the counts forward execution has after it."""
    def make():
        m = make_machine()
        m.load(elf("xrsa"))
        return m

    m = make()
    byte = m.image.symbol("rsa_input_key").address + 0x407  # an exponent byte read in crt_exp's loop
    m.add_watchpoint(byte, 1, "read")
    result = m.run()
    assert result.reason == StopReason.WATCHPOINT and m.describe(result.watch.pc).startswith("crt_exp+")
    ref = forward_reference(make, result.watch.pc, m.instructions)
    assert (ref.cycles, ref.instructions, ref.registers()) == (m.cycles, m.instructions, m.registers())


def test_stores_just_below_a_watched_word_do_not_stop_the_run(compute):
    """compute.elf's checksum word follows its product array, whose last words lie in the
    bytes below the range the hook covers (for multiple stores reaching it); the run
    stops only where the checksum itself is written."""
    m = compute()
    m.write_symbol("iterations", (2).to_bytes(4, "little"))
    checksum = m.image.symbol("compute_checksum").address
    w = m.add_watchpoint("compute_checksum", 4, "write")
    hits = []
    while (r := m.run(max_cycles=10**8)).reason == StopReason.WATCHPOINT:
        hits.append(r.watch.address)
    assert r.reason == StopReason.EXIT and r.exit_code == 0
    assert hits and set(hits) == {checksum} and w.address == checksum


def test_a_read_watchpoint_on_flash_data_with_wait_states_keeps_the_forward_counts(make_machine, config, elf):
    """kernels.elf's string search reads a table in flash: each stop at such a read is at
    the count a run without the watchpoint has after that instruction (the read's wait
    state is paid once; a block entered at the upper half of a flash word keeps its
    entry fetch when stopped inside), and the run ends with the unwatched count."""
    import dataclasses

    ws_config = dataclasses.replace(config, memory={**config.memory,
                                                    "flash": dataclasses.replace(config.flash, wait_states=1)})

    def make():
        m = make_machine(ws_config)
        m.load(elf("kernels"))
        m.write_symbol("iterations", (1).to_bytes(4, "little"))
        return m

    plain = make()
    assert plain.run(max_cycles=10**8).reason == StopReason.EXIT
    m = make()
    m.add_watchpoint(m.image.symbol("haystack").address + 0x10, 4, "read")
    hits = []
    while (r := m.run(max_cycles=10**8)).reason == StopReason.WATCHPOINT:
        hits.append((r.watch.pc, m.instructions, m.cycles))
    assert r.reason == StopReason.EXIT and m.cycles == plain.cycles
    assert len(hits) >= 6
    for pc, instructions, cycles in hits[:6]:
        assert forward_reference(make, pc, instructions).cycles == cycles
