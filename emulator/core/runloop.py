"""The run loop: slices of ``emu_start`` between the deadlines of the one clock.

Each slice runs the core until the native hook stops it (a device event is due, an
interrupt became takeable, an access would be unaligned, the budget) or the engine
reports something (an exception return, SVC, BKPT, a bad access, WFI). The loop fires
due events, takes exceptions, sleeps through WFI, and turns every guest error into a
fault for the exception model. It never raises for a guest error: a run ends with a
``RunResult``.
"""

from __future__ import annotations

import ctypes
import logging
import time
from collections.abc import Callable

from unicorn import (
    UC_ERR_EXCEPTION,
    UC_ERR_FETCH_PROT,
    UC_ERR_FETCH_UNMAPPED,
    UC_ERR_INSN_INVALID,
    UC_ERR_READ_PROT,
    UC_ERR_READ_UNMAPPED,
    UC_ERR_WRITE_PROT,
    UC_ERR_WRITE_UNMAPPED,
    UC_HOOK_MEM_INVALID,
    UC_MEM_FETCH_PROT,
    UC_MEM_FETCH_UNMAPPED,
    UC_MEM_READ_PROT,
    UC_MEM_READ_UNMAPPED,
    UC_MEM_WRITE_PROT,
    UC_MEM_WRITE_UNMAPPED,
    Uc,
    UcError,
)
from unicorn import arm_const as A

from pkasim import native
from pkasim.base.clock import Clock
from pkasim.base.errors import PkasimError, UsageError
from pkasim.base.kinds import Kind
from pkasim.core.breakpoints import Breakpoints
from pkasim.core.bus import Bus
from pkasim.core.cpu import NO_DEADLINE, REG_IDS, Core
from pkasim.core.cycles import loop_can_idle, loop_registers, loop_self_contained
from pkasim.core.exceptions import EXC_RETURNS, ExceptionModel, Fault, Lockup
from pkasim.core.results import RunResult, Stop, StopReason
from pkasim.core.settle import Settler
from pkasim.core.watchpoints import OFF, RECORD, STOP, WINDOW_CODE, WatchHit, Watchpoints, data_access
from pkasim.host.semihosting import Exit, Semihosting, call_name
from pkasim.native import engine
from pkasim.peripherals.nvic import SVCALL, Nvic

guest_log = logging.getLogger("pkasim.guest")

CALL_RETURN = 0xF0000000  # an address no config maps: call() returns here
# Cycles between the run loop's ticks: it calls ``progress`` there, and the engine
# returns to Python at least that often, so a signal (Ctrl-C, SIGTERM) is acted on
# within about 0.1 s of wall time even in a loop that makes no other stop. Every run
# takes the same ticks, whether it reports progress or not.
PROGRESS_EVERY = 1 << 24
SH_TRACE = logging.getLogger("pkasim.semihosting")  # semihosting.py's trace of every call
INSN_WFI, INSN_WFE, INSN_YIELD = 0xBF30, 0xBF20, 0xBF10


