"""SysTick's register writes in C (systick_fast.c pk_systick_write) do what
systick.py's ``write`` does (ARMv6-M ARM B3.3): two SysTicks get the same writes at the
same cycles, one through the native path and one through the model, and their records
agree after every step; what the native path does not serve it hands to the model."""

from __future__ import annotations

import ctypes

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pkasim import native
from pkasim.base.clock import Clock
from pkasim.peripherals.nvic import NvicState
from pkasim.peripherals.systick import CSR_CLKSOURCE, CSR_ENABLE, CSR_TICKINT, MAX24, Reg, SysTick

HZ = 48_000_000
FIELDS = ("next", "anchor", "wraps", "value", "rvr", "csr", "countflag")


class Twin:
    """A SysTick on its own native core record, served through ``write`` (the model) or
    through ``pk_systick_write`` (native); its steps fire natively in both."""

    def __init__(self, lib: ctypes.CDLL, ref_hz: int | None) -> None:
        self.lib = lib
        self.core = native.PkState()
        self.nvic = NvicState(irqs=32)  # where a wrap with TICKINT pends SysTick
        self.core.nvic = ctypes.addressof(self.nvic)
        self.clock = Clock(self, HZ)
        self.tick = SysTick("systick", 0xE000E010, self.clock, lambda: None, reference_clock_hz=ref_hz)
        self.handed: list[tuple[int, int, int, int]] = []

        def slow_path(offset: int, size: int, value: int, write: int, time_offset: int) -> int:
            self.handed.append((offset, size, value, write))
            if write:
                self.tick.write(offset, size, value)
                return 0
            return self.tick.read(offset, size)

        self._slow = native.DEVICE_ACCESS(slow_path)
        self.record = self.tick.shared_window(lib, ctypes.addressof(self.core),
                                              ctypes.cast(self._slow, ctypes.c_void_p).value).state
        self.tick.attach_events(lib, ctypes.addressof(self.core), 15)

    @property
    def cycles(self) -> int:
        return int(self.core.cycles)

    def advance(self, n: int) -> None:
        target = self.cycles + n
        while self.tick.state.next <= target:
            self.core.cycles = self.tick.state.next
            self.lib.pk_systick_fire(ctypes.c_void_p(self.record))
        self.core.cycles = target

    def write(self, offset: int, value: int, size: int = 4, through_native: bool = True) -> None:
        if through_native:
            self.lib.pk_systick_write(None, offset, size, value, ctypes.c_void_p(self.record))
        else:
            self.tick.write(offset, size, value)

    def fields(self) -> tuple[int, ...]:
        return tuple(getattr(self.tick.state, f) for f in FIELDS)


@pytest.fixture(scope="module")
def lib() -> ctypes.CDLL:
    return native.load()


writes = st.lists(st.tuples(st.integers(0, 5000),  # cycles before the write
                            st.sampled_from([Reg.CSR, Reg.RVR, Reg.CVR]),
                            st.one_of(st.integers(0, 7), st.integers(0, MAX24), st.sampled_from([1, 2, 0x1000000]))),
                  min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(writes=writes, ref=st.sampled_from([None, HZ // 8, 1_000_000]))
def test_native_writes_leave_the_record_the_model_leaves(lib, writes, ref):
    native_side, model_side = Twin(lib, ref), Twin(lib, ref)
    for delay, reg, value in writes:
        native_side.advance(delay)
        model_side.advance(delay)
        native_side.write(reg, value)
        model_side.write(reg, value, through_native=False)
        assert native_side.fields() == model_side.fields()
        assert native_side.tick.current() == model_side.tick.current()


def test_a_started_counter_wraps_where_the_model_says(lib):
    twin = Twin(lib, None)
    twin.write(Reg.RVR, 999)
    twin.write(Reg.CVR, 0)
    twin.write(Reg.CSR, CSR_ENABLE | CSR_TICKINT | CSR_CLKSOURCE)
    assert twin.tick.state.next == 1000 and not twin.handed
    twin.advance(10_500)
    assert twin.tick.wraps == 10 and twin.tick.current() == 500  # 500 ticks after the 10th wrap


def test_what_the_native_path_does_not_serve_goes_to_the_model(lib):
    twin = Twin(lib, None)
    twin.write(Reg.RVR, 0x1000000)  # bits above 23: the model's warning
    twin.write(Reg.CALIB, 5)  # read-only: the model's warning
    twin.write(Reg.CSR, 1, size=2)  # not a word
    assert [(o, w) for o, _, _, w in twin.handed] == [(Reg.RVR, 1), (Reg.CALIB, 1), (Reg.CSR, 1)]
    assert twin.tick.rvr == 0


def test_with_the_fast_paths_off_every_write_goes_to_the_model(lib):
    twin = Twin(lib, None)
    twin.tick.state.fast_on = 0
    twin.write(Reg.RVR, 99)
    assert twin.handed == [(Reg.RVR, 4, 99, 1)] and twin.tick.rvr == 99
