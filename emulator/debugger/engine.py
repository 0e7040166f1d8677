"""The debugger's command engine: one object that both front ends drive (the TUI
and the scripted mode). It executes a command line and returns text lines; it keeps
the breakpoints, watchpoints, the time-travel history and what the views compare
against (registers at the last stop, the cycle count at the last stop).

Execution goes through ``TimeTravel`` (so it can be undone) unless reverse execution
is off. Breakpoints are the machine's (a code hook at each address: nothing runs per
instruction until one is hit); temporary ones (``next``, ``finish``) are added and
removed around one run.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass

from unicorn import UC_HOOK_MEM_WRITE

from pkasim.base.errors import PkasimError, UsageError
from pkasim.core.cpu import REG_NAMES, SPECIAL_REGS
from pkasim.core.machine import Machine
from pkasim.core.results import StopReason
from pkasim.debugger import views
from pkasim.debugger.dwarf import DebugInfo
from pkasim.debugger.expr import Evaluator
from pkasim.debugger.timetravel import DEFAULT_INTERVAL, HISTORY_START, INTERRUPTED, Stop, TimeTravel
from pkasim.debugger.unwind import call_stack

_FORWARD = {"stepi", "si", "step", "s", "next", "n", "nexti", "ni", "finish", "fin", "continue", "c", "cycle",
            "run-to-cycle", "pka-next", "until-pka"}
_ENDS = {StopReason.EXIT.value, StopReason.LOCKUP.value, StopReason.STUCK.value, StopReason.SLEEP_FOREVER.value}
_MOVES = {"stepi", "si", "step", "s", "next", "n", "nexti", "ni", "finish", "fin", "continue", "c", "cycle",
          "run-to-cycle", "pka-next", "until-pka", "reverse-stepi", "rsi", "reverse-step", "rs", "reverse-continue",
          "rc"}
MAX_LINE_STEPS = 1_000_000  # instructions a source-line step may take before it gives up
PKA_SLICE = 200_000  # cycles pka-next runs before it looks back for the start


class DebugError(PkasimError):
    """A command that cannot be done (bad argument, unknown symbol...): one line."""


@dataclass
class Breakpoint:
    number: int
    address: int
    spec: str
    hits: int = 0


@dataclass
class Watchpoint:
    number: int
    address: int
    size: int
    mode: str  # "w", "r" or "rw"
    spec: str
    handle: object = None
    hits: int = 0


class _Forward:
    """Execution without a recorded past (reverse execution off)."""

    def __init__(self, machine: Machine) -> None:
        self.machine = machine

    def _stop(self, r) -> Stop:
        m = self.machine
        return Stop(r.reason.value, m.pc, m.cycles, m.instructions, r.message, r.exit_code, r)

    def step(self) -> Stop:
        return self._stop(self.machine.step())

    def run(self, max_cycles: int | None = None, until: int | None = None,
            interrupt: Callable[[], bool] | None = None) -> Stop:
        return self._stop(self.machine.run(max_cycles=max_cycles, until=until))

    def forget_future(self) -> None:
        pass


def _is_call(machine: Machine, pc: int) -> int:
    """The size of the call instruction at ``pc`` (BL: 4, BLX Rm: 2), or 0."""
    try:
        hw = int.from_bytes(machine.read_memory(pc, 4), "little")
    except UsageError:
        return 0
    lo, hi = hw & 0xFFFF, hw >> 16
    if lo & 0xF800 == 0xF000 and hi & 0xD000 == 0xD000:
        return 4
    if lo & 0xFF87 == 0x4780:
        return 2
    return 0


def _changed_word(base: int, old: bytes, new: bytes) -> str:
    """The aligned word holding the first changed byte, before and after."""
    diff = next((i for i, (a, b) in enumerate(zip(old, new)) if a != b), None)
    if diff is None:
        return "the value is unchanged"
    lo = diff - (base + diff) % 4 if diff >= (base + diff) % 4 else 0
    hi = min(len(old), lo + 4)
    return (f"0x{base + lo:08x}: old 0x{old[lo:hi][::-1].hex()} new 0x{new[lo:hi][::-1].hex()}")


class Debugger:
    """Commands over one machine with a loaded image."""

    def __init__(self, machine: Machine, *, reverse: bool = True, interval_cycles: int = DEFAULT_INTERVAL) -> None:
        if machine.image is None:
            raise UsageError("load an image before debugging it")
        self.machine = machine
        machine.debugger_attached = True
        self.info = DebugInfo(machine.image.path)
        self.tt: TimeTravel | None = TimeTravel(machine, interval_cycles) if reverse else None
        self.exec = self.tt if self.tt is not None else _Forward(machine)
        self.breakpoints: dict[int, Breakpoint] = {}
        self.watchpoints: dict[int, Watchpoint] = {}
        self._next_number = 1
        self.last_stop: Stop | None = None
        self.stop_cycles = machine.cycles  # the cycle count at the last stop
        self.since_cycles = machine.cycles  # ... and at the stop before it (the views show the difference)
        self.previous_regs = machine.registers()  # the registers at the previous stop
        self.history: list[str] = []
        self._ended: tuple[tuple[int, int], str] | None = None  # where the firmware's run ended, and how
        self._fault_shown = None
        self.evaluate = Evaluator(self._register_value, self._symbol, machine.read_u32, machine.read_memory)
        self.quit = False
        self.memory_view: tuple[int, int, str] | None = None  # (address, unit, format) of the last x
        # Asked between run slices (reverse execution on): True ends the run (the TUI's Ctrl-C).
        self.interrupted: Callable[[], bool] = lambda: False
        self._commands: dict[str, tuple[Callable[[str], list[str]], str]] = {}
        self._register_commands()

    # ------------------------------------------------------------------ entry point
    def execute(self, line: str) -> list[str]:
        """Run one command line; errors come back as one ``error:`` line."""
        line = line.strip()
        if not line or line.startswith("#"):
            return []
        self.history.append(line)
        name, _, arg = line.partition(" ")
        fmt = ""
        if "/" in name:
            name, _, fmt = name.partition("/")
        entry = self._commands.get(name)
        if entry is None:
            return [f"error: unknown command '{name}' (try 'help')"]
        fn = entry[0]
        if name in _FORWARD and self._ended is not None and self._ended[0] == self._position():
            return [f"error: {self._ended[1]}: nothing runs from here (go back with reverse-stepi or "
                    "reverse-continue, or quit)"]
        if name in _MOVES:
            self.previous_regs = self.machine.registers()  # the views mark what this command changes
        try:
            if name in ("x", "print", "p", "output"):
                return fn(f"/{fmt} {arg}" if fmt else arg)
            return fn(arg.strip())
        except (UsageError, DebugError) as exc:
            return [f"error: {exc}"]
        except PkasimError as exc:
            return [f"error: {exc}"]

    def _register_commands(self) -> None:
        table = [
            (("stepi", "si"), self.cmd_stepi, "stepi [N]: execute N instructions (default 1)"),
            (("step", "s"), self.cmd_step, "step [N]: to the next source line, into calls"),
            (("next", "n"), self.cmd_next, "next [N]: to the next source line, over calls"),
            (("nexti", "ni"), self.cmd_nexti, "nexti [N]: one instruction, over calls"),
            (("finish", "fin"), self.cmd_finish, "finish: run until the current function returns"),
            (("continue", "c"), self.cmd_continue, "continue: run until a breakpoint, watchpoint or the end"),
            (("cycle", "run-to-cycle"), self.cmd_cycle, "cycle N: run to the first instruction boundary at or "
                                                         "after cycle N"),
            (("pka-next", "until-pka"), self.cmd_pka_next, "pka-next: run until the next PKA operation starts"),
            (("break", "b"), self.cmd_break, "break SYMBOL | *ADDR | FILE:LINE: stop before that instruction"),
            (("watch",), lambda a: self.cmd_watch(a, "w"), "watch EXPR[:SIZE]: stop after a write there "
                                                          "(EXPR: a symbol watches the whole object)"),
            (("rwatch",), lambda a: self.cmd_watch(a, "r"), "rwatch EXPR[:SIZE]: stop after a read there"),
            (("awatch",), lambda a: self.cmd_watch(a, "rw"), "awatch EXPR[:SIZE]: stop after a read or write"),
            (("delete", "d"), self.cmd_delete, "delete [N...]: remove breakpoints/watchpoints (all without N)"),
            (("info", "i"), self.cmd_info, "info breakpoints|registers|frame|stack|pka|systick|nvic|cycles|"
                                           "history"),
            (("breakpoints",), lambda a: self._list_points(), "breakpoints: list breakpoints and watchpoints"),
            (("print", "p"), self.cmd_print, "print[/x|/d] EXPR: registers, symbols, &sym, *addr, + - * / ..."),
            (("x",), self.cmd_x, "x/NUF ADDR: N units (b h w g) in hex (x), signed (d) or unsigned (u)"),
            (("registers", "regs"), lambda a: views.register_lines(self.machine, self.previous_regs),
             "registers: r0-r12, sp, lr, pc, xPSR flags (* changed since the last stop)"),
            (("backtrace", "bt", "where"), lambda a: views.backtrace(self.machine, self.info),
             "backtrace: the call stack"),
            (("stack",), lambda a: views.stack(self.machine, self._whole(a, "stack N: N words", 1, 4096) if a else 8),
             "stack [N]: N words from SP"),
            (("list", "l"), self.cmd_list, "list: source (or disassembly) around the PC"),
            (("disassemble", "disas"), lambda a: views.disassembly(self.machine, self.machine.pc),
             "disassemble: instructions around the PC"),
            (("pka",), lambda a: views.pka(self.machine), "pka: PKA registers, state and operands in PKA RAM"),
            (("systick",), lambda a: views.systick(self.machine), "systick: SysTick registers"),
            (("nvic",), lambda a: views.nvic(self.machine), "nvic: pending and active exceptions"),
            (("cycles", "time"), lambda a: [views.time_line(self.machine, self.since_cycles)],
             "cycles: the cycle counter, cycles the last command took, modeled time"),
            (("reverse-stepi", "rsi"), self.cmd_reverse_stepi, "reverse-stepi [N]: back N instructions"),
            (("reverse-step", "rs"), self.cmd_reverse_step, "reverse-step: back to the previous source line"),
            (("reverse-continue", "rc"), self.cmd_reverse_continue,
             "reverse-continue: back to the last breakpoint or watchpoint hit"),
            (("help", "h", "?"), self.cmd_help, "help [COMMAND]: this list"),
            (("quit", "q", "exit"), self.cmd_quit, "quit: leave the debugger"),
        ]
        self._help: list[tuple[tuple[str, ...], str]] = []
        for names, fn, text in table:
            for n in names:
                self._commands[n] = (fn, text)
            self._help.append((names, text))

    # ------------------------------------------------------------------ values
    def _register_value(self, name: str) -> int | None:
        name = name.lower()
        if name in REG_NAMES or name in SPECIAL_REGS:
            return self.machine.reg(name)
        if name == "cycles":
            return self.machine.cycles
        return None

    def _symbol(self, name: str) -> tuple[int, int] | None:
        sym = self.machine.image.symbols.get(name)
        if sym is None:
            return None
        return sym.address & ~1 if sym.kind == "func" else sym.address, 0 if sym.kind == "func" else sym.size

    def location_of(self, spec: str) -> int:
        """A breakpoint location: ``*EXPR``, a number, a symbol, or FILE:LINE."""
        spec = spec.strip()
        if not spec:
            raise DebugError("give a location: a symbol, *ADDRESS or FILE:LINE")
        if spec.startswith("*"):
            return self.evaluate(spec[1:]) & ~1
        if ":" in spec:
            file, _, line = spec.rpartition(":")
            if not line.isdigit():
                raise DebugError(f"'{spec}': expected FILE:LINE")
            found = self.info.address_of(file, int(line))
            if found is None:
                raise DebugError(f"no code for {spec} in the line table"
                                 + ("" if self.info.has_lines else " (the image has no line information)"))
            return found[0]
        sym = self.machine.image.symbols.get(spec)
        if sym is not None:
            return sym.address & ~1
        try:
            return self.evaluate(spec) & ~1
        except UsageError:
            raise DebugError(f"no symbol named '{spec}'") from None

    def _position(self) -> tuple[int, int]:
        return (self.machine.instructions, self.machine.cycles)

    # ------------------------------------------------------------------ stops
    def _report(self, stop: Stop) -> list[str]:
        m = self.machine
        self.last_stop = stop
        reason = stop.reason
        head: str
        if reason == StopReason.BREAKPOINT.value:
            bp = next((b for b in self.breakpoints.values() if b.address == stop.pc), None)
            if bp is not None:
                bp.hits += 1
                head = f"Breakpoint {bp.number}, {views.location(m, self.info, stop.pc)}"
            else:
                head = f"Stopped: {stop.message or 'breakpoint'}"
        elif reason == "watchpoint":
            head = self._watch_head(stop)
        elif reason == "pka":
            head = f"PKA operation started: {self._pka_summary()}"
        elif reason == StopReason.EXIT.value:
            head = f"The firmware exited with code {stop.exit_code}"
        elif reason == INTERRUPTED:
            head = "Interrupted"
        elif reason == HISTORY_START:
            head = f"No more history: {stop.message}"
        elif reason in (StopReason.STEP.value, StopReason.UNTIL.value, StopReason.BUDGET.value):
            head = views.location(m, self.info, stop.pc)
        else:
            head = f"Stopped ({reason}): {stop.message}"
        lines = [head]
        fault = m.last_fault
        if fault is not None and fault != self._fault_shown:
            self._fault_shown = fault
            at = f" (address 0x{fault.address:08x})" if fault.address is not None else ""
            lines.append(f"Fault: {fault.cause}{at} at 0x{fault.pc:08x} {fault.where}: {fault.instruction} "
                         f"[{fault.exception}]")
            if fault.registers:
                lines.append("  " + " ".join(f"{k}={v:08x}" for k, v in fault.registers.items()))
        if reason in _ENDS:
            how = {StopReason.EXIT.value: f"the firmware exited with code {stop.exit_code}",
                   StopReason.LOCKUP.value: "the core locked up"}.get(reason, f"the run ended ({reason})")
            self._ended = (self._position(), how)
        if reason not in (StopReason.STEP.value, StopReason.UNTIL.value, StopReason.BUDGET.value) \
                and reason != StopReason.BREAKPOINT.value:
            lines.append(views.location(m, self.info, m.pc))
        src = self.info.line_at(m.pc)
        if src is not None:
            text = self.info.source(src.file)
            if text and 0 < src.line <= len(text):
                lines.append(f"{src.line}\t{text[src.line - 1].strip()}")
        self.since_cycles, self.stop_cycles = self.stop_cycles, m.cycles
        lines.append(views.time_line(m, self.since_cycles))
        return lines

    def _watch_head(self, stop: Stop) -> str:
        hit = stop.result.watch if stop.result is not None else None
        if hit is None:
            return f"Watchpoint: {stop.message}"
        w = hit.watchpoint
        wp = next((x for x in self.watchpoints.values() if (x.address, x.size, self._KINDS[x.mode]) ==
                   (w.address, w.size, w.kind)), None)
        if wp is not None:
            wp.hits += 1
        label = f"Watchpoint {wp.number}: {wp.spec}" if wp is not None else f"Watchpoint at 0x{w.address:08x}"
        text = f"{label}: {hit.access} by {self.machine.describe(hit.pc)}"
        if hit.new is not None:
            text += "; " + _changed_word(w.address, hit.old, hit.new)
        return text

    def _pka_summary(self) -> str:
        from pkasim.peripherals.pka import COMMANDS, Reg

        dev = next((d for d in self.machine.peripherals.values() if hasattr(d, "peek")), None)
        if dev is None:
            return ""
        cr = dev.state.regs[Reg.CR >> 2]
        op = COMMANDS.get(cr >> 8 & 0x3F)
        name = getattr(op, "name", f"opcode {cr >> 8 & 0x3F:#x}")
        return f"{name} LEN {dev.state.regs[Reg.LEN >> 2]} by {self.machine.describe(self.machine.pc)}"

    def _after(self, stop: Stop) -> list[str]:
        return self._report(stop)

    # ------------------------------------------------------------------ execution
    def _count(self, arg: str) -> int:
        n = self.evaluate(arg) if arg else 1
        if n < 1:
            raise DebugError("the count must be at least 1")
        return n

    def _stopped_by_user(self, stop: Stop) -> bool:
        return stop.reason not in (StopReason.STEP.value,)

    def cmd_stepi(self, arg: str) -> list[str]:
        stop = None
        for _ in range(self._count(arg)):
            stop = self.exec.step()
            if self._stopped_by_user(stop):
                break
        return self._after(stop)

    def cmd_nexti(self, arg: str) -> list[str]:
        stop = None
        for _ in range(self._count(arg)):
            stop = self._step_over()
            if self._stopped_by_user(stop):
                break
        return self._after(stop)

    def _step_over(self) -> Stop:
        """One instruction; a call runs until it returns (or something stops it)."""
        m = self.machine
        pc, sp = m.pc, m.reg("sp")
        size = _is_call(m, pc)
        stop = self.exec.step()
        if not size or self._stopped_by_user(stop) or m.pc == pc + size:
            return stop
        return self._run_to(pc + size, sp)

    def _run_to(self, addr: int, sp: int) -> Stop:
        """Run until ``addr`` with SP at or above ``sp`` (the caller's frame: not a
        recursive call's), or until something else stops the run."""
        m = self.machine
        temp = addr not in m.breakpoints
        if temp:
            m.add_breakpoint(addr)
        try:
            while True:
                stop = self.exec.run(interrupt=self.interrupted)
                if stop.reason == StopReason.BREAKPOINT.value and m.pc == addr:
                    if m.reg("sp") >= sp:
                        if not temp:
                            return stop
                        return Stop(StopReason.STEP.value, m.pc, m.cycles, m.instructions, "", None, stop.result)
                    continue
                return stop
        finally:
            if temp:
                m.remove_breakpoint(addr)
                if m._loop._bps.skip == addr:
                    m._loop._bps.skip = None

    def _line_step(self, over: bool) -> Stop:
        m = self.machine
        start = self.info.line_at(m.pc)
        if start is None:
            return self._step_over() if over else self.exec.step()
        depth_sp = m.reg("sp")
        for _ in range(MAX_LINE_STEPS):
            pc = m.pc
            size = _is_call(m, pc)
            if over:
                stop = self._step_over()
            else:
                stop = self.exec.step()
                if size and m.pc != pc + size and self.info.line_at(m.pc) is None:
                    stop = self._run_to(pc + size, m.reg("sp") + 0)  # no source there: step over it
            if self._stopped_by_user(stop):
                return stop
            line = self.info.line_at(m.pc)
            if line is None:
                if m.reg("sp") > depth_sp:  # returned into code without line information
                    return stop
                continue
            if (line.file, line.line) != (start.file, start.line) and self.info.line_starts(m.pc):
                return stop
        raise DebugError(f"no new source line after {MAX_LINE_STEPS:,} instructions")

    def cmd_step(self, arg: str) -> list[str]:
        stop = None
        for _ in range(self._count(arg)):
            stop = self._line_step(over=False)
            if self._stopped_by_user(stop):
                break
        return self._after(stop)

    def cmd_next(self, arg: str) -> list[str]:
        stop = None
        for _ in range(self._count(arg)):
            stop = self._line_step(over=True)
            if self._stopped_by_user(stop):
                break
        return self._after(stop)

    def cmd_finish(self, arg: str) -> list[str]:
        frames = call_stack(self.machine, self.info)
        if len(frames) < 2:
            raise DebugError("'finish' needs a caller: the outermost frame has none")
        caller = frames[1]
        fn = self.machine.describe(self.machine.pc).split("+")[0]
        out = [f"Run till exit from {fn}"]
        stop = self._run_to(caller.pc, caller.sp)
        out += self._after(stop)
        if stop.reason == StopReason.STEP.value:
            out.append(f"Value returned: r0 = 0x{self.machine.reg('r0'):08x} ({self.machine.reg('r0')})")
        return out

    def cmd_continue(self, arg: str) -> list[str]:
        return self._after(self.exec.run(interrupt=self.interrupted))

    def cmd_cycle(self, arg: str) -> list[str]:
        if not arg:
            raise DebugError("cycle N: give the cycle to run to")
        target = self.evaluate(arg)
        m = self.machine
        if target <= m.cycles:
            raise DebugError(f"cycle {target:,} is not ahead (now {m.cycles:,}); use reverse commands to go back")
        stop = None
        margin = 64
        if target - m.cycles > margin:
            stop = self.exec.run(max_cycles=target - margin - m.cycles, interrupt=self.interrupted)
            if stop.reason != StopReason.BUDGET.value:
                return self._after(stop)
        while m.cycles < target:
            stop = self.exec.step()
            if self._stopped_by_user(stop):
                break
        return self._after(stop)

    def cmd_pka_next(self, arg: str) -> list[str]:
        from pkasim.peripherals.pka import Pka

        m = self.machine
        dev = next((d for d in m.peripherals.values() if isinstance(d, Pka)), None)
        if dev is None:
            raise DebugError("this chip has no PKA")
        return self._after(self._until_pka_start(dev))

    def _until_pka_start(self, dev) -> Stop:
        """Stop right after the instruction that starts a PKA operation (a store of
        CR.START). A device register cannot be watched the way memory is (its store
        cannot be taken back), so a write hook on CR notes that instruction's number
        without stopping; the run goes on to the end of its slice and time travel
        brings the machine back to just after it. Without reverse execution it steps."""
        from pkasim.peripherals.pka import CR_START, Reg

        m = self.machine
        core = m.core
        if self.tt is None:
            before = self._pka_ops(dev)
            while True:
                stop = self.exec.step()
                if self._pka_ops(dev) != before:
                    return Stop("pka", m.pc, m.cycles, m.instructions, "a PKA operation started")
                if self._stopped_by_user(stop):
                    return stop
        found: list[tuple[int, int, int]] = []  # (instructions before the block, block start, end)
        exact: list[int] = []
        current = [0]

        def on_write(uc: object, access: int, address: int, size: int, value: int, _: object) -> None:
            # Unicorn's PC is not exact inside a block here: note the block, find the
            # instruction by replaying that block with a code hook over it.
            if value & CR_START and not found:
                st = core.state
                found.append((core.instructions, st.cur_start, st.cur_end))
            if value & CR_START and not exact and current[0]:
                exact.append(current[0])

        cr = dev.base + Reg.CR
        handle = core.uc.hook_add(UC_HOOK_MEM_WRITE, on_write, begin=cr, end=cr + 3)
        core.flush_translations()
        try:
            while not found:
                stop = self.tt.run(max_cycles=PKA_SLICE, interrupt=self.interrupted)
                if not found and stop.reason != StopReason.BUDGET.value:
                    return stop
            before, lo, hi = found[0]

            def on_insn(address: int, size: int, cycle: int, number: int) -> None:
                if number >= before:
                    current[0] = number

            code = m.on_instructions(lo, max(hi, lo + 2), on_insn)
            try:
                head = self.tt.head[0]
                self.tt.goto_instruction(min(before + (hi - lo) // 2 + 1, head))
            finally:
                m.remove_instruction_hook(code)
        finally:
            core.uc.hook_del(handle)
            core.flush_translations()
        if not exact:
            raise DebugError("could not find the instruction that started the PKA operation")
        self.tt.goto_instruction(exact[0] + 1)
        return Stop("pka", m.pc, m.cycles, m.instructions, "a PKA operation started")

    @staticmethod
    def _pka_ops(dev) -> int:
        return sum(dev.operations.values()) + int(dev.state.busy)

    # ------------------------------------------------------------------ watchpoints (the machine's)
    _KINDS = {"w": "write", "r": "read", "rw": "access"}

    def _add_machine_watch(self, addr: int, size: int, mode: str) -> object:
        kind = self._KINDS[mode]
        self.machine.add_watchpoint(addr, size, kind)
        return (addr, size, kind)

    def _remove_machine_watch(self, handle: tuple) -> None:
        self.machine.remove_watchpoint(*handle)

    # ------------------------------------------------------------------ breakpoints
    def cmd_break(self, arg: str) -> list[str]:
        spec = arg or f"*0x{self.machine.pc:x}"
        addr = self.location_of(spec)
        number = self._next_number
        self._next_number += 1
        self.breakpoints[number] = Breakpoint(number, addr, spec)
        self.machine.add_breakpoint(addr)
        if self.machine.pc == addr:
            self.machine._loop._bps.skip = addr  # resuming from here passes it
        return [f"Breakpoint {number} at {views.location(self.machine, self.info, addr)}"]

    def cmd_watch(self, arg: str, mode: str) -> list[str]:
        if not arg:
            raise DebugError("watch EXPR: give a symbol or an address")
        spec, _, size_text = arg.partition(":") if ":" in arg and not arg.strip().endswith(":") else (arg, "", "")
        spec = spec.strip()
        sym = self.machine.image.symbols.get(spec.lstrip("&"))
        if sym is not None and sym.kind != "func":
            addr, size = sym.address, sym.size or 4
        else:
            addr, size = self.evaluate(spec.lstrip("*")) if spec.startswith("*") else self.evaluate(spec), 4
        if size_text:
            size = self.evaluate(size_text)
        if size < 1:
            raise DebugError("a watchpoint covers at least 1 byte")
        handle = self._add_machine_watch(addr, size, mode)
        number = self._next_number
        self._next_number += 1
        self.watchpoints[number] = Watchpoint(number, addr, size, mode, spec, handle)
        kind = {"w": "Watchpoint", "r": "Read watchpoint", "rw": "Access watchpoint"}[mode]
        return [f"{kind} {number}: {spec} (0x{addr:08x}, {size} bytes)"]

    @staticmethod
    def _whole(text: str, what: str, low: int, high: int) -> int:
        """A whole number typed as an argument (decimal or 0x hex), within [low, high];
        DebugError (one error line) for anything else."""
        try:
            value = int(text, 0)
        except ValueError:
            raise DebugError(f"{what}: expected a whole number, got '{text[:40]}'") from None
        if not low <= value <= high:
            raise DebugError(f"{what}: expected {low} to {high}, got {value}")
        return value

    def cmd_delete(self, arg: str) -> list[str]:
        numbers = ([self._whole(n, "delete N...: breakpoint numbers", 0, 1 << 62) for n in arg.split()] if arg
                   else list(self.breakpoints) + list(self.watchpoints))
        out = []
        for n in numbers:
            if n in self.breakpoints:
                bp = self.breakpoints.pop(n)
                if not any(b.address == bp.address for b in self.breakpoints.values()):
                    self.machine.remove_breakpoint(bp.address)
            elif n in self.watchpoints:
                self._remove_machine_watch(self.watchpoints.pop(n).handle)
            else:
                out.append(f"error: no breakpoint or watchpoint number {n}")
        return out or [f"Deleted {len(numbers)}"]

    def _list_points(self) -> list[str]:
        if not self.breakpoints and not self.watchpoints:
            return ["No breakpoints or watchpoints."]
        out = ["Num  Type        Address     Hits  What"]
        for bp in self.breakpoints.values():
            out.append(f"{bp.number:<4} breakpoint  0x{bp.address:08x}  {bp.hits:<4}  "
                       f"{views.location(self.machine, self.info, bp.address)}")
        for wp in self.watchpoints.values():
            kind = {"w": "watch", "r": "rwatch", "rw": "awatch"}[wp.mode]
            out.append(f"{wp.number:<4} {kind:<11} 0x{wp.address:08x}  {wp.hits:<4}  {wp.spec} ({wp.size} bytes)")
        return out

    # ------------------------------------------------------------------ data
    def cmd_print(self, arg: str) -> list[str]:
        fmt = ""
        if arg.startswith("/"):
            fmt, _, arg = arg[1:].partition(" ")
        value = self.evaluate(arg)
        if fmt == "x":
            return [f"{arg.strip()} = 0x{value & 0xFFFFFFFF if value >= 0 else value & 0xFFFFFFFF:x}"]
        if fmt == "d":
            return [f"{arg.strip()} = {value}"]
        return [f"{arg.strip()} = {value} (0x{value & 0xFFFFFFFF:08x})" if -(1 << 31) <= value < 1 << 32
                else f"{arg.strip()} = {value} (0x{value:x})"]

    def cmd_x(self, arg: str) -> list[str]:
        fmt = ""
        if arg.startswith("/"):
            fmt, _, arg = arg[1:].partition(" ")
        count, unit, style = 1, 4, "x"
        digits = "".join(ch for ch in fmt if ch.isdigit())
        if digits:
            count = int(digits)
        for ch in fmt:
            if ch in "bhwg":
                unit = {"b": 1, "h": 2, "w": 4, "g": 8}[ch]
            elif ch in "xdu":
                style = ch
        if not arg.strip():
            raise DebugError("x/NUF ADDRESS: give an address")
        if count > 4096:
            raise DebugError("x shows at most 4096 units")
        addr = self.evaluate(arg) & 0xFFFFFFFF
        out = views.memory(self.machine, addr, count, unit, style)
        self.memory_view = (addr, unit, style)  # the TUI's memory pane follows the last x
        return out

    def cmd_list(self, arg: str) -> list[str]:
        pc = self.location_of(arg) if arg else self.machine.pc
        return views.source(self.info, pc, 5) or views.disassembly(self.machine, pc)

    def cmd_info(self, arg: str) -> list[str]:
        what = arg.split()[0] if arg else ""
        table = {
            "breakpoints": self._list_points, "break": self._list_points, "b": self._list_points,
            "watchpoints": self._list_points,
            "registers": lambda: views.register_lines(self.machine, self.previous_regs),
            "frame": lambda: views.backtrace(self.machine, self.info)[:1],
            "stack": lambda: views.backtrace(self.machine, self.info),
            "pka": lambda: views.pka(self.machine), "systick": lambda: views.systick(self.machine),
            "nvic": lambda: views.nvic(self.machine),
            "cycles": lambda: [views.time_line(self.machine, self.since_cycles)],
            "history": self._history_lines,
        }
        keys = [k for k in table if k.startswith(what)] if what else []
        if not keys:
            raise DebugError(f"info {what}: one of {', '.join(k for k in table if len(k) > 1)}")
        return table[keys[0]]()

    def _history_lines(self) -> list[str]:
        if self.tt is None:
            return ["reverse execution is off"]
        tt = self.tt
        return [f"recorded history: {len(tt._ops):,} operations from cycle {tt.oldest[1]:,} to {tt.head[1]:,}; "
                f"{tt.snapshot_count} snapshots, {tt.snapshot_bytes / 1024:,.0f} KiB, "
                f"one every {tt.interval:,} cycles"]

    # ------------------------------------------------------------------ backwards
    def _need_reverse(self) -> TimeTravel:
        if self.tt is None:
            raise DebugError("reverse execution is off (started with --no-reverse)")
        return self.tt

    def cmd_reverse_stepi(self, arg: str) -> list[str]:
        tt = self._need_reverse()
        stop = None
        for _ in range(self._count(arg)):
            stop = tt.reverse_step()
            if stop.reason == HISTORY_START:
                break
        return self._after(stop)

    def cmd_reverse_step(self, arg: str) -> list[str]:
        """Back to the first instruction of the previous source line (as gdb): out of
        the current line, then back through the previous one until the instruction
        before belongs to another line, and forward to that boundary again."""
        tt = self._need_reverse()
        m = self.machine
        start = self._source_line()
        stop = tt.reverse_step()
        if start is None:
            return self._after(stop)
        while stop.reason != HISTORY_START and self._source_line() in (None, start):
            stop = tt.reverse_step()
        line = self._source_line()
        while stop.reason != HISTORY_START:
            here = tt.position
            stop = tt.reverse_step()
            if self._source_line() != line:
                tt.goto_position(here)
                stop = Stop(StopReason.STEP.value, m.pc, m.cycles, m.instructions)
                break
        return self._after(stop)

    def _source_line(self) -> tuple[str, int] | None:
        line = self.info.line_at(self.machine.pc)
        return None if line is None else (line.file, line.line)

    def cmd_reverse_continue(self, arg: str) -> list[str]:
        tt = self._need_reverse()
        watches = [(w.address, w.size, w.mode) for w in self.watchpoints.values()]
        return self._after(tt.reverse_continue(watchpoints=watches))

    # ------------------------------------------------------------------ misc
    def cmd_help(self, arg: str) -> list[str]:
        if arg:
            entry = self._commands.get(arg)
            return [entry[1]] if entry else [f"error: no command '{arg}'"]
        out = []
        for names, text in self._help:
            alias = f" ({', '.join(names[1:])})" if len(names) > 1 else ""
            out.append(f"{text}{alias}")
        return out

    def cmd_quit(self, arg: str) -> list[str]:
        self.quit = True
        return []

    def split(self, line: str) -> list[str]:
        return shlex.split(line)