class RunLoop:
    """Runs one core against its clock, bus and exception model."""

    def __init__(self, core: Core, bus: Bus, exceptions: ExceptionModel, nvic: Nvic, clock: Clock,
                 semihosting: Callable[[], Semihosting], describe: Callable[[int], str],
                 reset: Callable[[], None]) -> None:
        self.core = core
        self.bus = bus
        self.exc = exceptions
        self.nvic = nvic
        self.clock = clock
        self.semihosting = semihosting
        self.describe = describe
        self.reset = reset
        self.clock_hz = clock.hz
        self._settler = Settler(core)
        self._bps = Breakpoints(core, self._on_breakpoint, self.position)
        self.watch = Watchpoints(core, self._on_watch, bus.ram_page_host)
        self.watch_after = True  # a watchpoint stops after the accessing instruction (else before it)
        self.last_watch: WatchHit | None = None  # the hit the last run() or step() stopped at or saw
        self.debugger_attached = False  # BKPT halts instead of faulting
        self._py_stop: tuple | None = None
        self._mem_fault: tuple[str, int] | None = None
        self._mem_fault_pc: int | None = None  # the instruction that made it (a data access)
        self._progress: Callable[[int], None] | None = None
        self.settle = self._settler.settle
        self.calling = False  # Machine.call() is running: a fetch from CALL_RETURN is its return
        self._loops: dict[tuple[int, int], int] = {}  # loops decided (idle.c): (key, end) -> start
        self._until: int | None = None  # the present (or last) run's 'until' (idle.c's native verdicts)
        # idle.c decides loops of 16-bit code itself (no stop per new loop) on pkasim's engine
        # only: on the stock wheel a PC written from a hook (a native exception entry) leaves
        # later memory hooks a stale PC until the CPU loop is left (what engine patch 0008
        # fixes), and the verdicts' stops are what left it there: a write to flash would
        # be reported at the wrong instruction. False: every verdict is Python's.
        self.native_verdicts = engine.patched()
        self.hooked: list[tuple[int, int]] = []  # [begin, end) of the Python instruction hooks (Machine.on_instructions)
        self._counting = False  # Unicorn's instruction-count hook is installed (the last emu_start had count > 0)
        # Bounded away from RAM: a memory hook over a page keeps the engine's stores
        # there on its slow path (qemu/accel/tcg/cputlb.c notdirty_write), and RAM
        # (read, write, execute) has no invalid access to report.
        for lo, hi in bus.outside_ram():
            core.uc.hook_add(UC_HOOK_MEM_INVALID, self._on_mem_invalid, begin=lo, end=hi)

    @property
    def sleep_cycles(self) -> int:
        return int(self.core.state.sleep_cycles)

    def _native_next(self) -> int | None:
        at = self.core.lib.pk_native_next(self.core.state_ref)
        return None if at == NO_DEADLINE else at

    def next_event(self) -> int | None:
        """The next device event, Python's clock or a native device's."""
        times = [t for t in (self.clock.next_deadline(), self._native_next()) if t is not None]
        return min(times) if times else None

    def run_due(self) -> None:
        """Fire every device event due now: native devices', then the clock's. Their
        state may have been set from outside (a debugger, a restored snapshot): look
        at it afresh."""
        self.core.lib.pk_native_changed(self.core.state_ref)
        self.core.lib.pk_native_due(self.core.state_ref)
        if self.clock.run_due():
            self.core.state.dev_events += 1  # an idle loop's registers may predate the event (idle.c)

    # ------------------------------------------------------------------ running
    def run(self, max_cycles: int | None, until: int | None,
            progress: Callable[[int], None] | None) -> RunResult:
        budget = self.core.cycles + max_cycles if max_cycles is not None else None
        self._progress = progress
        self._until = until
        if until is not None:
            self.forget_loop_verdicts(until)  # a loop holding 'until' must run, not be skipped
        self._sync_native_verdicts()
        start_wall = time.perf_counter()
        self.last_watch = None
        if until is not None and self.core.pc == until:
            first = self.step()  # already there: leave it before looking for it again
            if first.reason != StopReason.STEP:
                first.wall_seconds = time.perf_counter() - start_wall
                return first
        result = self._loop(budget, until)
        if self.core.obs is not None:
            self.core.obs.stop(self.core.cycles)
        result.wall_seconds = time.perf_counter() - start_wall
        return result

    def result(self, reason: StopReason, *, exit_code: int | None = None, message: str = "",
               lockup: Fault | None = None) -> RunResult:
        return RunResult(reason=reason, exit_code=exit_code, cycles=self.core.cycles,
                         instructions=self.core.instructions, sleep_cycles=self.sleep_cycles, wall_seconds=0.0,
                         clock_hz=self.clock_hz, fault=self.exc.last_fault, lockup=lockup, message=message,
                         watch=self.last_watch)

    def _loop(self, budget: int | None, until: int | None) -> RunResult:
        core = self.core
        next_progress = core.cycles + PROGRESS_EVERY
        try:
            while True:
                self.run_due()
                if not core.sleeping:
                    self.exc.take_pending()
                if budget is not None and core.cycles >= budget:
                    raise Stop(StopReason.BUDGET, f"cycle budget of {budget:,} cycles reached")
                if core.cycles >= next_progress:
                    if self._progress is not None:
                        self._progress(core.cycles)
                    next_progress = core.cycles + PROGRESS_EVERY
                py_next = self.clock.next_deadline()
                if core.sleeping:
                    self._sleep_until(min(x for x in (self.next_event(), budget, next_progress, NO_DEADLINE)
                                          if x is not None))
                    continue
                # Native devices' events fire inside the engine (cyclehook.c pk_native_due):
                # they need no stop, unless the native paths are off.
                events = py_next if core.state.native_on else self.next_event()
                core.state.deadline = min(x for x in (events, budget, next_progress, NO_DEADLINE) if x is not None)
                core.state.py_next = NO_DEADLINE if py_next is None else py_next
                self._execute(until)
                if core.obs is not None and core.obs.full():
                    core.obs.drain()
        except Stop as stop:
            return self.result(stop.reason, exit_code=stop.exit_code, message=stop.message)
        except Lockup as lk:
            self.exc.last_fault = lk.original or lk.fault
            return self.result(StopReason.LOCKUP, message=f"lockup: {lk.fault.cause} at {lk.fault.where}",
                               lockup=lk.fault)

    def _sleep_until(self, deadline: int) -> None:
        if self.nvic.would_wake():
            self.core.sleeping = False
            return
        if self.next_event() is None:
            raise Stop(StopReason.SLEEP_FOREVER,
                       f"{self._sleep_cause()} with no interrupt pending and no event scheduled: "
                       "the core would sleep forever")
        slept = deadline - self.core.cycles
        if slept > 0:
            self.core.state.sleep_cycles += slept
            self.core.observe(Kind.SLEEP, b=slept)
            self.clock.advance_to(deadline)

    def _execute(self, until: int | None) -> None:
        """One emu_start, then handle why it returned."""
        core = self.core
        s = core.state
        s.stop_reason = native.STOP_NONE
        s.split_start = 0xFFFFFFFF  # admits the rest of a split block in this run only
        s.whole_next = native.PK_NONE  # (idle.c) an iteration that straddles a stop is not seen whole
        self._py_stop = None
        self._mem_fault = None
        self._mem_fault_pc = None
        pc = core.pc
        if until is not None:
            core.uc.ctl_remove_cache(until, until + 2)  # 'until' is checked at translation
        try:
            self.emu(pc, until if until is not None else 0xFFFFFFFF)
            while s.stop_reason in (native.STOP_ALIGN_SPLIT, native.STOP_SP_WRITE) and self._split(until):
                self.emu(core.pc, until if until is not None else 0xFFFFFFFF)  # the rest of the block, and on
            error = None
        except UcError as exc:
            error = exc
        pc_now = core.pc
        if error is not None:
            self._handle_error(error, pc_now)
            return
        reason = s.stop_reason
        if reason in (native.STOP_DEADLINE, native.STOP_IRQCHK):
            return
        if self._native_fault(reason):
            return
        if reason == native.STOP_PROBE:  # a probed call whose return cannot be awaited (cyclehook.c probe_mark)
            self.settle(pc_now)
            raise Stop(StopReason.UNTIL, f"reached {self.describe(pc_now)}")
        if reason == native.STOP_LOOPCHK:
            key = s.loop_key  # odd: a loop of several blocks, its code [start, loop_end)
            self._loop_verdict(pc_now, s.loop_end if key & 1 else s.cur_end, until, key)
            return
        if reason == native.STOP_STUCK:
            raise Stop(StopReason.STUCK, f"stuck in an endless loop at {self.describe(pc_now)} since cycle "
                                         f"{s.loop_since:,}; no interrupt can fire")
        if reason == native.STOP_SLEEP:  # the native WFI hook: the block is committed
            core.set_pc(s.wfi_pc + 2)
            if not (until is not None and s.wfi_pc + 2 == until):
                core.sleeping = True
            elif until is not None:
                raise Stop(StopReason.UNTIL, f"reached {self.describe(until)}")
            return
        self._after_stop(pc_now, until)

    def _after_stop(self, pc_now: int, until: int | None) -> None:
        """The run stopped at ``pc_now`` for Python (a breakpoint, a watchpoint, an
        exception the native path hands over...) or reached its end: act on it."""
        core = self.core
        stop = self._py_stop
        if stop is None:
            self.settle(pc_now)
            if self._halfword(pc_now - 2) in (INSN_WFI, INSN_WFE) and not (until is not None and pc_now == until):
                core.sleeping = True
                return
            if until is not None and pc_now == until:
                raise Stop(StopReason.UNTIL, f"reached {self.describe(until)}")
            return
        if stop[0] == "breakpoint":
            self.settle(stop[1])
            self._bps.skip = stop[1]
            raise Stop(StopReason.BREAKPOINT, f"breakpoint at {self.describe(stop[1])}")
        if stop[0] == "check":
            return
        if stop[0] == "watch":
            self._watch_stop()
        if stop[0] == "raise":
            raise stop[1]
        if stop[0] == "reset":
            self.settle(pc_now)
            self.reset()
            return
        _, intno, ipc = stop
        self._handle_intr(intno, ipc & ~1)

    def _handle_intr(self, intno: int, pc: int) -> None:
        if intno == 8:  # exception return: PC holds EXC_RETURN with bit 0 clear
            self.settle(pc)
            self.exc.exception_return(pc | 1)
            return
        if intno == 2:  # SVC: PC is already past it
            self.settle(pc)
            self.nvic.set_pending(SVCALL)
            if self.nvic.next_to_take(self.core.primask()) != SVCALL:
                self.nvic.clear_pending(SVCALL)
                self.exc.fault("SVC executed where SVCall cannot be taken (priority or PRIMASK)", pc - 2)
            return
        if intno == 7:  # BKPT: PC at the instruction
            self.settle(pc)
            hw = int.from_bytes(self.bus.read_memory(pc, 2), "little")
            if hw == 0xBEAB:
                self.core.state.cycles += 1  # BKPT: 1 cycle (table 3-1); the host call takes no modeled time
                self.core.state.insns += 1
                self._semihost(pc)
                return
            if self.debugger_attached:
                raise Stop(StopReason.BREAKPOINT, f"BKPT #{hw & 0xFF} at {self.describe(pc)}")
            self.exc.fault(f"BKPT #{hw & 0xFF} with no debugger attached", pc)
            return
        if intno in (3, 4):  # prefetch / data abort raised as a CPU exception
            if intno == 3 and pc == CALL_RETURN and self.calling:
                self.settle(pc)
                raise Stop(StopReason.RETURNED, "call returned")
            self.settle(pc)
            unaligned = self._unaligned_access(pc) if intno == 4 and self._mem_fault is None else None
            if unaligned is not None:
                # pkasim's engine faults on it itself (ARMv6-M, docs/engine.md): the same
                # fault the native check reports on the stock engine (STOP_ALIGN)
                self.exc.fault(f"unaligned access to 0x{unaligned:08x} (ARMv6-M requires natural alignment)",
                               pc, address=unaligned)
                return
            cause, address = self._mem_fault or (("instruction fetch fault" if intno == 3 else "data access fault"), None)
            if intno == 3 and self._mem_fault is None and self.bus.config.region_at(pc) is None:
                cause, address = "instruction fetch from unmapped address", pc
            self.exc.fault(cause if address is None else f"{cause} 0x{address:08x}", pc, address=address)
            return
        self.settle(pc)
        self.exc.fault(f"unexpected CPU exception {intno}", pc)

    def _unaligned_access(self, pc: int) -> int | None:
        """The address of the word or halfword access the instruction at ``pc`` makes
        unaligned, from the registers as they are before it; None if it makes none."""
        hw = self._halfword(pc)
        if hw is None:
            return None
        core = self.core
        acc = data_access(hw, pc, lambda n: core.rd(A.UC_ARM_REG_SP if n == 13 else REG_IDS[n]))
        if acc is None:
            return None
        address, size, _ = acc
        natural = 2 if size == 2 else 4 if size >= 4 else 1
        return address if address % natural else None

    def _semihost(self, pc: int) -> None:
        core = self.core
        op = core.rd(A.UC_ARM_REG_R0)
        arg = core.rd(A.UC_ARM_REG_R1)
        try:
            result = self.semihosting().call(op, arg)
        except UsageError as exc:
            guest_log.warning("%s at %s: %s", call_name(op), self.describe(pc), exc)
            result = -1
        core.set_pc(pc + 2)
        core.state.prev_valid = 0
        if isinstance(result, Exit):
            raise Stop(StopReason.EXIT, result.describe(), exit_code=result.code)
        core.wr(A.UC_ARM_REG_R0, result & 0xFFFFFFFF)

    def emu(self, begin: int, until: int, count: int = 0) -> None:
        """emu_start; when the hook stopped to have the code write watch extended (the
        block it stopped before has not executed), extend it and go on.

        Starting the engine sets the Thumb bit: a core that left Thumb state (a BX to
        an even address) and was stopped before its next instruction gets the fault
        Unicorn would have raised there instead of a silent restart.

        ``count`` stops after that many instructions through a code hook Unicorn adds
        on the first counting start and drops (flushing every block) on the next start
        without a count. Blocks translated before the hook was added do not call it
        (unicorn issue #2200): a step after a run would execute a cached block, or a
        whole loop of them, to its end. So the first counting start after a run
        flushes the translated blocks (not the code cache: costs do not change); the
        steps that follow translate with the hook, and the next run costs one flush
        either way (Unicorn's own)."""
        core = self.core
        s = core.state
        while True:
            if not core.rd(A.UC_ARM_REG_XPSR) & (1 << 24):
                raise UcError(UC_ERR_INSN_INVALID)
            if count and not self._counting:
                core.uc.ctl_flush_tb()
            self._counting = count > 0
            s.limit = s.limit_inline = 0  # counted mode: the first block start looks at everything
            if s.stop_reason == native.STOP_WATCH:  # noted while not running (a fetch fill, watchwindow.c)
                s.stop_reason = native.STOP_NONE
                if s.watch_region == WINDOW_CODE:
                    self.watch.code_fetched()
            # semihosting's console output natively (excmodel.c), but not while a
            # debugger or a count steps through it, or each call is traced (-vv):
            # Python's path stops there
            s.sh_native = 0 if count or self.debugger_attached or SH_TRACE.isEnabledFor(logging.DEBUG) else 1
            try:
                core.uc.emu_start(begin | 1, until, count=count)
            finally:
                if s.sh_len:
                    self._console_drain()
            error, self.bus.callback_error = self.bus.callback_error, None
            if error is not None:  # a device model raised in a C-called access (bus.py)
                raise error
            self.watch.settle()
            if s.stop_reason != native.STOP_WATCH:
                return
            if s.watch_region == WINDOW_CODE:
                self.watch.code_fetched()  # code runs from a watched page: memory hooks there
            else:
                core.code.watch(s.watch_region)
            s.stop_reason = native.STOP_NONE
            begin = core.pc

    def _console_drain(self) -> None:
        """Write out what the firmware sent to the console natively during the run
        (SYS_WRITEC, SYS_WRITE0: excmodel.c), before anything else reaches it."""
        s = self.core.state
        data = ctypes.string_at(ctypes.addressof(s) + native.PkState.sh_buf.offset, s.sh_len)
        s.sh_len = 0
        self.semihosting().console(data)

    def _native_fault(self, reason: int) -> bool:
        """Handle a stop the native hook made before a block because of a fault it
        found there, or an error of its own; False if ``reason`` is none of those."""
        s = self.core.state
        if reason == native.STOP_ALIGN:
            self._fault_at(s.align_pc, f"unaligned access to 0x{s.align_addr:08x} "
                           "(ARMv6-M requires natural alignment)", address=s.align_addr)
            return True
        if reason == native.STOP_UNDEF:
            pc = s.undef_pc
            self._fault_at(pc, f"undefined instruction ({self.bus.instruction_text(pc)}): "
                           "not an ARMv6-M instruction")
            return True
        if reason == native.STOP_NATIVE_ERROR:
            what = "the code cache ran out of memory" if s.native_error == native.PK_NOMEM else \
                f"the code at {self.describe(self.core.pc)} could not be read"
            raise PkasimError(f"cannot go on: {what}")
        return False

    def _split(self, until: int | None) -> bool:
        """The hook stopped before a block whose check needs the block to reach an
        instruction first (docs/cycle-model.md, "Alignment"): an access whose address
        is known only there (STOP_ALIGN_SPLIT), or an instruction that sets SP from a
        register (STOP_SP_WRITE: the core keeps SP bits [1:0] zero). Run the block up
        to that access, or through that instruction and clear SP bits [1:0]; True when
        it got there and the rest of the block may run as part of the same block (no
        event or exception in between, as for the block whole). False when the run
        stopped before for another reason (left in the state for the caller)."""
        core = self.core
        s = core.state
        start = core.pc
        target = s.align_pc if s.stop_reason == native.STOP_ALIGN_SPLIT else s.align_addr
        sp_write = s.stop_reason == native.STOP_SP_WRITE
        if target <= start:
            raise PkasimError(f"internal error: alignment split of the block at 0x{start:08x} at 0x{target:08x}")
        stop_at = until if until is not None and start < until <= target else target
        s.stop_reason = native.STOP_NONE
        s.align_skip_start = start
        core.uc.ctl_remove_cache(stop_at, stop_at + 2)  # Unicorn checks 'until' when it translates
        try:
            self.emu(start, stop_at)
        finally:
            s.align_skip_start = 0xFFFFFFFF
            core.uc.ctl_remove_cache(start, stop_at + 2)  # no block translated to end there stays
        if core.pc != stop_at or s.stop_reason != native.STOP_NONE or self._py_stop is not None:
            return False
        if sp_write and stop_at == target:
            for rid in (A.UC_ARM_REG_MSP, A.UC_ARM_REG_PSP):
                core.wr(rid, core.rd(rid) & ~3)
        if stop_at != target:
            return False  # the run's 'until': the caller reports it
        self.settle(target)
        s.split_start = target
        return True

    def _fault_at(self, fault_pc: int, cause: str, *, address: int | None = None) -> None:
        """Run the block up to the faulting instruction, then fault there: cycles and
        registers are those of the instructions before it, as on the core."""
        core = self.core
        s = core.state
        block_start = core.pc
        s.align_skip_start = block_start
        s.deadline = NO_DEADLINE
        s.stop_reason = native.STOP_NONE
        self._py_stop = None
        try:
            if fault_pc != block_start:
                # Unicorn checks 'until' when it translates: drop the cached block first.
                core.uc.ctl_remove_cache(fault_pc, fault_pc + 2)
                self.emu(block_start, fault_pc)
        except UcError as exc:
            s.align_skip_start = 0xFFFFFFFF
            self._handle_error(exc, core.pc)
            return
        s.align_skip_start = 0xFFFFFFFF
        if self._py_stop is None and self._bps.stops_at(fault_pc):
            # A breakpoint on the faulting instruction stops before it, as the core's
            # breakpoint unit would (PC is there: the run went up to it).
            self._py_stop = ("breakpoint", fault_pc)
        if self._py_stop is not None:
            # A breakpoint or watchpoint before the faulting instruction, or on it: the
            # run stops there; the fault comes when it goes on.
            self._after_stop(core.pc, None)
            return
        self.settle(fault_pc)
        core.set_pc(fault_pc)
        self.exc.fault(cause, fault_pc, address=address)

    def _sleep_cause(self) -> str:
        """What put the core to sleep, for the report: the WFI or WFE just executed,
        or else an exception return with SCR.SLEEPONEXIT set (the thread code it would
        return to has not run)."""
        pc = self.core.pc
        hint = self._halfword(pc - 2)
        if hint in (INSN_WFI, INSN_WFE):
            return f"{'WFI' if hint == INSN_WFI else 'WFE'} at {self.describe(pc - 2)}"
        return f"sleep-on-exit (SCR.SLEEPONEXIT) before returning to {self.describe(pc)}"

    def _halfword(self, addr: int) -> int | None:
        """The halfword at ``addr`` if it is memory, else None."""
        data = self.bus.host_bytes(addr, 2)
        return None if data is None else int.from_bytes(data, "little")

    def _handle_error(self, error: UcError, pc: int) -> None:
        code = error.errno
        if code == UC_ERR_FETCH_UNMAPPED and pc == CALL_RETURN and self.calling:
            self.settle(pc)
            raise Stop(StopReason.RETURNED, "call returned")
        if code == UC_ERR_INSN_INVALID:
            core, s = self.core, self.core.state
            hint = self._halfword(pc - 2)
            if s.cur_valid and pc == s.cur_end and pc - 2 >= s.cur_start and hint in (INSN_YIELD, INSN_WFE):
                # Unicorn stops after YIELD and WFE as if they were undefined; on the
                # core YIELD is a NOP and WFE waits like WFI (docs/cycle-model.md).
                self.settle(pc)
                core.sleeping = hint == INSN_WFE
                return
            self.settle(pc)
            xpsr = core.rd(A.UC_ARM_REG_XPSR)
            if not xpsr & (1 << 24):
                # A BX/BLX/POP to an even address: the next instruction faults (INVSTATE).
                core.wr(A.UC_ARM_REG_XPSR, xpsr | 1 << 24)
                self.exc.fault(f"branch to 0x{pc:08x} without the Thumb bit (INVSTATE)", pc)
                return
            self.exc.fault(f"undefined instruction ({self.bus.instruction_text(pc)})", pc)
            return
        mem = self._mem_fault
        if code in (UC_ERR_READ_UNMAPPED, UC_ERR_WRITE_UNMAPPED, UC_ERR_FETCH_UNMAPPED,
                    UC_ERR_READ_PROT, UC_ERR_WRITE_PROT, UC_ERR_FETCH_PROT):
            cause, address = mem if mem else (str(error), None)
            if mem and self._mem_fault_pc is not None and code not in (UC_ERR_FETCH_UNMAPPED, UC_ERR_FETCH_PROT):
                pc = self._mem_fault_pc
                self.core.set_pc(pc)
            self.settle(pc)
            if address is not None:
                cause = f"{cause} 0x{address:08x}"
            self.exc.fault(cause, pc, address=address)
            return
        if code == UC_ERR_EXCEPTION:
            self.settle(pc)
            self.exc.fault("unhandled CPU exception", pc)
            return
        self.settle(pc)
        self.exc.fault(f"emulation error: {error}", pc)

    # ------------------------------------------------------------------ stepping
    def step(self) -> RunResult:
        """Execute exactly one instruction (taking a pending exception counts as one step)."""
        core = self.core
        core.state.native_on = 0  # one instruction, every event through Python
        self.last_watch = None
        self.watch.mode = RECORD  # a step never stops halfway: a watched access is noted
        try:
            result = self._step()
        finally:
            self.watch.mode = STOP
            core.state.native_on = int(core.fast_paths)
            if core.obs is not None:
                core.obs.stop(core.cycles)
        hit = self.watch.take()
        if hit is not None:
            hit.undo = None
            hit.new = bytes(core.uc.mem_read(hit.watchpoint.address, hit.watchpoint.size))
            result.watch = self.last_watch = hit
        return result

    def _step(self) -> RunResult:
        try:
            self.run_due()
            self._sleep_step()
            if self.exc.take_pending():
                return self.result(StopReason.STEP, message="exception entry")
            self._one()
            return self.result(StopReason.STEP)
        except Stop as stop:
            return self.result(stop.reason, exit_code=stop.exit_code, message=stop.message)
        except Lockup as lk:
            return self.result(StopReason.LOCKUP, message=f"lockup: {lk.fault.cause}", lockup=lk.fault)

    def _one(self) -> None:
        """Execute the instruction at PC (no event fires and no exception is taken
        before it: the caller has done that, or is inside a block)."""
        core = self.core
        s = core.state
        s.deadline = NO_DEADLINE
        s.stop_reason = native.STOP_NONE
        s.split_start = 0xFFFFFFFF
        self._py_stop = None
        self._mem_fault = None
        self._mem_fault_pc = None
        pc = core.pc
        self._bps.skip = pc
        try:
            self.emu(pc, 0xFFFFFFFF, count=1)
            if s.stop_reason == native.STOP_PROBE:  # a call probe stopped at the entry (a run's stop): step on
                s.stop_reason = native.STOP_NONE
                self.emu(pc, 0xFFFFFFFF, count=1)
            checked = (native.STOP_ALIGN, native.STOP_UNDEF, native.STOP_ALIGN_SPLIT, native.STOP_SP_WRITE)
            if s.stop_reason in checked and \
                    (s.undef_pc if s.stop_reason == native.STOP_UNDEF else s.align_pc) != pc or \
                    s.stop_reason == native.STOP_SP_WRITE:
                # The check is for a later instruction of the block: this one runs. An
                # instruction that sets SP runs, then SP bits [1:0] are cleared.
                sp_write = s.stop_reason == native.STOP_SP_WRITE and s.align_pc == pc
                s.stop_reason = native.STOP_NONE
                s.align_skip_start = pc
                self.emu(pc, 0xFFFFFFFF, count=1)
                s.align_skip_start = 0xFFFFFFFF
                if sp_write:
                    for rid in (A.UC_ARM_REG_MSP, A.UC_ARM_REG_PSP):
                        core.wr(rid, core.rd(rid) & ~3)
            error = None
        except UcError as exc:
            error = exc
        self._bps.skip = None
        if error is not None:
            self._handle_error(error, core.pc)
        elif self._native_fault(s.stop_reason):
            pass
        elif self._py_stop is not None and self._py_stop[0] == "intr":
            self._handle_intr(self._py_stop[1], self._py_stop[2] & ~1)
        else:
            self.settle(core.pc)
            if core.pc == pc + 2 and self._halfword(pc) == INSN_WFI:
                core.sleeping = True  # as in a run: the next step sleeps until an interrupt wakes the core

    def _sleep_step(self) -> None:
        """A step of a sleeping core sleeps until an interrupt wakes it, as a run
        does (the wake-up and the exception entry or next instruction are one step),
        so stepping and running reach the same cycle counts."""
        core = self.core
        while core.sleeping:
            at = self.next_event()
            self._sleep_until(at if at is not None else NO_DEADLINE)
            self.run_due()

    # ------------------------------------------------------------------ breakpoints
    @property
    def breakpoints(self) -> set[int]:
        return self._bps.addresses

    def add_breakpoint(self, addr: int, condition: Callable[[int, int], bool] | None = None) -> None:
        self._bps.add(addr, condition)

    def position(self, address: int) -> tuple[int, int]:
        """(cycle, instruction number) of the instruction at ``address`` about to execute,
        from a code hook: the committed counts plus the part of the current block before it."""
        core = self.core
        cycle, insns = core.cycles, core.instructions
        s = core.state
        if s.cur_valid and s.cur_start <= address < s.cur_end:
            cost, n = self._settler.cost_before(address)
            cycle, insns = cycle + cost, insns + n
        return cycle, insns

    def remove_breakpoint(self, addr: int) -> None:
        self._bps.remove(addr)

    # ------------------------------------------------------------------ watchpoints
    def _on_watch(self) -> None:
        self._py_stop = ("watch",)
        self.core.uc.emu_stop()

    def _watch_stop(self) -> None:
        """The engine stopped right after the first watched access of the instruction
        at PC (emulator/core/watchpoints.py): put the state back to just before that
        instruction, then stop there or after executing it alone."""
        core = self.core
        hit = self.watch.take()
        self.settle(hit.pc)
        core.state.cycles -= hit.charged  # the instruction runs again (or later) and pays them then
        core.set_pc(hit.pc)
        if hit.undo is not None:
            core.uc.mem_write(*hit.undo)  # memory (never a device): the store is taken back
            hit.undo = None
        if self.watch_after:
            self.watch.mode = OFF
            core.state.native_on = 0
            try:
                self._one()
            finally:
                self.watch.mode = STOP
                core.state.native_on = int(core.fast_paths)
            hit.new = bytes(core.uc.mem_read(hit.watchpoint.address, hit.watchpoint.size))
        else:
            self.watch.skip = (hit.pc, core.instructions)  # resuming runs this instruction once
        self.last_watch = hit
        raise Stop(StopReason.WATCHPOINT, hit.describe(self.describe))

    def _on_breakpoint(self, address: int) -> None:
        self._py_stop = ("breakpoint", address)
        self.core.uc.emu_stop()

    # ------------------------------------------------------------------ hooks (Python, rare)
    def on_interrupt(self, intno: int) -> None:
        """UC_HOOK_INTR cases the native hook (excmodel.c) hands to Python."""
        core = self.core
        uc = core.uc
        pc = core.rd(A.UC_ARM_REG_PC)
        if intno == 8 and (pc | 1) in EXC_RETURNS and core.active_exception() != 0:
            # The common case, served without stopping the run: unstack and go on,
            # unless the return makes another exception takeable (tail-chaining).
            try:
                self.settle(pc & ~1)
                self.exc.exception_return(pc | 1)
            except (Stop, Lockup) as exc:  # a fault while unstacking: let the loop report it
                self._py_stop = ("raise", exc)
                uc.emu_stop()
                return
            if core.sleeping or self.nvic.next_to_take(core.primask()) is not None:
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
        if access not in (UC_MEM_FETCH_UNMAPPED, UC_MEM_FETCH_PROT):
            # The stock wheel's PC is exact here only if no hook wrote PC since this
            # engine start (docs/engine.md, patch 8): find the accessing instruction
            # in the block the native hook recorded, as a watchpoint does.
            self._mem_fault_pc = self.watch.accessing_instruction(uc, address, access in (
                UC_MEM_WRITE_UNMAPPED, UC_MEM_WRITE_PROT))[0]
        return False

    def request_check(self) -> None:
        """The NVIC's state changed: if an exception is now takeable, take it at the
        next block boundary (natively; while stepping, by stopping there)."""
        s = self.core.state
        s.limit = s.limit_inline = 0  # counted mode: the native hook looks at the next block start
        if s.native_on:
            s.irq_check = 1
        elif self.nvic.next_to_take(self.core.primask()) is not None:
            s.deadline = 0

    def on_schedule(self, at: int) -> None:
        """A device scheduled an event: make sure the run stops for it."""
        s = self.core.state
        if at < s.deadline:
            s.deadline = at
            s.limit = s.limit_inline = 0  # counted mode: the native hook looks at the next block start
        if at < s.py_next:
            s.py_next = at

    def _loop_verdict(self, start: int, end: int, until: int | None, key: int) -> None:
        """May the loop whose code is [start, end) be fast-forwarded (idle.c)? Once per
        loop: only loads, arithmetic, compares and branches, nothing a debugger
        watches (a breakpoint, a read watchpoint, or an instruction hook, which must see
        every instruction: time travel's replays stop on one). The answer goes to the
        native table under ``key`` (start for a loop of one block, start | 1 for
        several) and ``end``; the run goes on at ``start``."""
        s = self.core.state
        ok = not (self.breakpoints & set(range(start, end))) and not (until is not None and start <= until < end) \
            and not self.watch.watches_reads and not any(lo < end and start < hi for lo, hi in self.hooked)
        regs = 0
        whole = False
        if ok:
            try:
                code = self.bus.read_memory(start, end - start)
                ok = loop_can_idle(code, start)
                regs = loop_registers(code) if ok else 0
                whole = ok and loop_self_contained(code)
            except UsageError:
                ok = False
        i = (key >> 1) & (native.VERDICTS - 1)
        s.verdict_addr[i] = key
        s.verdict_end[i] = end
        s.verdict[i] = (1 if ok else 2) | (native.VERDICT_PLAIN if self._plain_loop(start, end) else 0) \
            | (native.VERDICT_SELF if whole else 0)
        s.verdict_regs[i] = regs  # the registers its iterations compare (0: all)
        if len(self._loops) < native.VERDICTS:
            self._loops[(key, end)] = start

    def _plain_loop(self, start: int, end: int) -> bool:
        """No direct branch back inside [start, end) but its last instruction: counted
        mode (docs/engine.md) then lets a loop decided not idle run without the hook
        while it stays in that code (an inner loop's back edge would need it)."""
        try:
            code = self.bus.read_memory(start, end - start)
        except UsageError:
            return False
        at = 0
        while at + 2 <= len(code):
            hw = int.from_bytes(code[at:at + 2], "little")
            if hw >> 11 >= 0x1D:
                at += 4
                continue
            off = None
            if hw & 0xF000 == 0xD000 and hw & 0x0F00 < 0x0E00:
                off = ((hw & 0xFF) ^ 0x80) - 0x80
            elif hw & 0xF800 == 0xE000:
                off = ((hw & 0x7FF) ^ 0x400) - 0x400
            if off is not None and 4 + 2 * off <= 0 and at + 2 != len(code):
                return False
            at += 2
        return True

    def _sync_native_verdicts(self) -> None:
        """What idle.c needs to decide a loop of 16-bit code itself, as _loop_verdict would,
        without stopping the run: this run's 'until' and the breakpoints; none of it
        (Python decides every loop) while a read watchpoint or an instruction hook is
        set, or more breakpoints than the native list holds."""
        s = self.core.state
        bps = sorted(self.breakpoints)
        s.verdict_native = int(self.native_verdicts and not self.watch.watches_reads and not self.hooked
                               and len(bps) <= native.NATIVE_BPS)
        until = self._until  # the present run's (the last one's between runs)
        s.until_on, s.until = (1, until) if until is not None else (0, 0)
        if s.verdict_native:
            s.bp_n = len(bps)
            for i, a in enumerate(bps):
                s.bp[i] = a
        else:
            s.bp_n = 0

    def forget_loop_verdicts(self, until: int | None = None, within: list[tuple[int, int]] | None = None) -> None:
        """Code, breakpoints or the run's 'until' changed: decide every loop again.
        The loops seen so far are decided now, from their code as it is now (the
        decision on the code itself is remembered, cycles.loop_can_idle), so the run
        need not stop at each of them to ask again. With ``within`` (address ranges
        [lo, hi) where code or breakpoints changed), only the loops that overlap them."""
        s = self.core.state
        s.loop_start = 0xFFFFFFFF
        if within is not None:
            for lo, hi in within:  # every verdict there, idle.c's own included: unknown again
                self.core.lib.pk_verdicts_forget(self.core.state_ref, lo, hi)
            for (key, end), start in list(self._loops.items()):
                if any(start < hi and lo < end for lo, hi in within):
                    self._loop_verdict(start, end, until, key)
            self._sync_native_verdicts()
            return
        ctypes.memset(s.verdict_addr, 0xFF, ctypes.sizeof(s.verdict_addr))
        ctypes.memset(s.verdict, 0, ctypes.sizeof(s.verdict))
        for (key, end), start in list(self._loops.items()):
            self._loop_verdict(start, end, until, key)
        self._sync_native_verdicts()

    def on_reset_request(self) -> None:
        self._py_stop = ("reset",)
        self.core.uc.emu_stop()
