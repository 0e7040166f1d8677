"""The machine: a Unicorn Cortex-M0 core, memory, peripherals, one clock, and the
ARMv6-M exception model Unicorn lacks (entry, return, HardFault, lockup).

This is the public API the CLI, the debugger and the tests use::

    m = Machine(load_config())          # build the chip
    m.load("firmware/build/hello.elf")  # program flash, reset
    result = m.run(max_cycles=10**8)    # until the firmware exits (or a stop)
    result.cycles, result.exit_code

The core knows nothing about RSA or any particular peripheral: devices are built from
the config by ``peripherals`` and attached to the bus.
"""

from __future__ import annotations

import ctypes
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import BinaryIO

from unicorn import (
    UC_ARCH_ARM,
    UC_ERR_EXCEPTION,
    UC_ERR_FETCH_PROT,
    UC_ERR_FETCH_UNMAPPED,
    UC_ERR_INSN_INVALID,
    UC_ERR_READ_PROT,
    UC_ERR_READ_UNMAPPED,
    UC_ERR_WRITE_PROT,
    UC_ERR_WRITE_UNMAPPED,
    UC_HOOK_BLOCK,
    UC_HOOK_CODE,
    UC_HOOK_INTR,
    UC_HOOK_MEM_INVALID,
    UC_HOOK_MEM_READ,
    UC_MEM_FETCH_PROT,
    UC_MEM_FETCH_UNMAPPED,
    UC_MEM_READ_PROT,
    UC_MEM_READ_UNMAPPED,
    UC_MEM_WRITE_PROT,
    UC_MEM_WRITE_UNMAPPED,
    UC_MODE_MCLASS,
    UC_MODE_THUMB,
    UC_PROT_ALL,
    UC_PROT_EXEC,
    UC_PROT_READ,
    UC_PROT_WRITE,
    Uc,
    UcError,
)
from unicorn import arm_const as A
from unicorn.unicorn_py3 import unicorn as _ucmod

from peripherals.base import Peripheral
from peripherals.nvic import HARDFAULT, NMI, SVCALL, SYSTICK, Nvic, exception_name
from peripherals.scb import Scb
from peripherals.systick import SysTick

from . import native
from .clock import Clock
from .config import ChipConfig, PeripheralConfig, Region
from .cycles import (
    COND_PENALTY,
    F_COND,
    F_CONDNEXT,
    K_ACCESS,
    CostRules,
    CostTables,
    ImageBytes,
    block_cost,
    disassemble_one,
    one_instruction_cost,
)
from .errors import LoadError, UsageError
from .loader import Image, load_image
from .semihosting import Exit, Semihosting

log = logging.getLogger("pkasim.core")
guest_log = logging.getLogger("pkasim.guest")

REG_IDS = [getattr(A, f"UC_ARM_REG_R{i}") for i in range(13)] + [A.UC_ARM_REG_SP, A.UC_ARM_REG_LR, A.UC_ARM_REG_PC]
REG_NAMES = [f"r{i}" for i in range(13)] + ["sp", "lr", "pc"]
EXC_RETURN_HANDLER = 0xFFFFFFF1
EXC_RETURN_THREAD_MSP = 0xFFFFFFF9
EXC_RETURN_THREAD_PSP = 0xFFFFFFFD
CALL_RETURN = 0xF0000000  # an address no config maps: call() returns here
CALL_FRAME = 256  # bytes call() leaves above the callee's SP, as a caller's frame
NO_DEADLINE = (1 << 64) - 1
PROGRESS_EVERY = 1 << 24  # cycles between progress callbacks on long runs
INSN_WFI, INSN_WFE = 0xBF30, 0xBF20


class StopReason(str, Enum):
    EXIT = "exit"  # the firmware exited through semihosting
    BUDGET = "budget"  # the cycle budget ran out
    LOCKUP = "lockup"  # a fault where the core cannot take HardFault
    SLEEP_FOREVER = "sleep-forever"  # WFI with nothing that could ever wake the core
    BREAKPOINT = "breakpoint"  # a debugger breakpoint or BKPT with a debugger attached
    UNTIL = "until"  # reached the address run() was asked to stop at
    RETURNED = "returned"  # call() finished
    STEP = "step"  # step() executed its instruction
    RESET = "reset"  # the firmware requested a system reset and reset_stops is set


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


@dataclass
class RunResult:
    """What a run() ended with; ``cycles`` and ``instructions`` count the whole session."""

    reason: StopReason
    exit_code: int | None
    cycles: int
    instructions: int
    sleep_cycles: int
    wall_seconds: float
    clock_hz: int
    fault: Fault | None = None
    lockup: Fault | None = None
    message: str = ""

    @property
    def modeled_seconds(self) -> float:
        return self.cycles / self.clock_hz

    @property
    def mips(self) -> float:
        return self.instructions / self.wall_seconds / 1e6 if self.wall_seconds > 0 else 0.0


