"""ARMv6-M NVIC: owns the state of every exception, and the NVIC register window.

Interface
  MMIO window  0xE000E100-0xE000E4FF (ARMv6-M ARM B3.4): ISER, ICER, ISPR, ICPR, IPR0-7.
  Inputs       IRQ lines (pend an interrupt), the SCB front end (system exceptions).
  Output       ``on_change()``: the pending/enabled state changed, so the core must
               look again at what to take (the machine stops at the next block).
  Not modelled IABR does not exist on ARMv6-M; level-sensitive re-pending of a still
               asserted line (devices here pulse).

Exception numbers follow the architecture: 2 NMI, 3 HardFault, 11 SVCall, 14 PendSV,
15 SysTick, 16+n IRQn. The core asks ``next_to_take()`` at each boundary; the NVIC
alone decides by priority (lower value wins, then lower number).

The state lives in one flat ``NvicState`` record (bit masks and a priority per
exception number) so that the core's native fast path (emulator/native/excmodel.c) can read
and pend exceptions without a Python call; that C code mirrors the decisions below
line for line, and tests/test_native_core.py checks that the two agree.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from enum import IntEnum

from pkasim.base.kinds import Kind
from pkasim.peripherals.base import Peripheral, guest_log

NMI, HARDFAULT, SVCALL, PENDSV, SYSTICK = 2, 3, 11, 14, 15
FIRST_IRQ = 16
PRIORITY_BITS = 2  # ARMv6-M implements exactly 2 priority bits (bits 7:6)
PRIORITY_MASK = 0xC0
THREAD_PRIORITY = 0x100  # execution priority with nothing active: below every exception
MAX_EXCEPTIONS = 64  # exception numbers 0..63: 16 system + at most 32 IRQs on ARMv6-M

NAMES = {1: "Reset", NMI: "NMI", HARDFAULT: "HardFault", SVCALL: "SVCall", PENDSV: "PendSV", SYSTICK: "SysTick"}


class Reg(IntEnum):
    ISER = 0x000
    ICER = 0x080
    ISPR = 0x100
    ICPR = 0x180
    IPR0 = 0x300
    IPR7 = 0x31C


class NvicState(ctypes.Structure):
    """The exception state, as the native fast path reads it (pk_nvic in pkstate.h)."""

    _fields_ = [
        ("pending", ctypes.c_uint64),  # bit e: exception number e is pending
        ("active", ctypes.c_uint64),  # bit e: exception number e is active
        ("enabled", ctypes.c_uint32),  # bit n: IRQn enabled
        ("irqs", ctypes.c_uint32),
        ("prio", ctypes.c_int32 * MAX_EXCEPTIONS),  # by exception number
    ]


def _bits(mask: int) -> frozenset[int]:
    """The exception numbers whose bits are set (few: walk the set bits only)."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return frozenset(out)


def exception_name(exc: int) -> str:
    return NAMES.get(exc, f"IRQ{exc - FIRST_IRQ}" if exc >= FIRST_IRQ else f"exception {exc}")


