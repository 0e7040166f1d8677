"""SysTick follows the ARMv6-M rules (ARM DDI0419, B3.3), checked against the model alone."""

from __future__ import annotations

import pytest

from pkasim.base.clock import Clock
from pkasim.peripherals.systick import CALIB_NOREF, CSR_CLKSOURCE, CSR_COUNTFLAG, CSR_ENABLE, CSR_TICKINT, Reg, SysTick

HZ = 48_000_000


class Counter:
    cycles = 0


@pytest.fixture
def rig():
    """A SysTick on a bare clock; ``advance(n)`` moves time and fires due events."""
    src = Counter()
    clock = Clock(src, HZ)
    pended: list[int] = []
    tick = SysTick("systick", 0xE000E010, clock, lambda: pended.append(src.cycles), reference_clock_hz=HZ // 2)

    def advance(n: int) -> None:
        target = src.cycles + n
        while True:
            nxt = clock.next_deadline()
            if nxt is None or nxt > target:
                break
            src.cycles = nxt
            clock.run_due()
        src.cycles = target

    return tick, advance, pended, src


def start(tick: SysTick, reload: int, csr: int = CSR_ENABLE | CSR_TICKINT | CSR_CLKSOURCE) -> None:
    tick.write(Reg.RVR, 4, reload)
    tick.write(Reg.CVR, 4, 0)
    tick.write(Reg.CSR, 4, csr)


def test_period_is_reload_plus_one(rig):
    tick, advance, pended, _ = rig
    start(tick, 99)
    advance(1000)
    assert pended == [100, 200, 300, 400, 500, 600, 700, 800, 900, 1000]


def test_counter_reloads_then_counts_down(rig):
    tick, advance, _, _ = rig
    start(tick, 99)
    advance(1)
    assert tick.read(Reg.CVR, 4) == 99
    advance(9)
    assert tick.read(Reg.CVR, 4) == 90


def test_countflag_sets_on_reaching_zero_and_clears_on_read(rig):
    tick, advance, _, _ = rig
    start(tick, 9)
    advance(5)
    assert not tick.read(Reg.CSR, 4) & CSR_COUNTFLAG
    advance(5)
    assert tick.read(Reg.CSR, 4) & CSR_COUNTFLAG
    assert not tick.read(Reg.CSR, 4) & CSR_COUNTFLAG


def test_cvr_write_clears_value_and_countflag_without_pending(rig):
    tick, advance, pended, _ = rig
    start(tick, 9)
    advance(10)
    assert pended == [10]
    tick.write(Reg.CVR, 4, 1234)
    assert tick.read(Reg.CVR, 4) == 0
    assert not tick.read(Reg.CSR, 4) & CSR_COUNTFLAG
    assert pended == [10]


def test_cvr_write_restarts_the_period(rig):
    tick, advance, pended, src = rig
    start(tick, 99)
    advance(50)
    tick.write(Reg.CVR, 4, 0)
    advance(100)
    assert pended == [150]


def test_tickint_clear_sets_countflag_but_pends_nothing(rig):
    tick, advance, pended, _ = rig
    start(tick, 9, CSR_ENABLE | CSR_CLKSOURCE)
    advance(30)
    assert pended == []
    assert tick.read(Reg.CSR, 4) & CSR_COUNTFLAG


def test_disabled_counter_holds_its_value(rig):
    tick, advance, pended, _ = rig
    start(tick, 99)
    advance(30)
    tick.write(Reg.CSR, 4, CSR_CLKSOURCE)
    held = tick.read(Reg.CVR, 4)
    advance(500)
    assert tick.read(Reg.CVR, 4) == held
    assert pended == []


def test_reference_clock_source_runs_at_its_own_rate(rig):
    tick, advance, pended, _ = rig
    start(tick, 99, CSR_ENABLE | CSR_TICKINT)  # CLKSOURCE=0: the 24 MHz reference
    advance(400)
    assert pended == [200, 400]


def test_zero_reload_stops_the_counter_after_it_reaches_zero(rig):
    tick, advance, pended, _ = rig
    tick.write(Reg.RVR, 4, 3)
    tick.write(Reg.CSR, 4, CSR_ENABLE | CSR_TICKINT | CSR_CLKSOURCE)
    advance(4)
    tick.write(Reg.RVR, 4, 0)
    advance(100)
    assert len(pended) == 1


def test_reload_is_24_bits(rig):
    tick, _, _, _ = rig
    tick.write(Reg.RVR, 4, 0xFFFFFFFF)
    assert tick.read(Reg.RVR, 4) == 0xFFFFFF


def test_calib_reports_ten_ms_of_the_reference_clock(rig):
    tick, _, _, _ = rig
    assert tick.read(Reg.CALIB, 4) == HZ // 2 // 100 - 1


def test_calib_says_noref_without_a_reference_clock():
    src = Counter()
    tick = SysTick("systick", 0xE000E010, Clock(src, HZ), lambda: None, reference_clock_hz=None)
    assert tick.read(Reg.CALIB, 4) & CALIB_NOREF
    assert tick.read(Reg.CSR, 4) & CSR_CLKSOURCE  # no reference: CLKSOURCE reads as one


def test_non_word_access_is_refused(rig):
    tick, _, _, _ = rig
    tick.write(Reg.RVR, 4, 1000)
    assert tick.read(Reg.RVR, 1) == 0
