"""ARMv6-M SysTick: a 24-bit down-counter with reload, computed from the cycle count.

Interface
  MMIO window  0xE000E010-0xE000E01F (ARMv6-M ARM B3.3): CSR, RVR, CVR, CALIB.
  Clock input  the core clock (CLKSOURCE=1) or the reference clock
               (``reference_clock_hz``; absent means CALIB.NOREF=1, CLKSOURCE reads 1).
  IRQ output   the SysTick exception (15), pulsed on each 1 -> 0 step when TICKINT=1.
  Not modelled nothing of the architecture; the register value is read at the start
               of the basic block that reads it (see docs/cycle-model.md).

The counter is never ticked: it is anchored (value v0 at cycle c0) and its value at
any cycle is computed; the next 1 -> 0 step is one scheduled event.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum

from emulator.clock import Clock, Event
from emulator.observe import Kind

from .base import Peripheral, guest_log


class Reg(IntEnum):
    CSR = 0x0
    RVR = 0x4
    CVR = 0x8
    CALIB = 0xC


CSR_ENABLE = 1 << 0
CSR_TICKINT = 1 << 1
CSR_CLKSOURCE = 1 << 2
CSR_COUNTFLAG = 1 << 16
CALIB_NOREF = 1 << 31
CALIB_SKEW = 1 << 30
MAX24 = 0xFFFFFF


class SysTick(Peripheral):
    size = 0x10

    def __init__(self, name: str, base: int, clock: Clock, irq: Callable[[], None],
                 reference_clock_hz: int | None = None) -> None:
        super().__init__(name, base)
        self.clock = clock
        self.irq = irq
        self.ref_hz = reference_clock_hz
        self._event: Event | None = None
        self.wraps = 0
        self.reset()

    def reset(self) -> None:
        if self._event is not None:
            self._event.cancel()
        self._event = None
        self.csr = 0 if self.ref_hz else CSR_CLKSOURCE
        self.rvr = 0  # UNKNOWN at reset; 0 is what QEMU and most parts show
        self._value = 0  # CVR at the anchor
        self._anchor = self.clock.now
        self.countflag = False

    # ------------------------------------------------------------- time arithmetic
    def _source_core(self) -> bool:
        return bool(self.csr & CSR_CLKSOURCE) or not self.ref_hz

    def _ticks_between(self, start: int, end: int) -> int:
        """SysTick clock edges in core cycles (start, end]."""
        if self._source_core():
            return end - start
        hz = self.clock.hz
        return (end - start) * self.ref_hz // hz

    def _cycle_of_tick(self, n: int) -> int:
        """The core cycle at which the n-th tick after the anchor happens."""
        if self._source_core():
            return self._anchor + n
        hz = self.clock.hz
        return self._anchor + -(-n * hz // self.ref_hz)

    def _value_after(self, n: int) -> int:
        v0, period = self._value, self.rvr + 1
        if n <= v0:
            return v0 - n
        if self.rvr == 0:
            return 0
        return self.rvr - (n - v0 - 1) % period

    def _zero_ticks(self) -> int | None:
        """Ticks from the anchor to the next 1 -> 0 step (None if it never comes)."""
        if self._value > 0:
            return self._value
        return self.rvr + 1 if self.rvr else None

    @property
    def enabled(self) -> bool:
        return bool(self.csr & CSR_ENABLE)

    def current(self) -> int:
        if not self.enabled:
            return self._value
        return self._value_after(self._ticks_between(self._anchor, self.clock.now))

    def _reanchor(self) -> None:
        """Freeze the value now and restart the arithmetic from here."""
        self._value = self.current()
        self._anchor = self.clock.now
        self._reschedule()

    def _reschedule(self) -> None:
        if self._event is not None:
            self._event.cancel()
            self._event = None
        if not self.enabled:
            return
        n = self._zero_ticks()
        if n is not None:
            self._event = self.clock.schedule(self._cycle_of_tick(n), self._reach_zero, "systick")

    def _reach_zero(self) -> None:
        self._event = None
        self.wraps += 1
        self.countflag = True
        # Re-anchor exactly at the zero step, whatever block boundary we fire at.
        n = self._zero_ticks() or 0
        self._anchor = self._cycle_of_tick(n)
        self._value = 0
        self._observe(Kind.SYSTICK_WRAP, b=self._anchor)
        if self.csr & CSR_TICKINT:
            self.irq()
        self._reschedule()

    # ------------------------------------------------------------- registers
    def read(self, offset: int, size: int) -> int:
        if not self.word_only(offset, size):
            return 0
        if offset == Reg.CSR:
            value = self.csr | (CSR_COUNTFLAG if self.countflag else 0)
            self.countflag = False  # COUNTFLAG clears on read (B3.3.3)
            return value
        if offset == Reg.RVR:
            return self.rvr
        if offset == Reg.CVR:
            return self.current()
        if offset == Reg.CALIB:
            if not self.ref_hz:
                return CALIB_NOREF
            tenms = self.ref_hz // 100
            skew = 0 if self.ref_hz % 100 == 0 else CALIB_SKEW
            return skew | ((tenms - 1) & MAX24)
        return super().read(offset, size)

    def write(self, offset: int, size: int, value: int) -> None:
        if not self.word_only(offset, size):
            return
        if offset == Reg.CSR:
            self._value = self.current()
            self._anchor = self.clock.now
            mask = CSR_ENABLE | CSR_TICKINT | CSR_CLKSOURCE
            self.csr = value & mask
            if not self.ref_hz:
                self.csr |= CSR_CLKSOURCE  # no reference clock: CLKSOURCE is RAO
            self._reschedule()
        elif offset == Reg.RVR:
            if value > MAX24:
                guest_log.warning("%s: RVR value 0x%x has bits above 23 (ignored)", self.name, value)
            self._value = self.current()
            self._anchor = self.clock.now
            self.rvr = value & MAX24
            self._reschedule()
        elif offset == Reg.CVR:
            # Any write clears CVR and COUNTFLAG, and does not pend the exception.
            self._value = 0
            self._anchor = self.clock.now
            self.countflag = False
            self._reschedule()
        elif offset == Reg.CALIB:
            guest_log.warning("%s: CALIB is read-only", self.name)
        else:
            super().write(offset, size, value)

    def snapshot(self) -> dict[str, int]:
        return {"CSR": self.csr, "RVR": self.rvr, "CVR": self.current(), "wraps": self.wraps}
