"""The machine: the facade over one emulated chip that docs/api.md documents.

It assembles the parts, each in its own module: the CPU (``core``), the memory map
and device windows (``bus``), the ARMv6-M exception model (``exceptions``) and the
run loop with its one clock (``runloop``, ``clock``); devices come from ``devices``.
The CLI, the debugger and the tests use this API, never Unicorn::

    m = Machine(load_config())          # build the chip
    m.load("firmware/build/hello.elf")  # program flash, reset
    result = m.run(max_cycles=10**8)    # until the firmware exits (or a stop)
    result.cycles, result.exit_code

The core knows nothing about RSA or any particular peripheral.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from unicorn import UC_HOOK_BLOCK, UC_HOOK_CODE, UC_HOOK_INTR, UC_HOOK_MEM_READ
from unicorn import arm_const as A
from unicorn.unicorn_py3 import unicorn as _ucmod

from pkasim import native
from pkasim.base.clock import Clock
from pkasim.base.errors import LoadError, UsageError
from pkasim.chip.config import ChipConfig
from pkasim.chip.loader import Image, load_image
from pkasim.core.bus import Bus, region_protection
from pkasim.core.codecache import CodeCache
from pkasim.core.cpu import NO_DEADLINE, REG_IDS, Core, Now
from pkasim.core.cycles import COND_PENALTY
from pkasim.core.devices import build_devices
from pkasim.core.exceptions import ExceptionModel, Fault
from pkasim.core.flashreads import FlashReads
from pkasim.core.observe import Kind, Observation, Observer
from pkasim.core.results import CallProbe, ProbeState, RunResult, StopReason
from pkasim.core.runloop import CALL_RETURN, RunLoop
from pkasim.core.watchpoints import Watchpoint
from pkasim.host.semihosting import Semihosting
from pkasim.native import engine, stockregs
from pkasim.peripherals.base import Peripheral
from pkasim.peripherals.nvic import FIRST_IRQ, SYSTICK, NvicState, exception_name

__all__ = ["CALL_RETURN", "Fault", "Machine", "RunResult", "StopReason"]

CALL_FRAME = 256  # bytes call() leaves above the callee's SP, as a caller's frame


# Memory hooks over at most this many bytes are found inline on pkasim's engine (patch 12):
# a watchpoint's range widened by watchpoints.REACH, up to 4 for reads and 4 for writes.
INLINE_HOOK_BYTES = 256


class Machine:
    """One emulated chip. Build it from a ChipConfig, load() an image, then run()."""

    def __init__(self, config: ChipConfig, *, stdout: BinaryIO | None = None, stderr: BinaryIO | None = None,
                 stdin: BinaryIO | None = None) -> None:
        self.config = config
        self.stdout = stdout if stdout is not None else sys.stdout.buffer
        self.stderr = stderr if stderr is not None else sys.stderr.buffer
        self.stdin = stdin  # the firmware's console input; None reads as end of input
        self.image: Image | None = None
        self._sh: Semihosting | None = None
        self.core = core = Core()
        self.state = core.state
        self._now = Now(core.state)
        self.clock = Clock(self._now, config.core.clock_hz, on_schedule=lambda at: self._loop.on_schedule(at))
        devices = build_devices(config, self.clock, active_exception=core.active_exception)
        self.nvic, self.scb, self.peripherals = devices.nvic, devices.scb, devices.all
        self.bus = Bus(core, config, self.peripherals, self._now, on_code_write=self._code_written)
        self._exc = ExceptionModel(core, self.bus, self.nvic, self.scb, config, self.describe)
        self._loop = RunLoop(core, self.bus, self._exc, self.nvic, self.clock, self._semihosting, self.describe,
                             self.reset)
        self.nvic.on_change = self._loop.request_check
        self.scb.on_reset_request = self._loop.on_reset_request
        self.scb.on_change = self._sync_scb
        self.bus.irq_exception = {pc.name: FIRST_IRQ + pc.irq for pc in config.peripherals.values()
                                  if isinstance(pc.irq, int)}
        self._wfi_hooks: dict[int, object] = {}
        self._insn_hooks: dict[object, tuple[int, int]] = {}  # on_instructions handles: [begin, end)
        self._hooks_changed = False  # since the WFI hooks were placed and the loops decided
        self._wfis: set[int] = set()
        self._probe_mark: object | None = None  # the call probe's callback (probe_call), kept alive
        self._probe_error: BaseException | None = None  # what the probe's on_mark raised
        self._setup_cycle_model()
        self._setup_native_exceptions()
        self.bus.map()
        self._setup_flash_reads()

    def _setup_cycle_model(self) -> None:
        core, cfg = self.core, self.config
        s = core.state
        flash = cfg.flash
        core.code = CodeCache(cfg, core, region_protection, by_translation=not engine.patched())
        core.use_own_tlb()
        s.fetch_ws = flash.wait_states
        s.flash_base = flash.base
        s.flash_end = flash.end
        s.cond_penalty = COND_PENALTY
        s.align_enabled = 1
        s.align_skip_start = 0xFFFFFFFF
        s.split_start = 0xFFFFFFFF
        s.deadline = NO_DEADLINE
        s.uc = core.uch.value
        s.reg_read = ctypes.cast(_ucmod.uclib.uc_reg_read, ctypes.c_void_p).value
        s.emu_stop = ctypes.cast(_ucmod.uclib.uc_emu_stop, ctypes.c_void_p).value
        for i, rid in enumerate(REG_IDS):
            s.regids[i] = rid
        s.apsr_regid = A.UC_ARM_REG_APSR
        if engine.patched():
            # the engine's generated code keeps the count (docs/engine.md)
            core.count_blocks(pending=ctypes.addressof(self.nvic.state) + NvicState.pending.offset)
            core.find_small_hooks_inline(INLINE_HOOK_BYTES)  # watchpoints do not slow their page
            fn = _ucmod.uclib.uc_pkasim_arm_regs  # r0-r14 read in place by the native hooks (patch 14)
            fn.restype, fn.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
            s.regs_ptr = fn(core.uch)
            s.m_read = ctypes.cast(_ucmod.uclib.uc_arm_m_exc_read, ctypes.c_void_p).value  # patch 25: the
            s.m_write = ctypes.cast(_ucmod.uclib.uc_arm_m_exc_write, ctypes.c_void_p).value  # exception registers at once
            s.align_enabled = 0  # the engine faults on unaligned accesses itself (ARMv6-M)
        else:
            s.regs_ptr = stockregs.find(core.uch)  # r0-r14 read in place where found (else through Unicorn)
            core.add_native_hook(UC_HOOK_BLOCK, core.lib.pk_block_hook, 1, 0)
        if flash.wait_states and engine.patched():
            # Flash data reads cost the wait states: counted by the engine's generated
            # code (patch 10, no hook call), else by a native memory hook on flash.
            if not core.count_reads(flash.base, flash.end - 1, flash.wait_states):
                core.add_native_hook(UC_HOOK_MEM_READ, core.lib.pk_flash_read_hook, flash.base, flash.end - 1)

    def _setup_flash_reads(self) -> None:
        """On the stock wheel, flash data reads cost the wait states through a window
        of the TLB's (flashreads.py), a read hook only while a memory hook covers flash."""
        flash = self.config.flash
        if flash.wait_states and not engine.patched():
            self.core.flash_reads = FlashReads(self.core, flash, self.bus.host_address(flash))

    def _setup_native_exceptions(self) -> None:
        """The common exception path in C (excmodel.c): entry, return, WFI sleep."""
        core, cfg = self.core, self.config
        s = core.state
        lib = _ucmod.uclib
        s.nvic = ctypes.addressof(self.nvic.state)
        for dev in self.peripherals.values():
            if hasattr(dev, "attach_events"):  # SysTick: its steps fire natively (systick_fast.c)
                record = dev.attach_events(core.lib, ctypes.addressof(s), self.bus.irq_exception.get(dev.name, SYSTICK))
                native.add_device(s, core.lib, record, dev.NATIVE_NEXT, dev.NATIVE_DUE)
                break
        s.reg_write = ctypes.cast(lib.uc_reg_write, ctypes.c_void_p).value
        s.mem_read = ctypes.cast(lib.uc_mem_read, ctypes.c_void_p).value
        s.mem_write = ctypes.cast(lib.uc_mem_write, ctypes.c_void_p).value
        self._py_intr = native.PY_INTR(self._loop.on_interrupt)
        s.py_intr = ctypes.cast(self._py_intr, ctypes.c_void_p).value
        s.entry_cycles = cfg.core.exception_entry_cycles
        s.return_cycles = cfg.core.exception_return_cycles
        stack = [r for r in cfg.memory.values() if r.name != "flash"][:8]
        s.stack_n = len(stack)
        for i, region in enumerate(stack):
            s.stack_base[i], s.stack_end[i] = region.base, region.end
        s.id_primask, s.id_control = A.UC_ARM_REG_PRIMASK, A.UC_ARM_REG_CONTROL
        s.id_msp, s.id_psp = A.UC_ARM_REG_MSP, A.UC_ARM_REG_PSP
        s.id_xpsr, s.id_ipsr = A.UC_ARM_REG_XPSR, A.UC_ARM_REG_IPSR
        s.native_on = 1
        self._loop.forget_loop_verdicts()
        self._sync_scb()
        core.add_native_hook(UC_HOOK_INTR, core.lib.pk_intr_hook, 1, 0)
        self._loop.native_hooks_changed = self._place_wfi_hooks

    def _code_written(self, addr: int, size: int) -> None:
        """The debugger wrote memory: cached code from those bytes (and the loop
        verdicts made on it) is forgotten, natively (pk_code_changed)."""
        self.core.code.written(addr, size)

    def _sync_scb(self) -> None:
        """VTOR and SLEEPONEXIT, as the native exception path reads them."""
        s = self.core.state
        s.vtor = self._exc.vector_table()
        s.sleep_on_exit = int(self.scb.sleep_on_exit)

    def _find_wfis(self) -> None:
        """The WFI/WFE instructions of the loaded image (once per load), found by a
        linear walk of its code ranges (the native hook checks the halfword again
        when it fires, so a literal that looks like WFI costs nothing)."""
        self._wfis: set[int] = set()
        for base, data in self.image.code:
            off = 0
            while off + 2 <= len(data):
                hw = int.from_bytes(data[off:off + 2], "little")
                if hw in (0xBF30, 0xBF20):
                    self._wfis.add(base + off)
                off += 4 if hw >> 11 >= 0x1D else 2

    def _place_wfi_hooks(self) -> None:
        """A native hook on each WFI/WFE of the image sleeps without leaving the engine
        (none where a breakpoint or an instruction hook sits: it must see the
        instruction, and the native hook would stop the engine before it is called)."""
        uc = self.core.uc
        hooked = self._loop.hooked
        wanted = {a for a in self._wfis - self._loop.breakpoints if not any(lo <= a < hi for lo, hi in hooked)}
        for addr in set(self._wfi_hooks) - wanted:
            _ucmod.uclib.uc_hook_del(self.core.uch, ctypes.c_size_t(self._wfi_hooks.pop(addr)))  # a native hook
            uc.ctl_remove_cache(addr, addr + 2)
        for addr in sorted(wanted - set(self._wfi_hooks)):
            self._wfi_hooks[addr] = self.core.add_native_hook(UC_HOOK_CODE, self.core.lib.pk_wfi_hook, addr, addr).value
            uc.ctl_remove_cache(addr, addr + 2)

    def __del__(self) -> None:
        core = getattr(self, "core", None)
        if core is not None:
            core.free()

    def _semihosting(self) -> Semihosting:
        if self._sh is None:
            self._sh = Semihosting(self.read_memory, self.write_memory, lambda: self.cycles,
                                   self.config.core.clock_hz, self.stdout, self.stderr, stdin=self.stdin,
                                   memory=list(self.config.memory.values()), image=lambda: self.image)
        return self._sh

    @property
    def semihosting(self) -> Semihosting:
        """The semihosting host: set its ``argv``, ``host_dir`` or ``stdin`` before a run."""
        return self._semihosting()

    # ------------------------------------------------------------------ loading
    def load(self, image: Image | str | Path) -> Image:
        """Program the image into memory (erasing what was there), then reset."""
        if not isinstance(image, Image):
            image = load_image(image, self.config)
        uc = self.core.uc
        for region in self.config.memory.values():
            uc.mem_write(region.base, bytes(region.size))
        for base, data in image.segments:
            uc.mem_write(base, data)
        self.image = image
        self._find_wfis()
        self._place_wfi_hooks()
        self._loop.forget_loop_verdicts()
        self.core.flush_translations()
        s = self.core.state
        s.cycles = 0
        s.insns = 0
        s.blocks = 0
        s.sleep_cycles = 0
        ctypes.memset(s.taken, 0, ctypes.sizeof(s.taken))
        self._exc.taken.clear()
        self._exc.last_fault = None
        if self.core.obs is not None:
            self.core.obs.load(image)
        self.reset()
        return image

    def reset(self) -> None:
        """Core reset: registers, NVIC and peripherals to reset state, SP/PC from the vectors."""
        core = self.core
        for dev in self.peripherals.values():
            dev.reset()
        for rid in REG_IDS[:13] + [A.UC_ARM_REG_LR]:
            core.wr(rid, 0)
        core.wr(A.UC_ARM_REG_PRIMASK, 0)
        core.wr(A.UC_ARM_REG_CONTROL, 0)
        core.wr(A.UC_ARM_REG_XPSR, 1 << 24)
        base = self.config.flash.base
        sp = self.read_u32(base)
        pc = self.read_u32(base + 4)
        core.wr(A.UC_ARM_REG_PSP, 0)
        core.wr(A.UC_ARM_REG_MSP, sp & ~3)
        core.wr(A.UC_ARM_REG_SP, sp & ~3)
        core.set_pc(pc)
        core.drop_block()
        core.state.prev_valid = 0
        core.sleeping = False
        core.observe(Kind.RESET)

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
        self._hooks_settled()
        return self._loop.run(max_cycles, until_addr, progress)

    def step(self) -> RunResult:
        """Execute exactly one instruction (taking a pending exception counts as one step)."""
        if self.image is None:
            raise UsageError("no image loaded")
        self._hooks_settled()
        return self._loop.step()

    def call(self, function: int | str, *args: int, max_cycles: int = 10**8) -> int:
        """Call a firmware function with up to 4 arguments; returns the cycles it took
        from its first instruction through its return. Registers r0 (result) and the
        memory it wrote stay as the function left them."""
        if len(args) > 4:
            raise UsageError("call() passes at most 4 arguments in r0-r3")
        addr = self._resolve(function)
        core = self.core
        for i, value in enumerate(args):
            core.wr(REG_IDS[i], value)
        core.wr(A.UC_ARM_REG_LR, CALL_RETURN | 1)
        # Leave a caller's frame below SP, as a real caller would have one; SP comes
        # back to where it was, so calls can follow one another.
        sp = self.reg("sp")
        core.wr(A.UC_ARM_REG_SP, (sp - CALL_FRAME) & ~7)
        self.set_reg("pc", addr)
        before = self.cycles
        self._loop.calling = True  # a fetch from CALL_RETURN is this call's return, not a fault
        try:
            result = self.run(max_cycles=max_cycles)
        finally:
            self._loop.calling = False
        if result.reason != StopReason.RETURNED:
            raise UsageError(f"call of {self.describe(addr)} did not return: {result.message or result.reason.value}")
        core.wr(A.UC_ARM_REG_SP, sp)
        return self.cycles - before

    def probe_call(self, function: int | str, on_mark: Callable[[int], None] | None = None) -> None:
        """Mark the next call of ``function`` in the runs that follow without stopping
        them: the counts at its first instruction and at the address it returns to (LR
        there) are kept natively (call_probe()), so a bench job measures its call in one
        run instead of three (stops cost a first run's translations and Python's first
        pass through the stop path). ``on_mark`` is called at each mark, 0 at the entry
        and 1 at the return, from inside the run: what it reads of the machine (a
        device's counters) is as it is there. A call whose return cannot be awaited so (LR
        not a Thumb address: an exception handler's EXC_RETURN) stops the run at the
        entry instead, as ``until`` would (StopReason.UNTIL; ProbeState.STOPPED)."""
        addr = self._resolve(function)
        s = self.core.state
        self._probe_error = None

        def mark(which: int) -> None:
            try:
                if on_mark is not None:
                    on_mark(which)
            except BaseException as exc:  # raised by call_probe(), not lost in the engine's callback
                self._probe_error = exc

        entry = addr & ~1
        self._probe_mark = native.PROBE_MARK(mark)
        s.probe_py = ctypes.cast(self._probe_mark, ctypes.c_void_p).value
        self.core.lib.pk_probe_arm(self.core.state_ref, entry)
        self.core.uc.ctl_remove_cache(entry, entry + 2)  # translated again to call the hook there

    def call_probe(self) -> CallProbe:
        """Where the call probe stands, and its marks (zero where not reached)."""
        if self._probe_error is not None:
            error, self._probe_error = self._probe_error, None
            raise error
        s = self.core.state
        state = {native.PROBE_ENTRY: ProbeState.WAITING, native.PROBE_CALL: ProbeState.IN_CALL,
                 native.PROBE_DONE: ProbeState.DONE, native.PROBE_STOPPED: ProbeState.STOPPED}.get(s.probe_state)
        if state is None:
            raise UsageError("no call probe (probe_call)")
        return CallProbe(state, s.probe_cycles[0], s.probe_insns[0], s.probe_cycles[1], s.probe_insns[1])

    def end_probe(self) -> None:
        """No call probe any more (its blocks keep calling the hook, which does nothing there)."""
        s = self.core.state
        s.probe_state = native.PROBE_OFF
        s.probe_at = native.PK_NONE
        s.probe_py = None
        s.probe_cycles[:] = [0, 0]
        s.probe_insns[:] = [0, 0]
        self._probe_mark = None

    def skip(self, count: int = 1) -> None:
        """Do not execute the ``count`` instructions at PC (in memory order): PC moves
        past them and each counts as one instruction of one cycle, the NOP that an
        instruction-skip fault makes of it (docs/faults.md). Between runs only."""
        pc = self.pc
        for _ in range(count):
            hw = int.from_bytes(self.read_memory(pc, 2), "little")
            pc += 4 if hw >> 11 >= 0x1D else 2
        self.set_reg("pc", pc)
        s = self.core.state
        s.cycles += count
        s.insns += count

    def _resolve(self, where: int | str) -> int:
        if isinstance(where, int):
            return where & ~1
        if self.image is None:
            raise UsageError("no image loaded")
        return self.image.symbol(where).address & ~1

    # ------------------------------------------------------------------ memory
    def read_memory(self, addr: int, size: int) -> bytes:
        """Bytes as the debugger sees them (no side effects on peripherals)."""
        return self.bus.read_memory(addr, size)

    def write_memory(self, addr: int, data: bytes) -> None:
        self.bus.write_memory(addr, data)

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
        addr, size, _ = self.image.extent(name, self.config) if self.image is not None else self._symbol_range(name)
        if size and len(data) > size:
            raise LoadError(f"{len(data)} bytes do not fit in '{name}' ({size} bytes)")
        sec = self.image.section_of(addr)
        if sec is not None and sec.nobits and self.cycles == 0:
            raise LoadError(f"'{name}' is in {sec.name}, which the startup code zeroes at reset: "
                            "give it an initial value (.data) or place it in a no-init section")
        self.write_memory(addr, data)
        if sec is not None and sec.lma != sec.vma:
            self.write_memory(sec.lma + (addr - sec.vma), data)

    # ------------------------------------------------------------------ registers & state
    def reg(self, name: str) -> int:
        return self.core.reg(name)

    def set_reg(self, name: str, value: int) -> None:
        self.core.set_reg(name, value)

    def registers(self) -> dict[str, int]:
        return self.core.registers()

    @property
    def pc(self) -> int:
        return self.core.pc

    @property
    def cycles(self) -> int:
        return self.core.cycles

    @property
    def instructions(self) -> int:
        return self.core.instructions

    @property
    def sleep_cycles(self) -> int:
        return self._loop.sleep_cycles

    @property
    def exceptions_taken(self) -> dict[str, int]:
        """Exception name to count, whether the native path or Python took them."""
        taken = dict(self._exc.taken)
        for exc, count in enumerate(self.core.state.taken):
            if count:
                name = exception_name(exc)
                taken[name] = taken.get(name, 0) + count
        return taken

    @property
    def last_fault(self) -> Fault | None:
        return self._exc.last_fault

    def active_exception(self) -> int:
        return self.core.active_exception()

    def describe(self, addr: int) -> str:
        return self.image.describe(addr) if self.image else f"0x{addr:08x}"

    # ------------------------------------------------------------------ debugging
    @property
    def breakpoints(self) -> set[int]:
        return self._loop.breakpoints

    @property
    def debugger_attached(self) -> bool:
        """When set, BKPT halts the run (reason ``breakpoint``) instead of faulting."""
        return self._loop.debugger_attached

    @debugger_attached.setter
    def debugger_attached(self, value: bool) -> None:
        self._loop.debugger_attached = value

    def add_breakpoint(self, addr: int, condition: Callable[[int, int], bool] | None = None) -> None:
        """Stop ``run()`` before the instruction at ``addr`` executes. With ``condition``,
        only when ``condition(cycle, number)`` is true for that execution (the cycle it
        starts at, its instruction number counted from load): a Python call per pass at
        ``addr``. Resuming from the stop passes it once, as for any breakpoint. An
        address beyond the 32-bit address space is refused before any state changes."""
        if not 0 <= addr <= 0xFFFFFFFF:
            raise UsageError(f"cannot break at 0x{addr:x}: beyond the 32-bit address space")
        self._loop.add_breakpoint(addr, condition)
        self._place_wfi_hooks()
        self._loop.forget_loop_verdicts(within=[(addr & ~1, (addr & ~1) + 2)])

    def remove_breakpoint(self, addr: int) -> None:
        self._loop.remove_breakpoint(addr)
        self._place_wfi_hooks()
        self._loop.forget_loop_verdicts(within=[(addr & ~1, (addr & ~1) + 2)])

    def add_watchpoint(self, where: int | str, size: int | None = None, kind: str = "write") -> Watchpoint:
        """Stop ``run()`` at the instruction that writes (``kind="write"``), reads
        (``"read"``) or does either (``"access"``) to [where, where + size): a symbol
        name watches its object (its ELF size unless ``size`` is given). The stop is
        after that instruction by default (``watchpoint_stop``); ``RunResult.watch``
        says which access it was. Only memory can be watched, not device registers."""
        if isinstance(where, str):
            address, sym_size = self._symbol_range(where)
            size = size if size is not None else (sym_size or 4)
        else:
            address, size = where, size if size is not None else 4
        if not any(r.contains(address, size) for r in self.config.memory.values()):
            raise UsageError(f"cannot watch 0x{address:08x} + {size} bytes: watchpoints cover memory "
                             "(one region of the chip file), not device registers or unmapped space")
        w = self._loop.watch.add(address, size, kind)
        self._loop.forget_loop_verdicts()
        return w

    def remove_watchpoint(self, where: int | str, size: int | None = None, kind: str = "write") -> bool:
        """Remove the watchpoint ``add_watchpoint`` made with the same arguments."""
        if isinstance(where, str):
            address, sym_size = self._symbol_range(where)
            size = size if size is not None else (sym_size or 4)
        else:
            address, size = where, size if size is not None else 4
        return self._loop.watch.remove(address, size, kind)

    @property
    def watchpoints(self) -> list[Watchpoint]:
        return self._loop.watch.all

    @property
    def watchpoint_stop(self) -> str:
        """``"after"`` (default): a watchpoint stops with the access done and PC at the
        next instruction. ``"before"``: PC at the accessing instruction, which has not
        executed (what gdb expects on ARM: it steps over it itself); resuming runs it
        without stopping again."""
        return "after" if self._loop.watch_after else "before"

    @watchpoint_stop.setter
    def watchpoint_stop(self, value: str) -> None:
        if value not in ("after", "before"):
            raise UsageError(f"watchpoint_stop '{value}': expected 'after' or 'before'")
        self._loop.watch_after = value == "after"

    @property
    def fast_paths(self) -> bool:
        """The native fast paths: exception entry and return, WFI sleep and idle-loop
        fast-forward (excmodel.c, idle.c), and device fast paths (pka_fast.c). Off,
        every one of those goes through the Python models, which specify them: the
        cycle counts are the same either way (tests/test_fast_paths.py)."""
        return self.core.fast_paths

    @fast_paths.setter
    def fast_paths(self, on: bool) -> None:
        self.core.fast_paths = bool(on)
        self.core.state.native_on = int(on)
        for dev in self.peripherals.values():
            state = getattr(dev, "state", None)
            if hasattr(state, "fast_on"):
                state.fast_on = int(on)
            if hasattr(dev, "fast_paths_changed"):
                dev.fast_paths_changed()

    # ------------------------------------------------------------------ observation
    def observe(self, observer: Observer) -> None:
        """Attach an observer (pkasim.core.observe, docs/api.md): from now on it receives
        every call, return, exception, sleep span and device event of the runs."""
        if self.image is None:
            raise UsageError("load an image before observing a run")
        core = self.core
        if core.obs is None:
            core.obs = Observation(core.uc, core.state, self.image, self.config)
            for dev in self.peripherals.values():
                dev.observer = self._observe_device
        core.obs.add(observer)

    def unobserve(self, observer: Observer) -> None:
        """Detach an observer (it gets its last events and close()); with none left,
        the native observer is removed and runs cost nothing extra again."""
        core = self.core
        if core.obs is None or observer not in core.obs.observers:
            return
        core.obs.remove(observer)
        if not core.obs.observers:
            core.obs.close()
            core.obs = None
            for dev in self.peripherals.values():
                dev.observer = None

    def _observe_device(self, kind: int, a: int = 0, b: int = 0, cycle: int | None = None) -> None:
        """A device's event, at the cycle its access happens (inside a block, too)."""
        self.core.observe(kind, a, b, self._now.cycles if cycle is None else cycle)

    def on_instructions(self, begin: int, end: int, callback: Callable[[int, int, int, int], None]) -> object:
        """Call ``callback(address, size, cycle, instruction_number)`` before each
        instruction in [begin, end) executes: ``cycle`` is when it starts, the number
        counts from load. A Python call per instruction, so meant for bounded ranges
        (the Tarmac trace); returns a handle for ``remove_instruction_hook``. While it is
        on, the range is never skipped: loops there are not fast-forwarded (idle.c) and
        a WFI there sleeps after the callback has seen it."""
        core, position = self.core, self._loop.position

        def hook(uc: object, address: int, size: int, _: object) -> None:
            callback(address, size, *position(address))

        handle = core.uc.hook_add(UC_HOOK_CODE, hook, begin=begin, end=max(begin, end - 1))
        self._insn_hooks[handle] = (begin, max(begin + 1, end))
        self._loop.hooked = list(self._insn_hooks.values())
        self._hooks_changed = True
        self._hooks_settled()
        core.flush_translations()  # hooks only reach code translated after them
        return handle

    def remove_instruction_hook(self, handle: object) -> None:
        """Safe inside the callback (the Tarmac trace stops at its limit there): the WFI
        hooks and loop verdicts the range held back come back at the next run or step."""
        self.core.uc.hook_del(handle)
        self.core.memory_hook_placed(handle, False)  # (the time-travel search's watch hooks go this way too)
        if self._insn_hooks.pop(handle, None) is not None:
            self._loop.hooked = list(self._insn_hooks.values())
            self._hooks_changed = True

    def _hooks_settled(self) -> None:
        """Instruction hooks came or went: place the native WFI hooks and decide the
        idle loops again (between runs: neither may change under a running block)."""
        if self._hooks_changed:
            self._hooks_changed = False
            self._place_wfi_hooks()
            self._loop.forget_loop_verdicts()

    def peripheral(self, name: str) -> Peripheral:
        return self.peripherals[name]
