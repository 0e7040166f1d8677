"""ARMv6-M System Control Block: the register front end of the system exceptions.

Interface
  MMIO window  0xE000ED00-0xE000ED3F (ARMv6-M ARM B3.2): CPUID, ICSR, VTOR (optional),
               AIRCR, SCR, CCR, SHPR2, SHPR3. VTOR resets to ``vtor_reset``: the
               machine passes the flash base, where it read the reset vector.
  Given        the exception controller (the NVIC, duck-typed: set_pending,
               clear_pending, set_system_priority, priority, active, vect_pending),
               and ``on_reset_request`` for AIRCR.SYSRESETREQ.
  Not modelled SHCSR (debug access only on ARMv6-M); SCR.SLEEPDEEP has no effect
               (no low-power model); SEVONPEND is stored, not acted on.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum
from typing import Any

from pkasim.peripherals.base import Peripheral, guest_log

NMI, SVCALL, PENDSV, SYSTICK = 2, 11, 14, 15


class Reg(IntEnum):
    CPUID = 0x00
    ICSR = 0x04
    VTOR = 0x08
    AIRCR = 0x0C
    SCR = 0x10
    CCR = 0x14
    SHPR2 = 0x1C
    SHPR3 = 0x20


ICSR_NMIPENDSET = 1 << 31
ICSR_PENDSVSET = 1 << 28
ICSR_PENDSVCLR = 1 << 27
ICSR_PENDSTSET = 1 << 26
ICSR_PENDSTCLR = 1 << 25
ICSR_ISRPENDING = 1 << 22
AIRCR_VECTKEY = 0x05FA
AIRCR_SYSRESETREQ = 1 << 2
CCR_RESET = (1 << 9) | (1 << 3)  # STKALIGN and UNALIGN_TRP read as one on ARMv6-M
SCR_SLEEPONEXIT = 1 << 1
SCR_MASK = 0x16


class Scb(Peripheral):
    size = 0x40

    def __init__(self, name: str, base: int, exceptions: Any, *, cpuid: int = 0x410CC200,
                 has_vtor: bool = False, vtor_reset: int = 0,
                 active_exception: Callable[[], int] = lambda: 0) -> None:
        super().__init__(name, base)
        self.exceptions = exceptions
        self.cpuid = cpuid
        self.has_vtor = has_vtor
        self.vtor_reset = vtor_reset & 0xFFFFFF80  # where the reset vector was read (the flash base)
        self.active_exception = active_exception
        self.on_reset_request: Callable[[], None] = lambda: None
        self.on_change: Callable[[], None] = lambda: None  # VTOR or SCR changed (the core caches both)
        self.reset()

    def reset(self) -> None:
        self.vtor = self.vtor_reset
        self.scr = 0
        self.on_change()

    @property
    def sleep_on_exit(self) -> bool:
        return bool(self.scr & SCR_SLEEPONEXIT)

    def read(self, offset: int, size: int) -> int:
        if not self.word_only(offset, size):
            return 0
        exc = self.exceptions
        if offset == Reg.CPUID:
            return self.cpuid
        if offset == Reg.ICSR:
            value = self.active_exception() & 0x1FF
            value |= (exc.vect_pending() & 0x1FF) << 12
            if any(e >= 16 for e in exc.pending):
                value |= ICSR_ISRPENDING
            if PENDSV in exc.pending:
                value |= ICSR_PENDSVSET
            if SYSTICK in exc.pending:
                value |= ICSR_PENDSTSET
            if NMI in exc.pending or NMI in exc.active:
                value |= ICSR_NMIPENDSET if NMI in exc.pending else 0
            return value
        if offset == Reg.VTOR:
            return self.vtor if self.has_vtor else 0
        if offset == Reg.AIRCR:
            return 0xFA050000  # VECTKEYSTAT, little-endian
        if offset == Reg.SCR:
            return self.scr
        if offset == Reg.CCR:
            return CCR_RESET
        if offset == Reg.SHPR2:
            return exc.priority(SVCALL) << 24
        if offset == Reg.SHPR3:
            return exc.priority(SYSTICK) << 24 | exc.priority(PENDSV) << 16
        return super().read(offset, size)

    def write(self, offset: int, size: int, value: int) -> None:
        if not self.word_only(offset, size):
            return
        exc = self.exceptions
        if offset == Reg.ICSR:
            if value & ICSR_NMIPENDSET:
                exc.set_pending(NMI)
            if value & ICSR_PENDSVCLR:
                exc.clear_pending(PENDSV)
            elif value & ICSR_PENDSVSET:
                exc.set_pending(PENDSV)
            if value & ICSR_PENDSTCLR:
                exc.clear_pending(SYSTICK)
            elif value & ICSR_PENDSTSET:
                exc.set_pending(SYSTICK)
        elif offset == Reg.VTOR:
            if self.has_vtor:
                self.vtor = value & 0xFFFFFF80
                self.on_change()
            else:
                guest_log.warning("%s: VTOR written but this core has none (config core.vtor)", self.name)
        elif offset == Reg.AIRCR:
            if value >> 16 != AIRCR_VECTKEY:
                guest_log.warning("%s: AIRCR write without VECTKEY 0x05FA ignored", self.name)
            elif value & AIRCR_SYSRESETREQ:
                self.on_reset_request()
        elif offset == Reg.SCR:
            self.scr = value & SCR_MASK
            self.on_change()
        elif offset == Reg.CCR:
            pass  # read-only on ARMv6-M
        elif offset == Reg.SHPR2:
            exc.set_system_priority(SVCALL, value >> 24)
        elif offset == Reg.SHPR3:
            exc.set_system_priority(PENDSV, value >> 16)
            exc.set_system_priority(SYSTICK, value >> 24)
        else:
            super().write(offset, size, value)

    def snapshot(self) -> dict[str, int]:
        return {"ICSR": self.read(Reg.ICSR, 4), "VTOR": self.vtor, "SCR": self.scr}
