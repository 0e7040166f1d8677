"""The ARMv6-M exception model Unicorn lacks: entry, return, HardFault and lockup.

The NVIC owns each exception's state (priority, enabled, pending, active) and says
what to take; this module does what the core does with that answer (ARMv6-M ARM
B1.5.6 entry, B1.5.8 return), and turns guest errors into HardFault, or lockup when
HardFault itself cannot be taken.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from unicorn import arm_const as A

from pkasim import native
from pkasim.base.errors import UsageError
from pkasim.base.kinds import Kind
from pkasim.chip.config import ChipConfig
from pkasim.core.bus import Bus
from pkasim.core.cpu import Core
from pkasim.peripherals.nvic import HARDFAULT, NMI, Nvic, exception_name
from pkasim.peripherals.scb import Scb

guest_log = logging.getLogger("pkasim.guest")

EXC_RETURN_HANDLER = 0xFFFFFFF1
EXC_RETURN_THREAD_MSP = 0xFFFFFFF9
EXC_RETURN_THREAD_PSP = 0xFFFFFFFD
EXC_RETURNS = (EXC_RETURN_HANDLER, EXC_RETURN_THREAD_MSP, EXC_RETURN_THREAD_PSP)
FRAME_REGS = (A.UC_ARM_REG_R0, A.UC_ARM_REG_R1, A.UC_ARM_REG_R2, A.UC_ARM_REG_R3, A.UC_ARM_REG_R12, A.UC_ARM_REG_LR)


@dataclass
class Fault:
    """A fault as the core saw it, with enough context to find the cause."""

    cause: str
    pc: int
    where: str  # symbol+offset
    instruction: str
    address: int | None = None
    registers: dict[str, int] = field(default_factory=dict)
    exception: str = "Thread"
    recent_blocks: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "cause": self.cause,
            "pc": self.pc,
            "symbol": self.where,
            "instruction": self.instruction,
            "address": self.address,
            "mode": self.exception,
            "registers": self.registers,
            "recent_blocks": self.recent_blocks,
        }


class Lockup(Exception):
    """A fault where the core cannot take HardFault: the run ends."""

    def __init__(self, fault: Fault, original: Fault | None) -> None:
        super().__init__(fault.cause)
        self.fault = fault
        self.original = original


class ExceptionModel:
    """Takes and returns from exceptions on ``core``, stacking through ``bus``."""

    def __init__(self, core: Core, bus: Bus, nvic: Nvic, scb: Scb, config: ChipConfig,
                 describe: Callable[[int], str]) -> None:
        self.core = core
        self.bus = bus
        self.nvic = nvic
        self.scb = scb
        self.config = config
        self.describe = describe
        self.taken: dict[str, int] = {}
        self.last_fault: Fault | None = None

    def take_pending(self) -> bool:
        """Take the exception the NVIC says is due now, if any."""
        exc = self.nvic.next_to_take(self.core.primask())
        if exc is None:
            return False
        self.core.sleeping = False
        self.take(exc, self.core.pc)
        return True

    def vector_table(self) -> int:
        """Where the core fetches exception vectors: VTOR when the core has one (it
        resets to the flash base), else the flash base, where the reset vector is."""
        return self.scb.vtor if self.scb.has_vtor else self.config.flash.base

    def vector(self, exc: int) -> tuple[int, int | None]:
        """The vector's address, and its value (None: the fetch is a bus error)."""
        addr = (self.vector_table() + 4 * exc) & 0xFFFFFFFF
        region = self.config.region_at(addr)
        if region is None or not region.contains(addr, 4):
            return addr, None
        return addr, int.from_bytes(self.core.uc.mem_read(addr, 4), "little")

    def take(self, exc: int, return_pc: int) -> None:
        """Exception entry (ARMv6-M B1.5.6): stack the frame, switch mode, jump."""
        core = self.core
        vector_addr, vector = self.vector(exc)
        if vector is None:
            # The vector fetch is a bus error: HardFault, or lockup when the core is
            # entering HardFault or NMI (ARMv6-M B1.5.15, B1.5.16).
            self.fault(f"vector fetch fault: the {exception_name(exc)} vector at 0x{vector_addr:08x} "
                       f"(vector table 0x{self.vector_table():08x}) is not in memory", return_pc,
                       address=vector_addr, during_entry=exc)
            return
        current = core.active_exception()
        thread = current == 0
        control = core.rd(A.UC_ARM_REG_CONTROL)
        use_psp = thread and bool(control & 2)
        sp = core.rd(A.UC_ARM_REG_PSP if use_psp else A.UC_ARM_REG_MSP)
        xpsr = core.rd(A.UC_ARM_REG_XPSR)
        realign = sp & 4
        frame_sp = (sp - 32 - (4 if realign else 0)) & 0xFFFFFFFF
        stacked_xpsr = (xpsr & ~(1 << 9)) | (1 << 9 if realign else 0) | (1 << 24)
        words = [core.rd(r) for r in FRAME_REGS] + [return_pc & ~1, stacked_xpsr]
        frame = b"".join(w.to_bytes(4, "little") for w in words)
        region = self.config.region_at(frame_sp)
        if region is None or not region.contains(frame_sp, 32) or region.name == "flash":
            self.fault(f"stacking fault: SP 0x{sp:08x} does not point to writable RAM", return_pc,
                       address=frame_sp, during_entry=exc)
            return
        core.uc.mem_write(frame_sp, frame)
        core.code.written(frame_sp, len(frame), engine=False)  # a frame stacked over cached code
        core.wr(A.UC_ARM_REG_PSP if use_psp else A.UC_ARM_REG_MSP, frame_sp)
        exc_return = EXC_RETURN_HANDLER if not thread else (EXC_RETURN_THREAD_PSP if use_psp else EXC_RETURN_THREAD_MSP)
        # Handler mode: IPSR = exception number, SP = MSP (CONTROL.SPSEL reads 0).
        core.wr(A.UC_ARM_REG_CONTROL, control & ~2)
        core.wr(A.UC_ARM_REG_IPSR, exc)
        core.wr(A.UC_ARM_REG_SP, core.rd(A.UC_ARM_REG_MSP))
        core.wr(A.UC_ARM_REG_LR, exc_return)
        self.nvic.activate(exc)
        name = exception_name(exc)
        self.taken[name] = self.taken.get(name, 0) + 1
        core.observe(Kind.EXC_ENTRY, exc, vector)
        core.state.cycles += self.config.core.exception_entry_cycles
        core.state.prev_valid = 0
        if not vector & 1:
            # Vector without the Thumb bit: INVSTATE on the first instruction.
            core.set_pc(vector & ~1)
            self.fault(f"vector for {name} (0x{vector:08x}) lacks the Thumb bit (INVSTATE)", vector & ~1)
            return
        core.set_pc(vector)

    def exception_return(self, exc_return: int) -> None:
        """Exception return (B1.5.8): unstack the frame the entry pushed."""
        core = self.core
        current = core.active_exception()
        if exc_return not in EXC_RETURNS or current == 0:
            self.fault(f"invalid EXC_RETURN 0x{exc_return:08x} (INVPC)", exc_return & ~1)
            return
        to_thread = exc_return != EXC_RETURN_HANDLER
        use_psp = exc_return == EXC_RETURN_THREAD_PSP
        sp = core.rd(A.UC_ARM_REG_PSP if use_psp else A.UC_ARM_REG_MSP)
        try:
            frame = self.bus.read_memory(sp, 32)
        except UsageError:
            self.fault(f"unstacking fault: SP 0x{sp:08x} is not mapped", exc_return & ~1, address=sp)
            return
        words = [int.from_bytes(frame[i:i + 4], "little") for i in range(0, 32, 4)]
        self.nvic.deactivate(current)
        stacked_xpsr = words[7]
        new_sp = sp + 32 + (4 if stacked_xpsr & (1 << 9) else 0)
        core.wr(A.UC_ARM_REG_PSP if use_psp else A.UC_ARM_REG_MSP, new_sp)
        ipsr = 0 if to_thread else (stacked_xpsr & 0x3F)
        if to_thread and (stacked_xpsr & 0x3F):
            guest_log.warning("exception return to Thread mode with a stacked IPSR of %d", stacked_xpsr & 0x3F)
        core.wr(A.UC_ARM_REG_XPSR, (stacked_xpsr & 0xF0000000) | (1 << 24) | ipsr)
        core.wr(A.UC_ARM_REG_IPSR, ipsr)
        control = core.rd(A.UC_ARM_REG_CONTROL)
        core.wr(A.UC_ARM_REG_CONTROL, (control | 2) if use_psp else (control & ~2))
        core.wr(A.UC_ARM_REG_SP, new_sp)
        for reg, value in zip(FRAME_REGS, words):
            core.wr(reg, value)
        core.set_pc(words[6])
        core.state.cycles += self.config.core.exception_return_cycles
        core.state.prev_valid = 0
        core.observe(Kind.EXC_RETURN, current)
        if to_thread and self.scb.sleep_on_exit and not self.nvic.active:
            core.sleeping = True

    def fault(self, cause: str, pc: int, *, address: int | None = None, during_entry: int | None = None) -> None:
        """A fault: escalate to HardFault, or lock up when HardFault cannot be taken."""
        fault = self.report(cause, pc, address)
        current = self.core.active_exception()
        if current in (HARDFAULT, NMI) or during_entry in (HARDFAULT, NMI):
            raise Lockup(fault, self.last_fault)
        self.last_fault = fault
        guest_log.info("HardFault: %s at %s", cause, fault.where)
        self.take(HARDFAULT, pc)

    def report(self, cause: str, pc: int, address: int | None) -> Fault:
        """The fault as a user reads it: where, the instruction, registers, the way there."""
        pc &= ~1
        insn = self.bus.instruction_text(pc)
        state = self.core.state
        last = state.ring_pos // 4 - 1  # (ring_pos: the byte offset of the next slot)
        recent = [a for a in (state.ring[(last - i) % native.RING] for i in range(8)) if a != native.RING_EMPTY]
        active = self.core.active_exception()
        return Fault(
            cause=cause, pc=pc, where=self.describe(pc), instruction=insn, address=address,
            registers=self.core.registers(),
            exception=exception_name(active) if active else "Thread",
            recent_blocks=[self.describe(a) for a in recent],
        )
