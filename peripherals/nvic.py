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
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum

from .base import Peripheral, guest_log

NMI, HARDFAULT, SVCALL, PENDSV, SYSTICK = 2, 3, 11, 14, 15
FIRST_IRQ = 16
PRIORITY_BITS = 2  # ARMv6-M implements exactly 2 priority bits (bits 7:6)
PRIORITY_MASK = 0xC0
THREAD_PRIORITY = 0x100  # execution priority with nothing active: below every exception

NAMES = {1: "Reset", NMI: "NMI", HARDFAULT: "HardFault", SVCALL: "SVCall", PENDSV: "PendSV", SYSTICK: "SysTick"}


class Reg(IntEnum):
    ISER = 0x000
    ICER = 0x080
    ISPR = 0x100
    ICPR = 0x180
    IPR0 = 0x300
    IPR7 = 0x31C


def exception_name(exc: int) -> str:
    return NAMES.get(exc, f"IRQ{exc - FIRST_IRQ}" if exc >= FIRST_IRQ else f"exception {exc}")


class Nvic(Peripheral):
    size = 0x400

    def __init__(self, name: str, base: int, irqs: int = 32) -> None:
        super().__init__(name, base)
        self.irqs = irqs
        self.on_change: Callable[[], None] = lambda: None
        self.reset()

    def reset(self) -> None:
        self.enabled = 0  # bit n: IRQn enabled
        self.pending: set[int] = set()
        self.active: set[int] = set()
        self.irq_priority = [0] * self.irqs
        self.system_priority = {SVCALL: 0, PENDSV: 0, SYSTICK: 0}

    # ---------------------------------------------------------------- exception state
    def priority(self, exc: int) -> int:
        if exc == NMI:
            return -2
        if exc == HARDFAULT:
            return -1
        if exc >= FIRST_IRQ:
            return self.irq_priority[exc - FIRST_IRQ]
        return self.system_priority.get(exc, 0)

    def set_system_priority(self, exc: int, value: int) -> None:
        self.system_priority[exc] = value & PRIORITY_MASK
        self.on_change()

    def set_pending(self, exc: int) -> None:
        if exc >= FIRST_IRQ + self.irqs:
            return
        if exc not in self.pending:
            self.pending.add(exc)
            self.on_change()

    def clear_pending(self, exc: int) -> None:
        self.pending.discard(exc)

    def irq_line(self, irq: int) -> Callable[[], None]:
        return lambda: self.set_pending(FIRST_IRQ + irq)

    def _enabled(self, exc: int) -> bool:
        return exc < FIRST_IRQ or bool(self.enabled >> (exc - FIRST_IRQ) & 1)

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
        self.pending.discard(exc)
        self.active.add(exc)

    def deactivate(self, exc: int) -> None:
        self.active.discard(exc)
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
            return sum(self.irq_priority[n + i] << (8 * i) for i in range(4) if n + i < self.irqs)
        return super().read(offset, size)

    def write(self, offset: int, size: int, value: int) -> None:
        if not self.word_only(offset, size):
            return
        value &= (1 << self.irqs) - 1 if offset < Reg.IPR0 else 0xFFFFFFFF
        if offset == Reg.ISER:
            self.enabled |= value
            self.on_change()
        elif offset == Reg.ICER:
            self.enabled &= ~value
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
                    self.irq_priority[n + i] = (value >> (8 * i)) & PRIORITY_MASK
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
