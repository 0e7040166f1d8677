"""Stepping backwards: snapshots at intervals, a log of what ran, and exact
re-execution.

The emulator is deterministic, but where a run stops shapes what follows it: device
events fire and interrupts are taken where the core stops (every instruction when
stepping, block boundaries when running; docs/cycle-model.md). So the past is
recorded as the operations that made it, each a ``step()`` or one ``run()`` slice
with its budget, its ``until`` and the position where it stopped, and going back
re-executes exactly those operations from the latest snapshot before the target. A
position is (instructions executed, cycles): every step raises one of the two, so
positions along a history are totally ordered.

A target inside a run (the instruction before the current one, a breakpoint hit
found while searching backwards) is reached by re-executing that run at full speed
to a block boundary a little before it (a budget stop, which changes nothing the
core does) and then with a code hook that stops before the wanted instruction
number (no idle loop is fast-forwarded and no WFI sleeps natively under it, so it
sees every instruction): the state is exactly the one the run passed through.
Breakpoints are lifted while re-executing (a stop at one would split a block); a
backward search sees them through hooks that note each pass without stopping. A
replay that does not land on its recorded position raises ``TimeTravelError``:
never a silently wrong state.

Forward execution through ``step()`` and ``run()`` takes a snapshot when
``interval_cycles`` have passed since the previous one (runs are cut into slices of
that many cycles). Going forward from a point in the past starts a new future: the
recorded one is dropped. While re-executing, the firmware's console output is
discarded (it was printed the first time); host files and console input are outside
the machine and are not rewound.
"""

from __future__ import annotations

import bisect
import io
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from unicorn import UC_HOOK_MEM_READ, UC_HOOK_MEM_WRITE, UC_MEM_WRITE

from pkasim.base.errors import PkasimError
from pkasim.core.machine import Machine
from pkasim.core.results import RunResult, StopReason
from pkasim.core.snapshot import LogArchive, Snapshot, capture, restore

DEFAULT_INTERVAL = 1_000_000  # cycles between snapshots (docs/debugger.md: the cost per interval)
DEFAULT_MAX_SNAPSHOTS = 4096  # beyond it, every other snapshot is dropped
STEPS_PER_SNAPSHOT = 10_000  # also a snapshot after this many steps (re-stepping is slow)
FIRST_MARGIN = 512  # cycles a replay's full-speed part stops short of its target
HISTORY_START = "history-start"
INTERRUPTED = "interrupted"
WATCHPOINT = "watchpoint"

Position = tuple[int, int]  # (instructions, cycles)


class TimeTravelError(PkasimError):
    """A replay did not reproduce the recorded history (a bug, never a guess)."""


@dataclass
class Stop:
    """Where an execution command stopped, and why (``reason`` is a ``StopReason``
    value, ``watchpoint``, or ``history-start`` when going back reached the oldest
    recorded point)."""

    reason: str
    pc: int
    cycles: int
    instructions: int
    message: str = ""
    exit_code: int | None = None
    result: RunResult | None = None

    @property
    def position(self) -> Position:
        return (self.instructions, self.cycles)


@dataclass(frozen=True)
class Op:
    """One recorded forward operation: ``step`` (consecutive steps make one op, each
    step replayed as a step until the op's end), or a ``run`` slice with its absolute
    cycle budget and ``until``; ``insn`` set: the run was cut before that instruction
    number (a stop inside a block: a breakpoint, a watchpoint, a landing)."""

    kind: str
    start: Position
    end: Position
    reason: str
    budget_end: int | None = None
    until: int | None = None
    insn: int | None = None


_BLOCK_STOPS = {StopReason.BUDGET.value, StopReason.UNTIL.value, StopReason.EXIT.value, StopReason.LOCKUP.value,
                StopReason.SLEEP_FOREVER.value, StopReason.STUCK.value, StopReason.RESET.value,
                StopReason.RETURNED.value}


