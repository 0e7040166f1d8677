"""Time travel: snapshots plus the recorded operations give back exactly the states
the forward execution passed through (emulator/debugger/timetravel.py)."""

from __future__ import annotations

import pytest
from unicorn import UC_HOOK_MEM_WRITE

from pkasim.debugger.timetravel import HISTORY_START, TimeTravel

SRAM = 0x20000000


@pytest.fixture
def xrsa(make_machine, elf):
    m = make_machine()
    m.load(elf("xrsa"))
    return m


def state(m) -> tuple:
    return (m.instructions, m.cycles, m.registers(), m.read_memory(SRAM, 16 * 1024), m.core.sleeping)


def test_reverse_step_gives_back_the_state_recorded_one_step_earlier(xrsa):
    tt = TimeTravel(xrsa, interval_cycles=5_000)
    tt.run(until="pka_run")
    seen = []
    for _ in range(400):  # through the PKA's WFI, its interrupt and the handler
        seen.append(state(xrsa))
        tt.step()
    for back in range(1, 6):
        assert tt.reverse_step().reason == "step"
        assert state(xrsa) == seen[-back]


def test_reverse_step_inside_a_run_stops_before_its_last_instruction(xrsa):
    tt = TimeTravel(xrsa, interval_cycles=20_000)
    tt.run(max_cycles=68_000)
    n, cycles = tt.position
    stop = tt.reverse_step()
    assert stop.instructions == n - 1 and stop.cycles < cycles
    tt.step()  # the last instruction again (the run then slept on to its budget)
    assert tt.position[0] == n and tt.position[1] <= cycles


def test_reverse_continue_returns_to_the_previous_breakpoint_hit(xrsa):
    tt = TimeTravel(xrsa, interval_cycles=20_000)
    xrsa.add_breakpoint(xrsa.image.symbol("pka_run").address)
    hits = []
    for _ in range(3):
        assert tt.run().reason == "breakpoint"
        hits.append(state(xrsa))
    tt.run(max_cycles=30_000)
    assert tt.reverse_continue().reason == "breakpoint"
    assert state(xrsa) == hits[2]
    assert tt.reverse_continue().reason == "breakpoint"
    assert state(xrsa) == hits[1]


def test_reverse_continue_without_an_earlier_hit_stops_at_the_start_of_history(xrsa):
    tt = TimeTravel(xrsa, interval_cycles=20_000)
    start = state(xrsa)
    tt.run(max_cycles=50_000)
    assert tt.reverse_continue(breakpoints=[]).reason == HISTORY_START
    assert state(xrsa) == start


def test_running_on_after_going_back_reaches_the_same_cycles(xrsa, make_machine, elf):
    plain = make_machine()
    plain.load(elf("xrsa"))
    tt = TimeTravel(xrsa, interval_cycles=200_000)
    tt.run(max_cycles=1_000_000)
    for _ in range(3):
        tt.reverse_step()
    assert tt.run().cycles == plain.run().cycles


def test_snapshots_are_counted_and_measured(xrsa):
    tt = TimeTravel(xrsa, interval_cycles=10_000)
    tt.run(max_cycles=100_000)
    assert tt.snapshot_count >= 10
    assert tt.snapshot_bytes >= tt.snapshot_count * 16 * 1024


def test_a_step_over_wfi_sleeps_until_the_interrupt_as_a_run_does(xrsa):
    xrsa.run(until="pka_run")
    while xrsa.read_memory(xrsa.pc, 2) != b"\x30\xbf":  # WFI
        xrsa.step()
    xrsa.step()
    assert xrsa.core.sleeping
    before = xrsa.cycles
    xrsa.step()
    assert not xrsa.core.sleeping and xrsa.cycles - before > 100  # slept through the MONTMUL


def test_reverse_continue_returns_to_just_after_the_last_watched_write(xrsa, make_machine, elf):
    addr = xrsa.image.symbol("pka_done").address
    # The truth: every instruction numbered by a code hook, every write to pka_done noted.
    plain = make_machine()
    plain.load(elf("xrsa"))
    current, writes = [0], []
    plain.on_instructions(0, 0xFFFFFFFF, lambda a, size, cycle, n: current.__setitem__(0, n))
    plain.core.uc.hook_add(UC_HOOK_MEM_WRITE, lambda *args: writes.append(current[0]), begin=addr, end=addr + 3)
    plain.core.flush_translations()
    plain.run(max_cycles=20_000)
    tt = TimeTravel(xrsa, interval_cycles=5_000)
    tt.run(max_cycles=20_000)
    assert xrsa.cycles == plain.cycles
    stop = tt.reverse_continue(breakpoints=[], watchpoints=[(addr, 4, "w")])
    assert stop.reason == "watchpoint"
    assert xrsa.instructions == writes[-1] + 1  # just after the last write
    tt.reverse_continue(breakpoints=[], watchpoints=[(addr, 4, "w")])
    assert xrsa.instructions == writes[-2] + 1


def test_goto_instruction_lands_just_after_the_instruction_before(xrsa):
    tt = TimeTravel(xrsa, interval_cycles=20_000)
    tt.run(max_cycles=60_000)
    n = xrsa.instructions - 1000
    tt.goto_instruction(n)
    assert xrsa.instructions == n