class Nvic(Peripheral):
    size = 0x400

    def __init__(self, name: str, base: int, irqs: int = 32) -> None:
        super().__init__(name, base)
        self.irqs = irqs
        self.state = NvicState()
        self.on_change: Callable[[], None] = lambda: None
        self.reset()

    def reset(self) -> None:
        ctypes.memset(ctypes.byref(self.state), 0, ctypes.sizeof(self.state))
        self.state.irqs = self.irqs
        self.state.prio[NMI] = -2
        self.state.prio[HARDFAULT] = -1

    # ---------------------------------------------------------------- exception state
    @property
    def enabled(self) -> int:
        """Bit n: IRQn enabled."""
        return self.state.enabled

    @enabled.setter
    def enabled(self, value: int) -> None:
        self.state.enabled = value & ((1 << self.irqs) - 1)

    @property
    def pending(self) -> frozenset[int]:
        return _bits(self.state.pending)

    @property
    def active(self) -> frozenset[int]:
        return _bits(self.state.active)

    def priority(self, exc: int) -> int:
        return self.state.prio[exc]

    def set_system_priority(self, exc: int, value: int) -> None:
        self.state.prio[exc] = value & PRIORITY_MASK
        self.on_change()

    def set_pending(self, exc: int) -> None:
        if exc >= FIRST_IRQ + self.irqs:
            return
        if not self.state.pending >> exc & 1:
            self.state.pending |= 1 << exc
            self._observe(Kind.IRQ_PEND, exc)
            self.on_change()

    def clear_pending(self, exc: int) -> None:
        if self.state.pending >> exc & 1:
            self.state.pending &= ~(1 << exc)
            self._observe(Kind.IRQ_CLEAR, exc)

    def irq_line(self, irq: int) -> Callable[[], None]:
        return lambda: self.set_pending(FIRST_IRQ + irq)

    def _enabled(self, exc: int) -> bool:
        return exc < FIRST_IRQ or bool(self.state.enabled >> (exc - FIRST_IRQ) & 1)

    def execution_priority(self, primask: bool) -> int:
        """The running priority: the most urgent active exception, or PRIMASK's 0."""
        prio = min((self.priority(e) for e in self.active), default=THREAD_PRIORITY)
        if primask:
            prio = min(prio, 0)
        return prio

    def _best_pending(self) -> int | None:
        ready = [e for e in self.pending if self._enabled(e)]
        return min(ready, key=lambda e: (self.priority(e), e)) if ready else None

    def next_to_take(self, primask: bool) -> int | None:
        """The exception the core takes now, if any (ARMv6-M B1.5.4 preemption)."""
        best = self._best_pending()
        if best is None:
            return None
        return best if self.priority(best) < self.execution_priority(primask) else None

    def would_wake(self) -> bool:
        """WFI wakes on a pending exception that PRIMASK alone holds back (B1.5.17)."""
        best = self._best_pending()
        return best is not None and self.priority(best) < self.execution_priority(False)

    def vect_pending(self) -> int:
        best = self._best_pending()
        return best or 0

    def activate(self, exc: int) -> None:
        self.state.pending &= ~(1 << exc)
        self.state.active |= 1 << exc

    def deactivate(self, exc: int) -> None:
        self.state.active &= ~(1 << exc)
        self.on_change()

    # ---------------------------------------------------------------- registers
    def read(self, offset: int, size: int) -> int:
        if not self.word_only(offset, size):
            return 0
        mask = (1 << self.irqs) - 1
        if offset in (Reg.ISER, Reg.ICER):
            return self.enabled & mask
        if offset in (Reg.ISPR, Reg.ICPR):
            return sum(1 << (e - FIRST_IRQ) for e in self.pending if e >= FIRST_IRQ)
        if Reg.IPR0 <= offset <= Reg.IPR7:
            n = (offset - Reg.IPR0)
            return sum(self.priority(FIRST_IRQ + n + i) << (8 * i) for i in range(4) if n + i < self.irqs)
        return super().read(offset, size)

    def write(self, offset: int, size: int, value: int) -> None:
        if not self.word_only(offset, size):
            return
        value &= (1 << self.irqs) - 1 if offset < Reg.IPR0 else 0xFFFFFFFF
        if offset == Reg.ISER:
            self.state.enabled |= value
            self.on_change()
        elif offset == Reg.ICER:
            self.state.enabled &= ~value
        elif offset == Reg.ISPR:
            for n in range(self.irqs):
                if value >> n & 1:
                    self.set_pending(FIRST_IRQ + n)
        elif offset == Reg.ICPR:
            for n in range(self.irqs):
                if value >> n & 1:
                    self.clear_pending(FIRST_IRQ + n)
        elif Reg.IPR0 <= offset <= Reg.IPR7:
            n = offset - Reg.IPR0
            for i in range(4):
                if n + i < self.irqs:
                    self.state.prio[FIRST_IRQ + n + i] = (value >> (8 * i)) & PRIORITY_MASK
            self.on_change()
        elif offset < Reg.IPR0:
            guest_log.warning("%s: write to reserved offset 0x%03x", self.name, offset)
        else:
            super().write(offset, size, value)

    def snapshot(self) -> dict[str, int]:
        return {
            "ISER": self.enabled,
            "ISPR": self.read(Reg.ISPR, 4),
            "active": sum(1 << e for e in self.active),
        }
