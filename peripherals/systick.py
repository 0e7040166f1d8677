"""ARMv6-M SysTick: a 24-bit down-counter with reload, computed from the cycle count.

Interface
  MMIO window  0xE000E010-0xE000E01F (ARMv6-M ARM B3.3): CSR, RVR, CVR, CALIB.
  Clock input  the core clock (CLKSOURCE=1) or the reference clock
               (``reference_clock_hz``; absent means CALIB.NOREF=1, CLKSOURCE reads 1).
  IRQ output   the SysTick exception (15), pulsed on each 1 -> 0 step when TICKINT=1.
  Not modelled nothing of the architecture; the register value is read at the start
               of the basic block that reads it (see docs/cycle-model.md).

The counter is never ticked: it is anchored (value v0 at cycle c0) and its value at
any cycle is computed; the next 1 -> 0 step is one scheduled event. The state lives in
one record (SysTickState) that the native fast path shares (systick_fast.c): with the
fast paths on, the step is scheduled there and fires inside the engine, as
``_reach_zero`` does here, and the word writes of CSR, RVR and CVR are served there
as ``write`` does here; reads and everything else are served here.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from enum import IntEnum

from pkasim.base.clock import Clock, Event
from pkasim.base.errors import UsageError
from pkasim.base.kinds import Kind
from pkasim.peripherals.base import Peripheral, SharedWindow, guest_log


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
NO_EVENT = (1 << 64) - 1


class SysTickState(ctypes.Structure):
    """SysTick's state as one record the native fast path shares (pk_systick in systick_fast.c)."""

    _fields_ = [
        ("core", ctypes.c_void_p),
        ("next", ctypes.c_uint64),  # the next 1 -> 0 step when scheduled natively, else NO_EVENT
        ("anchor", ctypes.c_uint64),  # the counter held ``value`` at this cycle
        ("wraps", ctypes.c_uint64),
        ("hz", ctypes.c_uint64),
        ("ref_hz", ctypes.c_uint64),
        ("value", ctypes.c_uint32),
        ("rvr", ctypes.c_uint32),
        ("csr", ctypes.c_uint32),
        ("countflag", ctypes.c_uint32),
        ("irq_exc", ctypes.c_uint32),
        ("fast_on", ctypes.c_uint32),
        ("py_access", ctypes.c_void_p),  # the fast path hands what it does not serve to ``read``/``write``
        ("base", ctypes.c_uint32),
        ("pad", ctypes.c_uint32),
    ]


def _field(name: str) -> property:
    return property(lambda self: getattr(self.state, name), lambda self, v: setattr(self.state, name, int(v)))


class SysTick(Peripheral):
    size = 0x10

    csr = _field("csr")
    rvr = _field("rvr")
    wraps = _field("wraps")
    _value = _field("value")  # CVR at the anchor
    _anchor = _field("anchor")
    countflag = property(lambda self: bool(self.state.countflag),
                         lambda self, v: setattr(self.state, "countflag", int(bool(v))))

    def __init__(self, name: str, base: int, clock: Clock, irq: Callable[[], None],
                 reference_clock_hz: int | None = None) -> None:
        super().__init__(name, base)
        self.clock = clock
        self.irq = irq
        self.ref_hz = reference_clock_hz
        self.state = SysTickState(hz=clock.hz, ref_hz=reference_clock_hz or 0, next=NO_EVENT)
        self._event: Event | None = None
        self._lib: ctypes.CDLL | None = None  # the fast path, once a machine attaches it
        self.reset()

    # The C functions (systick_fast.c) that give this device's next step and fire it:
    # the machine lists them in the core's table of native devices (pkstate.h pk_device).
    NATIVE_NEXT = "pk_systick_next"
    NATIVE_DUE = "pk_systick_fire"

    def attach_events(self, lib: ctypes.CDLL, core: int, irq_exc: int) -> int:
        """Let the fast path (systick_fast.c, in ``lib``) fire this SysTick's steps in
        the machine whose native state is at address ``core``, pending exception
        ``irq_exc``. Returns the address of the shared record."""
        if lib.pk_sizeof_systick() != ctypes.sizeof(SysTickState):
            raise UsageError("the native SysTick does not match systick.py: rebuild with 'pip install -e .'")
        st = self.state
        st.core = core
        st.irq_exc = irq_exc
        st.fast_on = 1
        self._lib = lib
        self._reschedule()
        return ctypes.addressof(st)

    def shared_window(self, lib: ctypes.CDLL, core: int, slow_path: int) -> SharedWindow:
        """Let the fast path (systick_fast.c, in ``lib``) serve this window's register
        writes in the machine whose native state is at address ``core``, in the page it
        shares with the NVIC (sharedpage.c); ``slow_path`` is the C-callable function
        through which it hands the rest back to ``read``/``write``."""
        if lib.pk_sizeof_systick() != ctypes.sizeof(SysTickState):
            raise UsageError("the native SysTick does not match systick.py: rebuild with 'pip install -e .'")
        st = self.state
        st.core = core
        st.base = self.base
        st.py_access = slow_path
        return SharedWindow(lib.pk_systick_read, lib.pk_systick_write, ctypes.addressof(st))

    def fast_paths_changed(self) -> None:
        """The fast paths were switched: move the pending step to the scheduler now in force."""
        self._reschedule()

    def reset(self) -> None:
        if self._event is not None:
            self._event.cancel()
        self._event = None
        self.state.next = NO_EVENT
        self.wraps = 0
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
        self.state.next = NO_EVENT
        if not self.enabled:
            return
        n = self._zero_ticks()
        if n is None:
            return
        at = self._cycle_of_tick(n)
        if self.state.fast_on and self._lib is not None:
            self.state.next = at  # systick_fast.c fires it (pk_native_due)
            self._lib.pk_native_changed(self.state.core)
        else:
            self._event = self.clock.schedule(at, self._reach_zero, "systick")

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