class _Stop(Exception):
    """Internal: the run loop must return this result."""

    def __init__(self, reason: StopReason, message: str = "", exit_code: int | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.exit_code = exit_code


class Machine:
    """One emulated chip. Build it from a ChipConfig, load() an image, then run()."""

    def __init__(self, config: ChipConfig, *, stdout: BinaryIO | None = None, stderr: BinaryIO | None = None) -> None:
        self.config = config
        self.stdout = stdout if stdout is not None else sys.stdout.buffer
        self.stderr = stderr if stderr is not None else sys.stderr.buffer
        self._lib = native.load()
        self.state = native.PkState()
        self._now = _Now(self.state)
        self._mmio_key: tuple[int, int] | None = None
        self._mmio_last = -1
        self.clock = Clock(self._now, config.core.clock_hz, on_schedule=self._on_schedule)
        self.image: Image | None = None
        self.peripherals: dict[str, Peripheral] = {}
        self.breakpoints: set[int] = set()
        self.debugger_attached = False  # BKPT halts instead of faulting
        self.exceptions_taken: dict[str, int] = {}
        self.sleep_cycles = 0
        self.last_fault: Fault | None = None
        self._bp_hooks: dict[int, int] = {}
        self._py_stop: tuple | None = None
        self._skip_bp: int | None = None
        self._mem_fault: tuple[str, int] | None = None
        self._sleeping = False
        self._progress: Callable[[int], None] | None = None
        self._uc: Uc | None = None
        self._build()

    # ------------------------------------------------------------------ building
    def _build(self) -> None:
        uc = Uc(UC_ARCH_ARM, UC_MODE_THUMB | UC_MODE_MCLASS)
        uc.ctl_set_cpu_model(A.UC_CPU_ARM_CORTEX_M0)
        self._uc = uc
        self._uch = uc._uch
        self._reg_read = _ucmod.uclib.uc_reg_read
        self._reg_write = _ucmod.uclib.uc_reg_write
        self._rbuf, self._wbuf = ctypes.c_uint32(), ctypes.c_uint32()
        self._rbuf_ref, self._wbuf_ref = ctypes.byref(self._rbuf), ctypes.byref(self._wbuf)
        cfg = self.config
        for region in cfg.memory.values():
            uc.mem_map(region.base, region.size, self._prot(region))
        self._build_peripherals()
        self._map_peripherals()

        s = self.state
        flash = cfg.flash
        self._tables = CostTables(flash.base, flash.size)
        s.code_base = flash.base
        s.code_halfwords = self._tables.halfwords
        s.cost = ctypes.addressof(self._tables.cost)
        s.len = ctypes.addressof(self._tables.length)
        s.flags = ctypes.addressof(self._tables.flags)
        s.desc = ctypes.addressof(self._tables.desc)
        s.cache = self._lib.pk_alloc_cache(s.code_halfwords)
        s.fetch_ws = flash.wait_states
        s.flash_base = flash.base
        s.flash_end = flash.end
        s.cond_penalty = COND_PENALTY
        s.align_enabled = 1
        s.align_skip_start = 0xFFFFFFFF
        s.deadline = NO_DEADLINE
        s.uc = uc._uch.value
        s.reg_read = ctypes.cast(_ucmod.uclib.uc_reg_read, ctypes.c_void_p).value
        s.emu_stop = ctypes.cast(_ucmod.uclib.uc_emu_stop, ctypes.c_void_p).value
        self._fallback = native.FALLBACK(self._fallback_cost)
        s.fallback = ctypes.cast(self._fallback, ctypes.c_void_p).value
        for i, rid in enumerate(REG_IDS):
            s.regids[i] = rid
        s.apsr_regid = A.UC_ARM_REG_APSR
        self._rules = CostRules(cfg.core.muls_cycles, flash.wait_states, flash.base, flash.end)

        self._native_hooks = []
        self._add_native_hook(UC_HOOK_BLOCK, self._lib.pk_block_hook, 1, 0)
        if flash.wait_states:
            self._add_native_hook(UC_HOOK_MEM_READ, self._lib.pk_flash_read_hook, flash.base, flash.end - 1)
        uc.hook_add(UC_HOOK_INTR, self._on_interrupt)
        uc.hook_add(UC_HOOK_MEM_INVALID, self._on_mem_invalid)

    def __del__(self) -> None:
        lib = getattr(self, "_lib", None)
        if lib is not None and getattr(self, "state", None) is not None:
            lib.pk_free(ctypes.byref(self.state))

    @staticmethod
    def _prot(region: Region) -> int:
        if region.name == "flash":
            return UC_PROT_READ | UC_PROT_EXEC  # a store to flash is a bus fault
        if region.base >= 0x40000000 and region.base < 0x60000000:
            return UC_PROT_READ | UC_PROT_WRITE  # peripheral region is execute-never
        return UC_PROT_ALL if region.writable else UC_PROT_READ | UC_PROT_EXEC

    def _rd(self, regid: int) -> int:
        """A 32-bit register, straight from the engine (the binding's reg_read costs
        several microseconds; exception entry and return read a dozen registers)."""
        self._reg_read(self._uch, regid, self._rbuf_ref)
        return self._rbuf.value

    def _wr(self, regid: int, value: int) -> None:
        self._wbuf.value = value & 0xFFFFFFFF
        self._reg_write(self._uch, regid, self._wbuf_ref)

    def _add_native_hook(self, kind: int, fn: ctypes._CFuncPtr, begin: int, end: int) -> None:
        handle = ctypes.c_size_t()
        err = _ucmod.uclib.uc_hook_add(
            self._uc._uch, ctypes.byref(handle), kind, ctypes.cast(fn, ctypes.c_void_p),
            ctypes.cast(ctypes.byref(self.state), ctypes.c_void_p), ctypes.c_uint64(begin), ctypes.c_uint64(end),
        )
        if err:
            raise UcError(err)
        self._native_hooks.append(handle)

    def _build_peripherals(self) -> None:
        cfg = self.config
        self.nvic: Nvic | None = None
        irq_for: dict[str, Callable[[], None]] = {}
        for pc in cfg.peripherals.values():
            if pc.type == "nvic":
                self.nvic = Nvic(pc.name, pc.base, irqs=cfg.core.irqs)
                self.peripherals[pc.name] = self.nvic
        if self.nvic is None:
            # The NVIC is part of every ARMv6-M core; a config may omit it.
            self.nvic = Nvic("nvic", 0xE000E100, irqs=cfg.core.irqs)
            self.peripherals["nvic"] = self.nvic
        nvic = self.nvic
        nvic.on_change = self._request_check
        irq_for["systick"] = lambda: nvic.set_pending(SYSTICK)
        self.scb: Scb | None = None
        for pc in cfg.peripherals.values():
            irq = None
            if pc.irq is not None:
                irq = irq_for.get(pc.irq) if isinstance(pc.irq, str) else nvic.irq_line(pc.irq)
            if pc.type == "systick":
                dev: Peripheral = SysTick(pc.name, pc.base, self.clock, irq or irq_for["systick"],
                                          reference_clock_hz=pc.params.get("reference_clock_hz"))
            elif pc.type == "scb":
                dev = Scb(pc.name, pc.base, nvic, cpuid=int(pc.params.get("cpuid", 0x410CC200)),
                          has_vtor=cfg.core.vtor, active_exception=self.active_exception)
                dev.on_reset_request = self._on_reset_request
                self.scb = dev
            elif pc.type == "nvic":
                continue
            else:
                dev = self._build_extra(pc, irq)
            self.peripherals[pc.name] = dev
        if self.scb is None:
            self.scb = Scb("scb", 0xE000ED00, nvic, has_vtor=cfg.core.vtor, active_exception=self.active_exception)
            self.scb.on_reset_request = self._on_reset_request
            self.peripherals["scb"] = self.scb

    def _build_extra(self, pc: PeripheralConfig, irq: Callable[[], None] | None) -> Peripheral:
        """Devices beyond the ARMv6-M core's own: each model builds itself from its config."""
        if pc.type == "pka":
            from peripherals.pka import Pka

            return Pka.from_config(pc, clock=self.clock, irq=irq or (lambda: None))
        raise LoadError(f"{self.config.source}: peripherals.{pc.name}: type '{pc.type}' has no model")

    def _map_peripherals(self) -> None:
        """Map each peripheral's 1 KiB pages once; dispatch by address inside."""
        page = 1024
        windows: dict[int, list[Peripheral]] = {}
        for dev in self.peripherals.values():
            for p in range(dev.base // page, (dev.base + dev.size + page - 1) // page):
                windows.setdefault(p, []).append(dev)
        for region in self.config.memory.values():
            for p in range(region.base // page, region.end // page):
                if p in windows:
                    raise LoadError(f"{self.config.source}: memory.{region.name} overlaps peripheral {windows[p][0].name}")
        for p, devs in sorted(windows.items()):
            base = p * page
            self._uc.mmio_map(base, page, self._mmio_read, (base, devs), self._mmio_write, (base, devs))

    def _find_dev(self, devs: list[Peripheral], addr: int) -> Peripheral | None:
        for dev in devs:
            if dev.base <= addr < dev.base + dev.size:
                return dev
        return None

    def _mmio_read(self, uc: Uc, offset: int, size: int, window: tuple[int, list[Peripheral]]) -> int:
        base, devs = window
        addr = base + offset
        dev = self._find_dev(devs, addr)
        if dev is None:
            guest_log.warning("read of unassigned peripheral address 0x%08x (reads as zero)", addr)
            return 0
        self._now.offset = self._block_offset(addr)
        try:
            return dev.read(addr - dev.base, size) & ((1 << (8 * size)) - 1)
        finally:
            self._now.offset = 0

    def _mmio_write(self, uc: Uc, offset: int, size: int, value: int, window: tuple[int, list[Peripheral]]) -> None:
        base, devs = window
        addr = base + offset
        dev = self._find_dev(devs, addr)
        if dev is None:
            guest_log.warning("write of unassigned peripheral address 0x%08x (ignored)", addr)
            return
        self._now.offset = self._block_offset(addr)
        try:
            dev.write(addr - dev.base, size, value & ((1 << (8 * size)) - 1))
        finally:
            self._now.offset = 0

    def _block_offset(self, addr: int) -> int:
        """Cycles the current block spent before the instruction making this access.

        The committed count stops at the block's start; peripherals should see the
        cycle the accessing instruction starts. The instruction is found among the
        block's register-addressed word/halfword accesses, in program order, as the
        next one whose address (from the live registers) is ``addr``; anything else
        is seen at the block's start (docs/cycle-model.md).
        """
        s = self.state
        if not s.cur_valid:
            return 0
        key = (int(s.blocks), int(s.cur_start))
        if key != self._mmio_key:
            self._mmio_key, self._mmio_last = key, -1
        t = self._tables
        a, end, cost, index = s.cur_start, s.cur_end, 0, 0
        regs: dict[int, int] = {}

        def reg(n: int) -> int:
            if n not in regs:
                regs[n] = self._rd(REG_IDS[n])
            return regs[n]

        while a < end:
            h = (a - t.base) >> 1
            if not (0 <= h < t.halfwords) or not t.length[h]:
                return 0
            d = t.desc[h]
            if index > self._mmio_last and d.kind == K_ACCESS:
                base = (reg(d.rn) + (reg(d.rm) if d.rm >= 0 else 0) + d.imm) & 0xFFFFFFFF
                multiple = d.rm < 0 and d.imm == 0 and d.amask == 3
                if base == addr or (multiple and 0 <= addr - base < 64):
                    self._mmio_last = index
                    return cost
            cost += t.cost[h]
            a += 2 * t.length[h]
            index += 1
        return 0

    # ------------------------------------------------------------------ loading
    def load(self, image: Image | str | Path) -> Image:
        """Program the image into memory (erasing what was there), then reset."""
        if not isinstance(image, Image):
            image = load_image(image, self.config)
        for region in self.config.memory.values():
            self._uc.mem_write(region.base, bytes(region.size))
        for base, data in image.segments:
            self._uc.mem_write(base, data)
        self.image = image
        self._tables = CostTables(self.config.flash.base, self.config.flash.size)
        s = self.state
        s.cost = ctypes.addressof(self._tables.cost)
        s.len = ctypes.addressof(self._tables.length)
        s.flags = ctypes.addressof(self._tables.flags)
        s.desc = ctypes.addressof(self._tables.desc)
        self._tables.fill(image.code, ImageBytes(image.segments), self._rules)
        self._lib.pk_clear_cache(ctypes.byref(s))
        self._uc.ctl_flush_tb()
        s.cycles = 0
        s.insns = 0
        s.blocks = 0
        self.sleep_cycles = 0
        self.exceptions_taken = {}
        self.last_fault = None
        self.reset()
        return image

    def _flush_code_cache(self) -> None:
        self._lib.pk_clear_cache(ctypes.byref(self.state))
        self._uc.ctl_flush_tb()

    def reset(self) -> None:
        """Core reset: registers, NVIC and peripherals to reset state, SP/PC from the vectors."""
        for dev in self.peripherals.values():
            dev.reset()
        for rid in REG_IDS[:13] + [A.UC_ARM_REG_LR]:
            self._wr(rid, 0)
        self._wr(A.UC_ARM_REG_PRIMASK, 0)
        self._wr(A.UC_ARM_REG_CONTROL, 0)
        self._wr(A.UC_ARM_REG_XPSR, 1 << 24)
        base = self.config.flash.base
        sp = self.read_u32(base)
        pc = self.read_u32(base + 4)
        self._wr(A.UC_ARM_REG_PSP, 0)
        self._wr(A.UC_ARM_REG_MSP, sp & ~3)
        self._wr(A.UC_ARM_REG_SP, sp & ~3)
        self._set_pc(pc)
        s = self.state
        s.cur_valid = 0
        s.prev_valid = 0
        self._sleeping = False

    # ------------------------------------------------------------------ memory & registers
    def _device_at(self, addr: int) -> Peripheral | None:
        for dev in self.peripherals.values():
            if dev.base <= addr < dev.base + dev.size:
                return dev
        return None

    def read_memory(self, addr: int, size: int) -> bytes:
        """Bytes as the debugger sees them (no side effects on peripherals)."""
        dev = self._device_at(addr)
        if dev is not None:
            n = min(size, dev.base + dev.size - addr)
            head = dev.debug_read(addr - dev.base, n)
            return head + (self.read_memory(addr + n, size - n) if n < size else b"")
        try:
            return bytes(self._uc.mem_read(addr, size))
        except UcError:
            out = bytearray()
            for a in range(addr, addr + size):
                try:
                    out += self._uc.mem_read(a, 1)
                except UcError:
                    raise UsageError(f"address 0x{a:08x} is not mapped") from None
            return bytes(out)

    def write_memory(self, addr: int, data: bytes) -> None:
        dev = self._device_at(addr)
        if dev is not None:
            if not dev.debug_write(addr - dev.base, bytes(data)):
                raise UsageError(f"cannot write {len(data)} bytes at 0x{addr:08x}: {dev.name} registers are not memory")
            return
        try:
            self._uc.mem_write(addr, bytes(data))
        except UcError:
            raise UsageError(f"cannot write {len(data)} bytes at 0x{addr:08x}: not mapped") from None
        if self.config.flash.contains(addr):
            self._flush_code_cache()

    def read_u32(self, addr: int) -> int:
        return int.from_bytes(self.read_memory(addr, 4), "little")

    def write_u32(self, addr: int, value: int) -> None:
        self.write_memory(addr, (value & 0xFFFFFFFF).to_bytes(4, "little"))

    def _symbol_range(self, name: str) -> tuple[int, int]:
        if self.image is None:
            raise UsageError("no image loaded")
        sym = self.image.symbol(name)
        return sym.address, sym.size

    def read_symbol(self, name: str, size: int | None = None, *, initial: bool = False) -> bytes:
        """The object an ELF symbol names, as it is now; ``initial=True`` reads the value
        the startup code will copy at reset (its load address in flash, for .data)."""
        addr, sym_size = self._symbol_range(name)
        if initial:
            sec = self.image.section_of(addr)
            if sec is not None and sec.lma != sec.vma:
                addr = sec.lma + (addr - sec.vma)
        return self.read_memory(addr, size if size is not None else sym_size)

    def write_symbol(self, name: str, data: bytes) -> None:
        """Fill the object an ELF symbol names; the data must fit its size.

        An initialised variable is written both where it lives now and where its
        initial value is stored (its load address in flash), so the value survives
        the startup code's copy of .data at reset. A .bss object would be zeroed by
        that same startup code, so it is refused with a clear message.
        """
        addr, size = self._symbol_range(name)
        if size and len(data) > size:
            raise LoadError(f"{len(data)} bytes do not fit in '{name}' ({size} bytes)")
        sec = self.image.section_of(addr)
        if sec is not None and sec.nobits and self.cycles == 0:
            raise LoadError(f"'{name}' is in {sec.name}, which the startup code zeroes at reset: "
                            "give it an initial value (.data) or place it in a no-init section")
        self.write_memory(addr, data)
        if sec is not None and sec.lma != sec.vma:
            self.write_memory(sec.lma + (addr - sec.vma), data)

    def reg(self, name: str) -> int:
        return self._rd(self._reg_id(name))

    def set_reg(self, name: str, value: int) -> None:
        if name == "pc":
            self._set_pc(value)
            self.state.cur_valid = 0
            self.state.prev_valid = 0
        else:
            self._wr(self._reg_id(name), value & 0xFFFFFFFF)

    @staticmethod
    def _reg_id(name: str) -> int:
        name = name.lower()
        if name in REG_NAMES:
            return REG_IDS[REG_NAMES.index(name)]
        special = {"xpsr": A.UC_ARM_REG_XPSR, "primask": A.UC_ARM_REG_PRIMASK, "control": A.UC_ARM_REG_CONTROL,
                   "msp": A.UC_ARM_REG_MSP, "psp": A.UC_ARM_REG_PSP, "ipsr": A.UC_ARM_REG_IPSR,
                   "apsr": A.UC_ARM_REG_APSR}
        if name in special:
            return special[name]
        raise UsageError(f"no register named '{name}'")

    def registers(self) -> dict[str, int]:
        regs = {n: self._rd(r) for n, r in zip(REG_NAMES, REG_IDS)}
        for extra in ("xpsr", "primask", "control", "msp", "psp"):
            regs[extra] = self.reg(extra)
        return regs

    @property
    def pc(self) -> int:
        return self._rd(A.UC_ARM_REG_PC) & ~1

    def _set_pc(self, value: int) -> None:
        self._wr(A.UC_ARM_REG_PC, value | 1)

    @property
    def cycles(self) -> int:
        return int(self.state.cycles)

    @property
    def instructions(self) -> int:
        return int(self.state.insns)

    def active_exception(self) -> int:
        return self._rd(A.UC_ARM_REG_IPSR) & 0x3F

    def describe(self, addr: int) -> str:
        return self.image.describe(addr) if self.image else f"0x{addr:08x}"

    # ------------------------------------------------------------------ breakpoints
    def add_breakpoint(self, addr: int) -> None:
        addr &= ~1
        if addr in self._bp_hooks:
            return
        self.breakpoints.add(addr)
        self._bp_hooks[addr] = self._uc.hook_add(UC_HOOK_CODE, self._on_breakpoint, begin=addr, end=addr)
        self._uc.ctl_remove_cache(addr, addr + 2)

    def remove_breakpoint(self, addr: int) -> None:
        addr &= ~1
        self.breakpoints.discard(addr)
        handle = self._bp_hooks.pop(addr, None)
        if handle is not None:
            self._uc.hook_del(handle)
            self._uc.ctl_remove_cache(addr, addr + 2)

    def _on_breakpoint(self, uc: Uc, address: int, size: int, _: object) -> None:
        if address == self._skip_bp:
            self._skip_bp = None
            return
        self._py_stop = ("breakpoint", address)
        uc.emu_stop()

    # ------------------------------------------------------------------ hooks (Python, rare)
    def _on_interrupt(self, uc: Uc, intno: int, _: object) -> None:
        pc = self._rd(A.UC_ARM_REG_PC)
        if intno == 8 and (pc | 1) in (EXC_RETURN_HANDLER, EXC_RETURN_THREAD_MSP, EXC_RETURN_THREAD_PSP) \
                and self.active_exception() != 0:
            # The common case, served without stopping the run: unstack and go on,
            # unless the return makes another exception takeable (tail-chaining).
            try:
                self._settle(pc & ~1)
                self._return(pc | 1)
            except (_Stop, _Lockup) as exc:  # a fault while unstacking: let the loop report it
                self._py_stop = ("raise", exc)
                uc.emu_stop()
                return
            if self._sleeping or self.nvic.next_to_take(self._primask()) is not None:
                self._py_stop = ("check",)
                uc.emu_stop()
            return
        self._py_stop = ("intr", intno, pc)
        uc.emu_stop()

    def _on_mem_invalid(self, uc: Uc, access: int, address: int, size: int, value: int, _: object) -> bool:
        kinds = {
            UC_MEM_READ_UNMAPPED: "read of unmapped address",
            UC_MEM_WRITE_UNMAPPED: "write to unmapped address",
            UC_MEM_FETCH_UNMAPPED: "instruction fetch from unmapped address",
            UC_MEM_WRITE_PROT: "write to read-only memory",
            UC_MEM_READ_PROT: "read of protected memory",
            UC_MEM_FETCH_PROT: "instruction fetch from execute-never memory",
        }
        self._mem_fault = (kinds.get(access, "bad memory access"), address)
        return False

    def _fallback_cost(self, address: int, size: int) -> int:
        data = self.read_memory(address, size)
        cost, insns, flags = block_cost(data, address, self._rules)
        return cost | (insns << 32) | (flags << 56)

    def _request_check(self) -> None:
        """The NVIC's state changed: if an exception is now takeable, stop at the next
        block boundary to take it."""
        if self.nvic.next_to_take(self._primask()) is not None:
            self.state.deadline = 0

    def _on_schedule(self, at: int) -> None:
        """A device scheduled an event: make sure the run stops for it."""
        if at < self.state.deadline:
            self.state.deadline = at

    def _on_reset_request(self) -> None:
        self._py_stop = ("reset",)
        self._uc.emu_stop()

    # ------------------------------------------------------------------ cycle settling
    def _settle(self, pc: int) -> None:
        """Commit the block that was executing when the run stopped with PC at ``pc``."""
        s = self.state
        if not s.cur_valid:
            return
        start, end = s.cur_start, s.cur_end
        if start <= pc < end:
            cost, insns = self._partial(start, pc)
            s.prev_valid, s.prev_end, s.prev_flags = 1, pc, 0
        else:
            cost, insns = s.cur_cost, s.cur_insns
            if (s.cur_flags & F_COND) and pc == end and not self._cond_taken_to_next(s.cur_flags):
                cost -= COND_PENALTY
            s.prev_valid, s.prev_end, s.prev_flags = 1, end, s.cur_flags
        s.cycles += cost
        s.insns += insns
        s.blocks += 1
        s.cur_valid = 0

    def _cond_taken_to_next(self, flags: int) -> bool:
        """A B<cond> to its own fall-through: taken if its condition holds now."""
        if not flags & F_CONDNEXT:
            return False
        nzcv = self._rd(A.UC_ARM_REG_APSR) >> 28
        n, z, c, v = nzcv >> 3 & 1, nzcv >> 2 & 1, nzcv >> 1 & 1, nzcv & 1
        return [z, not z, c, not c, n, not n, v, not v, c and not z, not c or z,
                n == v, n != v, not z and n == v, z or n != v, True, True][(flags >> 4) & 0xF]

    def _partial(self, start: int, stop: int) -> tuple[int, int]:
        t = self._tables
        cost = insns = 0
        a = start
        while a < stop:
            h = (a - t.base) >> 1
            if 0 <= h < t.halfwords and t.length[h]:
                cost += t.cost[h]
                a += 2 * t.length[h]
            else:
                c, size = one_instruction_cost(self.read_memory(a, 4), a, self._rules)
                cost += c
                a += size
            insns += 1
        return cost, insns

    # ------------------------------------------------------------------ exceptions
    def _primask(self) -> bool:
        return bool(self._rd(A.UC_ARM_REG_PRIMASK) & 1)

    def _vector(self, exc: int) -> int:
        vtor = self.scb.vtor if self.scb and self.scb.has_vtor else 0
        return self.read_u32(vtor + 4 * exc)

    def _take(self, exc: int, return_pc: int) -> None:
        """Exception entry (ARMv6-M B1.5.6): stack the frame, switch mode, jump."""
        uc = self._uc
        current = self.active_exception()
        thread = current == 0
        control = self._rd(A.UC_ARM_REG_CONTROL)
        use_psp = thread and bool(control & 2)
        sp = self._rd(A.UC_ARM_REG_PSP if use_psp else A.UC_ARM_REG_MSP)
        xpsr = self._rd(A.UC_ARM_REG_XPSR)
        realign = sp & 4
        frame_sp = (sp - 32 - (4 if realign else 0)) & 0xFFFFFFFF
        stacked_xpsr = (xpsr & ~(1 << 9)) | (1 << 9 if realign else 0) | (1 << 24)
        words = [self._rd(r) for r in (A.UC_ARM_REG_R0, A.UC_ARM_REG_R1, A.UC_ARM_REG_R2, A.UC_ARM_REG_R3,
                                            A.UC_ARM_REG_R12, A.UC_ARM_REG_LR)]
        words += [return_pc & ~1, stacked_xpsr]
        frame = b"".join(w.to_bytes(4, "little") for w in words)
        region = self.config.region_at(frame_sp)
        if region is None or not region.contains(frame_sp, 32) or region.name == "flash":
            self._fault(f"stacking fault: SP 0x{sp:08x} does not point to writable RAM", return_pc,
                        address=frame_sp, during_entry=exc)
            return
        uc.mem_write(frame_sp, frame)
        if use_psp:
            self._wr(A.UC_ARM_REG_PSP, frame_sp)
        else:
            self._wr(A.UC_ARM_REG_MSP, frame_sp)
        exc_return = EXC_RETURN_HANDLER if not thread else (EXC_RETURN_THREAD_PSP if use_psp else EXC_RETURN_THREAD_MSP)
        # Handler mode: IPSR = exception number, SP = MSP (CONTROL.SPSEL reads 0).
        self._wr(A.UC_ARM_REG_CONTROL, control & ~2)
        self._wr(A.UC_ARM_REG_IPSR, exc)
        self._wr(A.UC_ARM_REG_SP, self._rd(A.UC_ARM_REG_MSP))
        self._wr(A.UC_ARM_REG_LR, exc_return)
        self.nvic.activate(exc)
        name = exception_name(exc)
        self.exceptions_taken[name] = self.exceptions_taken.get(name, 0) + 1
        self.state.cycles += self.config.core.exception_entry_cycles
        self.state.prev_valid = 0
        vector = self._vector(exc)
        if not vector & 1:
            # Vector without the Thumb bit: INVSTATE on the first instruction.
            self._set_pc(vector & ~1)
            self._fault(f"vector for {name} (0x{vector:08x}) lacks the Thumb bit (INVSTATE)", vector & ~1)
            return
        self._set_pc(vector)

    def _return(self, exc_return: int) -> None:
        """Exception return (B1.5.8): unstack the frame the entry pushed."""
        current = self.active_exception()
        if exc_return not in (EXC_RETURN_HANDLER, EXC_RETURN_THREAD_MSP, EXC_RETURN_THREAD_PSP) or current == 0:
            self._fault(f"invalid EXC_RETURN 0x{exc_return:08x} (INVPC)", exc_return & ~1)
            return
        to_thread = exc_return != EXC_RETURN_HANDLER
        use_psp = exc_return == EXC_RETURN_THREAD_PSP
        sp = self._rd(A.UC_ARM_REG_PSP if use_psp else A.UC_ARM_REG_MSP)
        try:
            frame = self.read_memory(sp, 32)
        except UsageError:
            self._fault(f"unstacking fault: SP 0x{sp:08x} is not mapped", exc_return & ~1, address=sp)
            return
        words = [int.from_bytes(frame[i:i + 4], "little") for i in range(0, 32, 4)]
        self.nvic.deactivate(current)
        stacked_xpsr = words[7]
        new_sp = sp + 32 + (4 if stacked_xpsr & (1 << 9) else 0)
        if use_psp:
            self._wr(A.UC_ARM_REG_PSP, new_sp)
        else:
            self._wr(A.UC_ARM_REG_MSP, new_sp)
        ipsr = 0 if to_thread else (stacked_xpsr & 0x3F)
        if to_thread and (stacked_xpsr & 0x3F):
            guest_log.warning("exception return to Thread mode with a stacked IPSR of %d", stacked_xpsr & 0x3F)
        self._wr(A.UC_ARM_REG_XPSR, (stacked_xpsr & 0xF0000000) | (1 << 24) | ipsr)
        self._wr(A.UC_ARM_REG_IPSR, ipsr)
        control = self._rd(A.UC_ARM_REG_CONTROL)
        self._wr(A.UC_ARM_REG_CONTROL, (control | 2) if use_psp else (control & ~2))
        self._wr(A.UC_ARM_REG_SP, new_sp)
        for reg, value in zip((A.UC_ARM_REG_R0, A.UC_ARM_REG_R1, A.UC_ARM_REG_R2, A.UC_ARM_REG_R3,
                               A.UC_ARM_REG_R12, A.UC_ARM_REG_LR), words):
            self._wr(reg, value)
        self._set_pc(words[6])
        self.state.cycles += self.config.core.exception_return_cycles
        self.state.prev_valid = 0
        if to_thread and self.scb is not None and self.scb.sleep_on_exit and not self.nvic.active:
            self._sleeping = True

    def _fault(self, cause: str, pc: int, *, address: int | None = None, during_entry: int | None = None) -> None:
        """A fault: escalate to HardFault, or lock up when HardFault cannot be taken."""
        fault = self._fault_report(cause, pc, address)
        current = self.active_exception()
        if current in (HARDFAULT, NMI) or during_entry in (HARDFAULT, NMI):
            original = self.last_fault
            raise _Lockup(fault, original)
        self.last_fault = fault
        guest_log.info("HardFault: %s at %s", cause, fault.where)
        self._take(HARDFAULT, pc)

    def _fault_report(self, cause: str, pc: int, address: int | None) -> Fault:
        pc &= ~1
        try:
            insn = disassemble_one(self.read_memory(pc, 4), pc)
        except UsageError:
            insn = "(not readable)"
        ring = self.state.ring
        pos = self.state.ring_pos
        recent = [ring[(pos - 1 - i) % native.RING] for i in range(min(8, pos))]
        return Fault(
            cause=cause, pc=pc, where=self.describe(pc), instruction=insn, address=address,
            registers=self.registers(),
            exception=exception_name(self.active_exception()) if self.active_exception() else "Thread",
            recent_blocks=[self.describe(a) for a in recent],
        )

    def _take_pending(self) -> bool:
        exc = self.nvic.next_to_take(self._primask())
        if exc is None:
            return False
        self._sleeping = False
        self._take(exc, self.pc)
        return True

    # ------------------------------------------------------------------ running
    def run(self, max_cycles: int | None = None, *, until: int | str | None = None,
            progress: Callable[[int], None] | None = None) -> RunResult:
        """Run until the firmware exits or a stop condition; never raises on guest errors.

        ``max_cycles`` bounds this call (a budget from the current count); ``until``
        stops before executing that address (or symbol); ``progress`` is called with
        the cycle count every 2**24 cycles on long runs.
        """
        if self.image is None:
            raise UsageError("no image loaded")
        until_addr = self._resolve(until) if until is not None else None
        budget = self.cycles + max_cycles if max_cycles is not None else None
        self._progress = progress
        start_wall = time.perf_counter()
        if until_addr is not None and self.pc == until_addr:
            first = self.step()  # already there: leave it before looking for it again
            if first.reason != StopReason.STEP:
                first.wall_seconds = time.perf_counter() - start_wall
                return first
        result = self._loop(budget, until_addr)
        result.wall_seconds = time.perf_counter() - start_wall
        return result

    def _resolve(self, where: int | str) -> int:
        if isinstance(where, int):
            return where & ~1
        if self.image is None:
            raise UsageError("no image loaded")
        return self.image.symbol(where).address & ~1

    def _result(self, reason: StopReason, *, exit_code: int | None = None, message: str = "",
                lockup: Fault | None = None) -> RunResult:
        return RunResult(reason=reason, exit_code=exit_code, cycles=self.cycles, instructions=self.instructions,
                         sleep_cycles=self.sleep_cycles, wall_seconds=0.0, clock_hz=self.config.core.clock_hz,
                         fault=self.last_fault, lockup=lockup, message=message)

    def _loop(self, budget: int | None, until: int | None) -> RunResult:
        next_progress = self.cycles + PROGRESS_EVERY if self._progress else None
        try:
            while True:
                self.clock.run_due()
                if not self._sleeping:
                    self._take_pending()
                if budget is not None and self.cycles >= budget:
                    raise _Stop(StopReason.BUDGET, f"cycle budget of {budget:,} cycles reached")
                if next_progress is not None and self.cycles >= next_progress:
                    self._progress(self.cycles)
                    next_progress = self.cycles + PROGRESS_EVERY
                deadline = min(x for x in (self.clock.next_deadline(), budget, next_progress, NO_DEADLINE) if x is not None)
                if self._sleeping:
                    self._sleep_until(deadline, budget)
                    continue
                self.state.deadline = deadline
                self._execute(until)
        except _Stop as stop:
            return self._result(stop.reason, exit_code=stop.exit_code, message=stop.message)
        except _Lockup as lk:
            self.last_fault = lk.original or lk.fault
            return self._result(StopReason.LOCKUP, message=f"lockup: {lk.fault.cause} at {lk.fault.where}",
                                lockup=lk.fault)

    def _sleep_until(self, deadline: int, budget: int | None) -> None:
        if self.nvic.would_wake():
            self._sleeping = False
            return
        if self.clock.next_deadline() is None:
            raise _Stop(StopReason.SLEEP_FOREVER,
                        f"WFI at {self.describe(self.pc)} with no interrupt pending and no event scheduled: "
                        "the core would sleep forever")
        target = deadline
        slept = target - self.cycles
        if slept > 0:
            self.sleep_cycles += slept
            self.clock.advance_to(target)

    def _execute(self, until: int | None) -> None:
        """One emu_start, then handle why it returned."""
        s = self.state
        s.stop_reason = native.STOP_NONE
        self._py_stop = None
        self._mem_fault = None
        pc = self.pc
        if until is not None:
            self._uc.ctl_remove_cache(until, until + 2)  # 'until' is checked at translation
        try:
            self._uc.emu_start(pc | 1, until if until is not None else 0xFFFFFFFF)
            error = None
        except UcError as exc:
            error = exc
        pc_now = self.pc
        if error is not None:
            self._handle_error(error, pc_now)
            return
        reason = s.stop_reason
        if reason in (native.STOP_DEADLINE, native.STOP_IRQCHK):
            return
        if reason == native.STOP_ALIGN:
            self._unaligned(s.align_pc, s.align_addr)
            return
        stop = self._py_stop
        if stop is None:
            self._settle(pc_now)
            hw = int.from_bytes(self.read_memory(pc_now - 2, 2), "little") if pc_now >= 2 else 0
            if hw in (INSN_WFI, INSN_WFE) and not (until is not None and pc_now == until):
                self._sleeping = True
                return
            if until is not None and pc_now == until:
                raise _Stop(StopReason.UNTIL, f"reached {self.describe(until)}")
            return
        if stop[0] == "breakpoint":
            self._settle(stop[1])
            self._skip_bp = stop[1]
            raise _Stop(StopReason.BREAKPOINT, f"breakpoint at {self.describe(stop[1])}")
        if stop[0] == "check":
            return
        if stop[0] == "raise":
            raise stop[1]
        if stop[0] == "reset":
            self._settle(pc_now)
            self.reset()
            return
        _, intno, ipc = stop
        self._handle_intr(intno, ipc & ~1)

    def _handle_intr(self, intno: int, pc: int) -> None:
        if intno == 8:  # exception return: PC holds EXC_RETURN with bit 0 clear
            self._settle(pc)
            self._return(pc | 1)
            return
        if intno == 2:  # SVC: PC is already past it
            self._settle(pc)
            self.nvic.set_pending(SVCALL)
            if self.nvic.next_to_take(self._primask()) != SVCALL:
                self.nvic.clear_pending(SVCALL)
                self._fault("SVC executed where SVCall cannot be taken (priority or PRIMASK)", pc - 2)
            return
        if intno == 7:  # BKPT: PC at the instruction
            self._settle(pc)
            hw = int.from_bytes(self.read_memory(pc, 2), "little")
            if hw == 0xBEAB:
                self.state.cycles += 1  # BKPT: 1 cycle (table 3-1); the host call takes no modeled time
                self.state.insns += 1
                self._semihost(pc)
                return
            if self.debugger_attached:
                raise _Stop(StopReason.BREAKPOINT, f"BKPT #{hw & 0xFF} at {self.describe(pc)}")
            self._fault(f"BKPT #{hw & 0xFF} with no debugger attached", pc)
            return
        if intno in (3, 4):  # prefetch / data abort raised as a CPU exception
            if intno == 3 and pc == CALL_RETURN:
                self._settle(pc)
                raise _Stop(StopReason.RETURNED, "call returned")
            self._settle(pc)
            cause, address = self._mem_fault or (("instruction fetch fault" if intno == 3 else "data access fault"), None)
            self._fault(cause if address is None else f"{cause} 0x{address:08x}", pc, address=address)
            return
        self._settle(pc)
        self._fault(f"unexpected CPU exception {intno}", pc)

    def _semihost(self, pc: int) -> None:
        op = self._rd(A.UC_ARM_REG_R0)
        arg = self._rd(A.UC_ARM_REG_R1)
        sh = self._semihosting()
        try:
            result = sh.call(op, arg)
        except UsageError as exc:
            guest_log.warning("semihosting call 0x%02x at %s: %s", op, self.describe(pc), exc)
            result = -1
        self._set_pc(pc + 2)
        self.state.prev_valid = 0
        if isinstance(result, Exit):
            raise _Stop(StopReason.EXIT, f"firmware exited with code {result.code}", exit_code=result.code)
        self._wr(A.UC_ARM_REG_R0, result & 0xFFFFFFFF)

    def _semihosting(self) -> Semihosting:
        if not hasattr(self, "_sh"):
            self._sh = Semihosting(self.read_memory, self.write_memory, lambda: self.cycles,
                                   self.config.core.clock_hz, self.stdout, self.stderr)
        return self._sh

    def _unaligned(self, fault_pc: int, address: int) -> None:
        """Run the block up to the faulting access, then fault there."""
        s = self.state
        block_start = self.pc
        s.align_skip_start = block_start
        s.deadline = NO_DEADLINE
        s.stop_reason = native.STOP_NONE
        try:
            if fault_pc != block_start:
                # Unicorn checks 'until' when it translates: drop the cached block first.
                self._uc.ctl_remove_cache(fault_pc, fault_pc + 2)
                self._uc.emu_start(block_start | 1, fault_pc)
        except UcError as exc:
            self._handle_error(exc, self.pc)
            return
        s.align_skip_start = 0xFFFFFFFF
        self._settle(fault_pc)
        self._set_pc(fault_pc)
        self._fault(f"unaligned access to 0x{address:08x} (ARMv6-M requires natural alignment)", fault_pc,
                    address=address)

    def _handle_error(self, error: UcError, pc: int) -> None:
        code = error.errno
        if code == UC_ERR_FETCH_UNMAPPED and pc == CALL_RETURN:
            self._settle(pc)
            raise _Stop(StopReason.RETURNED, "call returned")
        if code == UC_ERR_INSN_INVALID:
            self._settle(pc)
            insn = disassemble_one(self.read_memory(pc, 4), pc) if self.config.region_at(pc) else "?"
            self._fault(f"undefined instruction ({insn})", pc)
            return
        mem = self._mem_fault
        if code in (UC_ERR_READ_UNMAPPED, UC_ERR_WRITE_UNMAPPED, UC_ERR_FETCH_UNMAPPED,
                    UC_ERR_READ_PROT, UC_ERR_WRITE_PROT, UC_ERR_FETCH_PROT):
            cause, address = mem if mem else (str(error), None)
            self._settle(pc)
            if address is not None:
                cause = f"{cause} 0x{address:08x}"
            self._fault(cause, pc, address=address)
            return
        if code == UC_ERR_EXCEPTION:
            self._settle(pc)
            self._fault("unhandled CPU exception", pc)
            return
        self._settle(pc)
        self._fault(f"emulation error: {error}", pc)

    # ------------------------------------------------------------------ stepping & calling
    def step(self) -> RunResult:
        """Execute exactly one instruction (taking a pending exception counts as one step)."""
        if self.image is None:
            raise UsageError("no image loaded")
        try:
            self.clock.run_due()
            if self._take_pending():
                return self._result(StopReason.STEP, message="exception entry")
            s = self.state
            s.deadline = NO_DEADLINE
            s.stop_reason = native.STOP_NONE
            self._py_stop = None
            self._mem_fault = None
            pc = self.pc
            self._skip_bp = pc
            try:
                self._uc.emu_start(pc | 1, 0xFFFFFFFF, count=1)
                error = None
            except UcError as exc:
                error = exc
            self._skip_bp = None
            if error is not None:
                self._handle_error(error, self.pc)
            elif s.stop_reason == native.STOP_ALIGN:
                self._unaligned(s.align_pc, s.align_addr)
            elif self._py_stop is not None and self._py_stop[0] == "intr":
                self._handle_intr(self._py_stop[1], self._py_stop[2] & ~1)
            else:
                self._settle(self.pc)
            return self._result(StopReason.STEP)
        except _Stop as stop:
            return self._result(stop.reason, exit_code=stop.exit_code, message=stop.message)
        except _Lockup as lk:
            return self._result(StopReason.LOCKUP, message=f"lockup: {lk.fault.cause}", lockup=lk.fault)

    def call(self, function: int | str, *args: int, max_cycles: int = 10**8) -> int:
        """Call a firmware function with up to 4 arguments; returns the cycles it took
        from its first instruction through its return. Registers r0 (result) and the
        memory it wrote stay as the function left them."""
        if len(args) > 4:
            raise UsageError("call() passes at most 4 arguments in r0-r3")
        addr = self._resolve(function)
        for i, value in enumerate(args):
            self._wr(REG_IDS[i], value & 0xFFFFFFFF)
        self._wr(A.UC_ARM_REG_LR, CALL_RETURN | 1)
        # Leave a caller's frame below SP, as a real caller would have one; SP comes
        # back to where it was, so calls can follow one another.
        sp = self.reg("sp")
        self._wr(A.UC_ARM_REG_SP, (sp - CALL_FRAME) & ~7)
        self.set_reg("pc", addr)
        before = self.cycles
        result = self.run(max_cycles=max_cycles)
        if result.reason == StopReason.RETURNED:
            self._wr(A.UC_ARM_REG_SP, sp)
        if result.reason != StopReason.RETURNED:
            raise UsageError(f"call of {self.describe(addr)} did not return: {result.message or result.reason.value}")
        return self.cycles - before


class _Now:
    """The cycle count the clock reads: the committed count, plus the cycles already
    spent in the current block while a peripheral access is being served."""

    def __init__(self, state: native.PkState) -> None:
        self.state = state
        self.offset = 0

    @property
    def cycles(self) -> int:
        return int(self.state.cycles) + self.offset

    @cycles.setter
    def cycles(self, value: int) -> None:
        self.state.cycles = value - self.offset


class _Lockup(Exception):
    def __init__(self, fault: Fault, original: Fault | None) -> None:
        super().__init__(fault.cause)
        self.fault = fault
        self.original = original