class _InsnStop:
    """A code hook that stops a run before instruction number ``n`` (a Python call
    per instruction: used only for the last stretch of a replay)."""

    def __init__(self, machine: Machine, n: int) -> None:
        self.machine = machine
        self.n = n
        self.handle = None

    def __enter__(self) -> _InsnStop:
        loop = self.machine._loop

        def hook(address: int, size: int, cycle: int, number: int) -> None:
            if number == self.n:
                loop._on_breakpoint(address)

        # The hook covers all code: no WFI sleeps natively and no loop is fast-forwarded
        # meanwhile (Machine.on_instructions), so the hook sees every instruction.
        self.handle = self.machine.on_instructions(0, 0xFFFFFFFF, hook)
        return self

    def __exit__(self, *exc: object) -> None:
        self.machine.remove_instruction_hook(self.handle)
        self.machine.core.flush_translations()  # translate again without the hook


class TimeTravel:
    """A machine with a recorded past. Drive it through ``step``/``run`` (which take
    snapshots and record) and go back with ``reverse_step``/``reverse_continue``."""

    def __init__(self, machine: Machine, interval_cycles: int = DEFAULT_INTERVAL, *,
                 max_snapshots: int = DEFAULT_MAX_SNAPSHOTS) -> None:
        if interval_cycles < 1:
            raise ValueError("interval_cycles must be at least 1")
        self.machine = machine
        self.interval = interval_cycles
        self.max_snapshots = max(2, max_snapshots)
        self._logs = LogArchive()
        self._snaps: list[Snapshot] = []
        self._keys: list[Position] = []
        self._ops: list[Op] = []
        self._starts: list[Position] = []
        self._origin = self.position
        self._steps = 0  # steps since the last snapshot
        self._step_from: Position | None = None  # where the last replayed step started
        self.replays = 0  # re-executions done (for the benchmark and the docs)
        self._take()

    # ------------------------------------------------------------------ snapshots
    @property
    def position(self) -> Position:
        m = self.machine
        return (m.instructions, m.cycles)

    @property
    def snapshot_count(self) -> int:
        return len(self._snaps)

    @property
    def snapshot_bytes(self) -> int:
        """Host memory the snapshots hold (memory images, native records, CPU contexts)."""
        return sum(s.size_bytes() for s in self._snaps)

    @property
    def oldest(self) -> Position:
        return self._origin

    @property
    def head(self) -> Position:
        """The newest recorded position."""
        return self._ops[-1].end if self._ops else self._origin

    def _take(self) -> None:
        pos = self.position
        i = bisect.bisect_left(self._keys, pos)
        if i < len(self._keys) and self._keys[i] == pos:
            return
        self._snaps.insert(i, capture(self.machine, self._logs))
        self._keys.insert(i, pos)
        self._steps = 0
        if len(self._snaps) > self.max_snapshots:
            keep = [0] + list(range(2, len(self._snaps), 2))
            self._snaps = [self._snaps[k] for k in keep]
            self._keys = [self._keys[k] for k in keep]
            self.interval *= 2

    def _snap_at_or_before(self, pos: Position) -> int:
        return max(bisect.bisect_right(self._keys, pos) - 1, 0)

    def forget_future(self) -> None:
        """The machine was changed by hand (a register or memory write) or moved outside
        this object: the history now starts here."""
        self._snaps.clear()
        self._keys.clear()
        self._ops.clear()
        self._starts.clear()
        self._origin = self.position
        self._take()

    # ------------------------------------------------------------------ forward
    def _begin_forward(self) -> None:
        """Before a forward operation: a point in the past starts a new future."""
        pos = self.position
        if pos == self.head:
            pass
        elif not (self.oldest <= pos <= self.head):
            self.forget_future()  # moved outside this object: nothing recorded leads here
        else:
            k = bisect.bisect_right(self._starts, pos) - 1  # the op holding pos
            op = self._ops[k]
            if op.start == pos:
                del self._ops[k:], self._starts[k:]
            else:
                self._ops[k] = replace(op, end=pos, reason="landing", insn=pos[0])
                del self._ops[k + 1:], self._starts[k + 1:]
            cut = bisect.bisect_right(self._keys, pos)
            del self._snaps[cut:], self._keys[cut:]
            self._take()
        last = self._snaps[-1]
        if self.machine.cycles - last.cycles >= self.interval or self._steps >= STEPS_PER_SNAPSHOT:
            self._take()

    def _record(self, op: Op) -> None:
        if op.end != op.start:
            self._ops.append(op)
            self._starts.append(op.start)

    def _stop(self, r: RunResult) -> Stop:
        m = self.machine
        return Stop(r.reason.value, m.pc, m.cycles, m.instructions, r.message, r.exit_code, r)

    def step(self) -> Stop:
        """One instruction (or an exception entry), as ``Machine.step``."""
        self._begin_forward()
        start = self.position
        r = self.machine.step()
        end = self.position
        last = self._ops[-1] if self._ops else None
        if last is not None and last.kind == "step" and last.end == start and self._keys[-1] != start \
                and end != start:
            self._ops[-1] = replace(last, end=end, reason=r.reason.value)  # one more step of the same op
        else:
            self._record(Op("step", start, end, r.reason.value))
        self._steps += 1
        return self._stop(r)

    def run(self, max_cycles: int | None = None, until: int | str | None = None,
            interrupt: Callable[[], bool] | None = None) -> Stop:
        """As ``Machine.run``, in slices of the snapshot interval; ``interrupt`` is asked
        between slices (a user's Ctrl-C) and ends the run there, reason ``interrupted``."""
        m = self.machine
        end = m.cycles + max_cycles if max_cycles is not None else None
        until_addr = m._resolve(until) if until is not None else None
        first = True
        while True:
            self._begin_forward()
            if not first and until_addr is not None and m.pc == until_addr:
                return Stop(StopReason.UNTIL.value, m.pc, m.cycles, m.instructions,
                            f"reached {m.describe(until_addr)}")
            budget_end = self._snaps[-1].cycles + self.interval
            if end is not None:
                budget_end = min(budget_end, end)
            budget_end = max(budget_end, m.cycles + 1)
            start = self.position
            r = m.run(max_cycles=budget_end - m.cycles, until=until_addr)
            first = False
            reason = r.reason.value
            insn = None if reason in _BLOCK_STOPS else m.instructions
            self._record(Op("run", start, self.position, reason, budget_end, until_addr, insn))
            if r.reason == StopReason.BUDGET and (end is None or m.cycles < end):
                if interrupt is not None and interrupt():
                    return Stop(INTERRUPTED, m.pc, m.cycles, m.instructions, "interrupted")
                continue
            return self._stop(r)

    # ------------------------------------------------------------------ re-execution
    @contextmanager
    def _replaying(self) -> Iterator[None]:
        """No breakpoints (a stop would split a block) and no console output (it was
        printed the first time) while re-executing."""
        m = self.machine
        bps = set(m.breakpoints)
        for a in bps:
            m.remove_breakpoint(a)
        watches = list(getattr(m, "watchpoints", []))
        for w in watches:
            m.remove_watchpoint(w.address, w.size, w.kind)
        sh = m._sh
        saved = dict(sh.streams) if sh is not None else None
        if sh is not None:
            sh.streams = {k: io.BytesIO() for k in saved}
        try:
            yield
        finally:
            if sh is not None:
                sh.streams = saved
            for a in bps:
                m.add_breakpoint(a)
            for w in watches:
                m.add_watchpoint(w.address, w.size, w.kind)

    def _restore_for(self, k: int) -> int:
        """Restore the latest snapshot at or before op ``k``'s start; the first op to
        re-execute."""
        i = self._snap_at_or_before(self._ops[k].start if k < len(self._ops) else self.head)
        restore(self.machine, self._snaps[i])
        self.replays += 1
        pos = self.position
        j = bisect.bisect_left(self._starts, pos)
        if pos != self._origin and (j >= len(self._starts) or self._starts[j] != pos):
            raise TimeTravelError(f"no recorded operation starts at snapshot {pos}")
        return j

    def _redo(self, op: Op, stop_insn: int | None = None, stop_cycles: int | None = None,
              stop_pos: Position | None = None) -> None:
        """Re-execute ``op``; with ``stop_insn``, stop before that instruction number
        (at most ``stop_cycles``), inside the op; a step op can also stop at ``stop_pos``."""
        m = self.machine
        if self.position != op.start:
            raise TimeTravelError(f"replay at {self.position}, expected {op.start}")
        if op.kind == "step":
            goal = stop_pos if stop_pos is not None else op.end
            while self.position < goal and (stop_insn is None or m.instructions < stop_insn):
                before = self._step_from = self.position
                m.step()
                if self.position == before or self.position > op.end:
                    raise TimeTravelError(f"replay of steps from {op.start} left the recorded path at "
                                          f"{self.position}")
            if stop_pos is not None and self.position != stop_pos:
                raise TimeTravelError(f"replay of steps reached {self.position}, not {stop_pos}")
            if stop_insn is not None or stop_pos is not None:
                return
        else:
            insn = stop_insn if stop_insn is not None else op.insn
            if insn is None:
                m.run(max_cycles=op.budget_end - m.cycles, until=op.until)
            else:
                self._run_to_insn(op, insn, stop_cycles if stop_cycles is not None else op.end[1])
        if stop_insn is None and self.position != op.end:
            raise TimeTravelError(f"replay of a {op.kind} from {op.start} reached {self.position}, "
                                  f"not {op.end}")

    def _run_to_insn(self, op: Op, insn: int, cycles: int) -> None:
        """Within run ``op``: full speed to a block boundary short of ``cycles``, then
        the instruction hook to stop before instruction number ``insn``."""
        m = self.machine
        margin = FIRST_MARGIN
        snap = capture(m, self._logs)
        first = True
        while True:
            goal = min(cycles - margin, op.budget_end)
            while m.cycles < goal and m.instructions < insn:
                r = m.run(max_cycles=goal - m.cycles, until=op.until if first or m.pc != op.until else None)
                first = False
                if r.reason != StopReason.BUDGET:
                    break
            if m.instructions <= insn:
                break
            restore(m, snap)
            first = True
            margin *= 8
            if margin > cycles - op.start[1]:
                margin = cycles - op.start[1] + 1
        if m.instructions < insn or (m.instructions == insn and self.position < (insn, cycles)):
            # Also when instruction ``insn`` is the next one: an exception entry or a sleep
            # may come before it, and the stop belongs just before the instruction.
            with _InsnStop(m, insn):
                m.run(max_cycles=max(1, op.budget_end - m.cycles),
                      until=op.until if first or m.pc != op.until else None)
        if m.instructions != insn:
            raise TimeTravelError(f"replay of a run from {op.start} did not stop before instruction {insn:,}")

    def goto(self, k: int, stop_insn: int | None = None, stop_cycles: int | None = None,
             stop_pos: Position | None = None) -> None:
        """The machine as it was at the end of op ``k`` (or inside it, before
        instruction number ``stop_insn``, or at ``stop_pos`` in a step op)."""
        with self._replaying():
            j = self._restore_for(k)
            for op in self._ops[j:k]:
                self._redo(op)
            if k < len(self._ops):
                self._redo(self._ops[k], stop_insn, stop_cycles, stop_pos)
        self._land()

    def goto_position(self, pos: Position) -> None:
        """Back (or forward) to a recorded position: an operation's end, or a point
        inside one that re-execution can reach (a step boundary, an instruction number)."""
        self._goto_position(pos)

    def _goto_position(self, pos: Position) -> None:
        if pos == self._origin:
            with self._replaying():
                restore(self.machine, self._snaps[0])
            self._land()
            return
        k = bisect.bisect_right(self._starts, pos) - 1
        op = self._ops[k]
        if pos == op.end:
            self.goto(k)
        elif pos == op.start:
            self.goto(k - 1) if k > 0 else self._goto_position(self._origin)
        elif op.kind == "step":
            self.goto(k, stop_pos=pos)
        else:
            self.goto(k, pos[0], pos[1])
        if self.position != pos:
            raise TimeTravelError(f"replay reached {self.position}, not {pos}")

    def _land(self) -> None:
        """Resuming from a breakpoint's address passes it, as after a forward stop there."""
        m = self.machine
        m._loop._bps.skip = m.pc if m.pc in m.breakpoints else None

    def _here(self, reason: str, message: str = "") -> Stop:
        m = self.machine
        return Stop(reason, m.pc, m.cycles, m.instructions, message)

    # ------------------------------------------------------------------ backward
    def reverse_step(self) -> Stop:
        """Back to the start of the previous instruction: where the last step began
        when a step led here, else just before the last instruction executed (before
        it, not before an exception entry or a sleep that came after it)."""
        cur = self.position
        if not self._ops or cur <= self.oldest or cur > self.head:
            if cur != self.head and cur > self.oldest:
                self.forget_future()
            return self._here(HISTORY_START, "at the start of the recorded history")
        k = bisect.bisect_left([op.end for op in self._ops], cur)  # the op ending at or holding cur
        op = self._ops[k]
        if op.kind == "step":
            self.goto(k, stop_pos=cur)  # once to learn where the last step began
            self._goto_position(self._step_from)
        elif cur[0] - 1 >= op.start[0]:
            self.goto(k, cur[0] - 1, cur[1])
            if self.position >= cur:  # no instruction boundary between op.start and cur
                self._goto_position(op.start)
        elif not self._before_instruction(cur[0] - 1, k):
            self._goto_position(self._origin)
            return self._here(HISTORY_START, "at the start of the recorded history")
        return self._here(StopReason.STEP.value)

    def _before_instruction(self, n: int, k: int) -> bool:
        """Just before instruction number ``n`` executes, found in an op before ``k``
        (op ``k`` only slept or took exception entries before the current position, as
        a run slice that ended asleep, or woke and stopped at a breakpoint): the run
        op that executed it stops before it; a step op, where the step that executed
        it began. False if the history holds no such instruction."""
        j = next((i for i in range(k - 1, -1, -1) if self._ops[i].start[0] <= n < self._ops[i].end[0]), None)
        if j is None:
            return False
        op = self._ops[j]
        if op.kind == "step":
            self.goto(j, stop_insn=n + 1)  # stops right after the step that executed it
            self._goto_position(self._step_from)
        else:
            self.goto(j, n, op.end[1])
        return True

    def reverse_continue(self, breakpoints: Iterable[int] | None = None,
                         watchpoints: Iterable[tuple[int, int, str]] | None = None) -> Stop:
        """Back to the last breakpoint (or watchpoint) hit before the current position,
        or to the start of the history if there is none. ``breakpoints`` defaults to
        the machine's own; ``watchpoints`` are (address, size, "r"|"w"|"rw") and stop
        after the accessing instruction, as forward."""
        m = self.machine
        cur = self.position
        if cur > self.head or cur < self.oldest:
            self.forget_future()
            return self._here(HISTORY_START, "at the start of the recorded history")
        bps = set(m.breakpoints) if breakpoints is None else {a & ~1 for a in breakpoints}
        hits = self._scan(cur, bps, list(watchpoints or ()))
        if not hits:
            self._goto_position(self._origin)
            return self._here(HISTORY_START, "no breakpoint hit earlier in the recorded history")
        pos, reason, message = max(hits)
        self._goto_position(pos)
        return self._here(reason, message)

    def _scan(self, cur: Position, bps: set[int], watches: list[tuple[int, int, str]]) -> list:
        """The last pass at a breakpoint address (the position before it executes) and
        the last watched access (the position after the instruction) before ``cur``,
        found by re-executing the recorded history, one snapshot interval at a time
        from the newest, with hooks that do not stop."""
        m = self.machine
        core = m.core
        hits: list[tuple[Position, str, str]] = []
        blocks: list[tuple[int, int, int]] = []  # watched accesses: (instructions before the block, its range)

        def at_bp(address: int, size: int, cycle: int, number: int) -> None:
            hits.append(((number, cycle), StopReason.BREAKPOINT.value, f"breakpoint at {m.describe(address)}"))

        def on_access(uc: object, access: int, address: int, size: int, value: int, _: object) -> None:
            # Unicorn's PC is not exact inside a block in a memory hook: note the block;
            # _resolve finds the instruction by replaying it under a code hook.
            s = core.state
            pc = core.pc
            lo, hi = (s.cur_start, s.cur_end) if s.cur_valid else (pc, pc + 2)
            if not blocks or blocks[-1] != (core.instructions, lo, hi):
                blocks.append((core.instructions, lo, hi))

        handles = [m.on_instructions(a, a + 2, at_bp) for a in sorted(bps)]
        handles += self._watch_hooks(watches, on_access)
        ends = [op.end for op in self._ops]
        found: list = []
        try:
            seg_end = cur
            while seg_end > self._origin and not found:
                hits.clear()
                blocks.clear()
                k = bisect.bisect_left(ends, seg_end)
                self.goto(k)
                found = [h for h in hits if h[0] < seg_end][-1:]
                noted = list(blocks)
                if noted:
                    for h in handles:
                        m.remove_instruction_hook(h)
                    handles = []
                    hit = self._resolve(k, noted, watches, cur)
                    if hit is not None:
                        found.append(hit)
                    handles = [m.on_instructions(a, a + 2, at_bp) for a in sorted(bps)]
                    handles += self._watch_hooks(watches, on_access)
                seg_end = self._keys[self._snap_at_or_before(self._ops[k].start)]
        finally:
            for h in handles:
                m.remove_instruction_hook(h)
            core.flush_translations()
        return [h for h in found if h[0] < cur]

    def _watch_hooks(self, watches: list[tuple[int, int, str]], fn) -> list[object]:
        core = self.machine.core
        handles = []
        for addr, size, mode in watches:
            kinds = (UC_HOOK_MEM_READ if "r" in mode else 0) | (UC_HOOK_MEM_WRITE if "w" in mode else 0)
            handle = core.uc.hook_add(kinds, fn, begin=addr, end=addr + max(size, 1) - 1)
            core.memory_hook_placed(handle, True, addr, addr + max(size, 1) - 1)
            handles.append(handle)
        core.flush_translations()
        return handles

    def _resolve(self, k: int, blocks: list[tuple[int, int, int]], watches: list[tuple[int, int, str]],
                 cur: Position) -> tuple[Position, str, str] | None:
        """The last watched access in ``blocks`` (noted while re-executing up to op
        ``k``) whose stop, after its instruction, lies before ``cur``: each block visit
        is replayed, newest first, with a code hook over it that numbers its
        instructions exactly."""
        m = self.machine
        for before, lo, hi in reversed(blocks):
            current = [0, 0]  # the instruction executing: its number, its address
            numbers: list[tuple[int, str]] = []

            def on_insn(address: int, size: int, cycle: int, number: int, current: list = current) -> None:
                current[0], current[1] = number, address

            def on_access(uc: object, access: int, address: int, size: int, value: int, _: object,
                          before: int = before, lo: int = lo, span: int = hi - lo, current: list = current,
                          numbers: list = numbers) -> None:
                n, at = current
                st = m.core.state
                in_visit = (st.cur_start == lo) if st.cur_valid else (at == lo)
                if in_visit and m.core.instructions == before and before <= n < before + span:
                    kind = "write" if access == UC_MEM_WRITE else "read"
                    numbers.append((n, f"{kind} of 0x{address:08x}"))  # the gdb server reads the address last

            handles = [m.on_instructions(lo, max(hi, lo + 2), on_insn)] + self._watch_hooks(watches, on_access)
            try:
                self.goto(k)
            finally:
                for h in handles:
                    m.remove_instruction_hook(h)
            for n, what in sorted(set(numbers), reverse=True):
                if n + 1 > cur[0]:
                    continue
                self.goto_instruction(n + 1)
                if self.position < cur:
                    return (self.position, WATCHPOINT, what)
        return None

    def goto_instruction(self, n: int) -> Stop:
        """To the recorded point just before instruction number ``n`` executes (just
        after instruction ``n - 1``; the end of the op that executed it if no
        instruction follows in the history)."""
        if not self._ops or not self.oldest[0] <= n <= self.head[0]:
            raise TimeTravelError(f"instruction {n:,} is not in the recorded history")
        k = next(i for i, op in enumerate(self._ops) if op.start[0] <= n <= op.end[0])
        op = self._ops[k]
        if n == op.start[0] and k > 0 and self._ops[k - 1].end[0] == n:
            k, op = k - 1, self._ops[k - 1]
        if n == op.end[0]:
            self.goto(k)
        elif op.kind == "step":
            self.goto(k, stop_insn=n)
        else:
            self.goto(k, n, op.end[1])
        return self._here(StopReason.STEP.value)
