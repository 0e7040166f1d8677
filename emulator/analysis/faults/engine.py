"""The golden run and the faulted runs (docs/faults.md, "How a fault is run").

``Golden(setup)`` runs the firmware without a fault twice: once at full speed for its
result (and, for a function window, the call's span, from the native observer), then
again from reset to record the window: each instruction's number, address and cycle,
the PKA operations, and whole-machine snapshots (``pkasim.core.snapshot``) at regular
cycle intervals through the window and a few after it. Both runs must agree exactly.

``Injector(golden)`` runs one fault (or a pair, for ``--order 2``): restore the last
snapshot before the fault, run to it (a conditional breakpoint stops before the
instruction with that number), apply it, and run to the end or the budget (3x the
golden run's cycles by default; beyond it the outcome is ``hang``). On long runs,
at the golden snapshots after the fault the machine is compared with the golden one
at the same cycle: equal means the fault was masked (``no-effect``) and the run
stops there.
"""

from __future__ import annotations

import bisect
import hashlib
import io
import json
import os
import tempfile
from array import array
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import cached_property

from pkasim.analysis.faults import models
from pkasim.analysis.faults.models import AFTER, BEFORE, PKA, Injection, Insn, PkaOp, Point
from pkasim.analysis.faults.oracles import Detection, Oracle, RunOutcome, classify, make_oracle, parse_detected
from pkasim.analysis.faults.windows import CallFinder, Span, describe_path, line_ranges, parse_window
from pkasim.analysis.srclines import SourceLines
from pkasim.base.errors import EXIT_BUDGET, EXIT_LOCKUP, PkasimError, UsageError
from pkasim.chip.config import ChipConfig
from pkasim.chip.loader import Image, load_image
from pkasim.core.machine import Machine, RunResult, StopReason
from pkasim.core.snapshot import LogArchive, Snapshot, capture, restore
from pkasim.peripherals.pka import Pka, StartFault

MAX_SNAPSHOTS = 256  # snapshots through a window (the interval grows with the window)
MIN_INTERVAL = 64  # cycles
TAIL_SNAPSHOTS = 4  # snapshots after the window, for the masking check
CHECK_MIN_REMAINING = 50_000  # compare with the golden state only when this many cycles would be saved
MAX_CHECKS = 3  # golden states compared after a fault, at most
IDLE_BREAKPOINTS = 2  # breakpoints left in place between faults (their conditions false)
DEFAULT_BUDGET_FACTOR = 3.0
GOLDEN_MARGIN = 256  # cycles the golden run stops short of the window, at first


class GoldenDidNotFinish(PkasimError):
    """The run without a fault does not end by itself: nothing to compare faults with."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.exit_code = code


class ReplayError(PkasimError):
    """A faulted run could not reach its fault on the golden path: a bug, never a guess."""


@dataclass(frozen=True)
class Setup:
    """What determines a campaign's runs, as plain picklable data (a worker process
    or a Dask worker rebuilds the golden run from it)."""

    elf_path: str
    elf: bytes
    config: ChipConfig
    window: str = "all"
    models: tuple[str, ...] = ("skip",)
    oracles: tuple[str, ...] = ()
    detected: tuple[str, ...] = ()
    loads: tuple[tuple[str, bytes], ...] = ()
    argv: tuple[str, ...] = ()
    budget_factor: float = DEFAULT_BUDGET_FACTOR
    max_cycles: int | None = None
    seed: int = 0
    cwd: str = field(default_factory=os.getcwd)

    @cached_property
    def elf_sha256(self) -> str:
        return hashlib.sha256(self.elf).hexdigest()

    @cached_property
    def chip_sha256(self) -> str:
        """The resolved chip description (every value, whichever file it came from)."""
        desc = asdict(self.config)
        desc.pop("source", None)
        text = json.dumps(desc, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()

    @cached_property
    def setup_key(self) -> str:
        """What a fault's result depends on besides the fault itself: the ELF and chip
        hashes, the inputs, the oracles, the detection rules, the budget, the seed of
        the random words, and the pkasim release. Window and models are not in it: a
        fault is the same fault whichever campaign asks for it."""
        from importlib.metadata import PackageNotFoundError, version

        try:
            release = version("pkasim")
        except PackageNotFoundError:
            release = "unknown"
        what = {"elf": self.elf_sha256, "chip": self.chip_sha256,
                "loads": [(s, hashlib.sha256(d).hexdigest()) for s, d in self.loads], "argv": list(self.argv),
                "oracles": list(self.oracles), "detected": list(self.detected), "budget": self.budget_factor,
                "max_cycles": self.max_cycles, "seed": self.seed, "pkasim": release, "schema": 1}
        return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()

    def elf_file(self) -> str:
        """A path holding exactly these ELF bytes (the given one, or a copy in the
        temporary directory on a worker that does not share the file system)."""
        try:
            with open(self.elf_path, "rb") as fh:
                if hashlib.sha256(fh.read()).hexdigest() == self.elf_sha256:
                    return self.elf_path
        except OSError:
            pass
        folder = os.path.join(tempfile.gettempdir(), "pkasim-faults-elf")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"{self.elf_sha256}.elf")
        if not os.path.exists(path):
            tmp = f"{path}.{os.getpid()}"
            with open(tmp, "wb") as fh:
                fh.write(self.elf)
            os.replace(tmp, path)
        return path


def _reason(r: RunResult) -> str:
    return r.reason.value


def _hardfaults(m: Machine) -> int:
    return m.exceptions_taken.get("HardFault", 0)


class Golden:
    """The golden run of a setup: result, trace of the window, snapshots."""

    def __init__(self, setup: Setup) -> None:
        self.setup = setup
        self.path = setup.elf_file()
        self.window = parse_window(setup.window)
        self.models = models.parse_models(list(setup.models))
        self.oracles: list[Oracle] = [make_oracle(o, setup.cwd) for o in setup.oracles]
        self.detection: Detection = parse_detected(list(setup.detected))
        config = setup.config
        self.image: Image = load_image(self.path, config)
        for name in self.detection.symbols:
            self.image.symbol(name)  # LoadError (65) for an unknown one
        self.stdout, self.stderr = io.BytesIO(), io.BytesIO()
        m = self.machine = Machine(config, stdout=self.stdout, stderr=self.stderr, stdin=None)
        m.load(self.image)
        m.semihosting.argv = [setup.elf_path, *setup.argv]
        for symbol, data in setup.loads:
            m.write_symbol(symbol, data)
        self.pka: Pka | None = next((d for d in m.peripherals.values() if isinstance(d, Pka)), None)
        self.logs = LogArchive()
        self.reset = capture(m, self.logs)
        self.reset.extra["out"] = (0, 0)
        self._lines: SourceLines | None = None
        self._decoded: dict[int, Insn] = {}
        self._where: dict[int, dict] = {}
        self._first_run()
        self._second_run()

    # ------------------------------------------------------------------ the two runs
    def _first_run(self) -> None:
        """At full speed: the result, the budget and the window's span."""
        m, w = self.machine, self.window
        finder = CallFinder(w.name, w.call) if w.kind == "function" else None
        if finder is not None:
            m.observe(finder)
        r = m.run(max_cycles=self.setup.max_cycles)
        if finder is not None:
            m.unobserve(finder)
        if r.reason != StopReason.EXIT:
            code = EXIT_LOCKUP if r.reason == StopReason.LOCKUP else EXIT_BUDGET
            raise GoldenDidNotFinish(f"the run without a fault does not end by itself: "
                                     f"{r.message or r.reason.value}", code)
        self.result = self._outcome(r, self.stdout.getvalue(), self.stderr.getvalue(), final=None)
        self.end_state = capture(m, self.logs)
        self.result.reader = self._golden_read
        self.result.symbols = self._symbol
        self.budget_end = max(int(r.cycles * self.setup.budget_factor), r.cycles + 1)
        self.pka_log = list(self.pka.log) if self.pka is not None else []
        if w.kind == "function":
            if finder.entry is None:
                said = "once" if finder.calls == 1 else f"{finder.calls} times"
                raise UsageError(f"--window {w}: {w.name} is called {said} in the run, not {w.call} times"
                                 if finder.calls else f"--window {w}: {w.name} is never called in the run")
            end = finder.exit or finder.entry._replace(insns=r.instructions, cycle=r.cycles)
            self.span = Span(finder.entry.insns, end.insns - 1, finder.entry.cycle, end.cycle)
        elif w.kind == "cycles":
            if w.lo >= r.cycles:
                raise UsageError(f"--window {w}: the run ends at cycle {r.cycles:,}, before the window starts")
            self.span = Span(0, r.instructions - 1, w.lo, min(w.hi, r.cycles))
        elif w.kind == "lines":
            self.span = Span(0, r.instructions - 1, 0, r.cycles, line_ranges(self.path, w))
        else:
            self.span = Span(0, r.instructions - 1, 0, r.cycles)

    def _second_run(self) -> None:
        """From reset again: to the window, then through it recording the trace and
        taking snapshots, then to the end, which must be the first run's."""
        m, span, w = self.machine, self.span, self.window
        self._restore(self.reset)
        first = self._reach(span.first_cycle, span.first)
        interval = max(MIN_INTERVAL, (span.last_cycle - first.cycles) // MAX_SNAPSHOTS)
        self.snapshots: list[Snapshot] = [first]
        ns, pcs, cycles, nexts = array("Q"), array("I"), array("Q"), array("I")
        by_cycle = w.kind == "cycles"
        holds = span.holds
        lo_n, hi_n = span.first, span.last
        lo_c, hi_c = span.first_cycle, span.last_cycle
        detect = {m.image.symbol(s).address & ~1: s for s in self.detection.symbols}
        state = {"prev": -1, "hit": ""}

        def trace(address: int, size: int, cycle: int, number: int) -> None:
            if state["prev"] >= 0 and number == state["prev"] + 1:
                nexts[-1] = address
            state["prev"] = -1
            if address in detect and not state["hit"]:
                state["hit"] = detect[address]
            inside = lo_c <= cycle <= hi_c if by_cycle else lo_n <= number <= hi_n
            if inside and holds(address):
                ns.append(number)
                pcs.append(address)
                cycles.append(cycle)
                nexts.append(0)
                state["prev"] = number

        handle = m.on_instructions(0, 0xFFFFFFFF, trace)
        tail = 0
        try:
            while True:
                r = m.run(max_cycles=interval)
                if r.reason != StopReason.BUDGET:
                    break
                self.snapshots.append(self._take())
                if m.cycles > span.last_cycle and m.instructions > span.last + 1:
                    tail += 1
                    if tail >= TAIL_SNAPSHOTS:
                        m.remove_instruction_hook(handle)
                        handle = None
                        r = m.run(max_cycles=self.setup.max_cycles)
                        break
        finally:
            if handle is not None:
                m.remove_instruction_hook(handle)
            m.core.flush_translations()
        if state["hit"]:
            raise UsageError(f"--detected symbol={state['hit']}: the run without a fault reaches it")
        again = (_reason(r), r.exit_code, m.cycles, m.instructions, self.stdout.getvalue(), self.stderr.getvalue())
        want = (self.result.reason, self.result.exit_code, self.result.cycles, self.result.instructions,
                self.result.stdout, self.result.stderr)
        if again != want:
            raise ReplayError(f"the golden run is not reproducible: {again[:4]} then {want[:4]}")
        self.ns, self.pcs, self.cycles, self.nexts = ns, pcs, cycles, nexts
        if not ns:
            raise UsageError(f"--window {w}: no instruction of the run falls in it")
        self.snap_insns = [s.instructions for s in self.snapshots]
        self.snap_cycles = [s.cycles for s in self.snapshots]
        self.ops = self._pka_ops()
        for o in self.oracles:
            verdict = _call_oracle(o, self.result, self.result)
            if verdict:
                raise UsageError("an --oracle already holds on the run without a fault: every fault would "
                                 "count as exploitable")

    def _reach(self, cycle: int, number: int) -> Snapshot:
        """The first snapshot: the machine stopped (by the budget: at a block boundary
        of the golden run's own) at or before ``cycle`` and instruction ``number``."""
        m = self.machine
        margin = GOLDEN_MARGIN
        while cycle > margin:
            r = m.run(max_cycles=cycle - margin - m.cycles)
            if m.cycles <= cycle and m.instructions <= number:
                if r.reason != StopReason.BUDGET:
                    raise ReplayError(f"the golden run stopped before the window: {r.message}")
                return self._take()
            self._restore(self.reset)
            margin *= 8
        return self.reset

    def _take(self) -> Snapshot:
        snap = capture(self.machine, self.logs)
        snap.extra["out"] = (len(self.stdout.getvalue()), len(self.stderr.getvalue()))
        snap.extra["regs"] = self.machine.registers()
        return snap

    def _restore(self, snap: Snapshot) -> None:
        restore(self.machine, snap)
        out, err = snap.extra["out"]
        gold_out, gold_err = (self.result.stdout, self.result.stderr) if hasattr(self, "result") else (b"", b"")
        for stream, golden, n in ((self.stdout, gold_out, out), (self.stderr, gold_err, err)):
            stream.seek(0)
            stream.truncate()
            stream.write(golden[:n])

    def _pka_ops(self) -> list[PkaOp]:
        """The PKA operations that start inside the window, each with the instruction
        the run was at (the START's block: docs/pka.md, its time resolution)."""
        out = []
        if not self.ns:
            return out
        lo, hi = self.cycles[0], self.cycles[-1]
        for k, op in enumerate(self.pka_log):
            if not lo <= op.start_cycle <= hi:
                continue
            i = bisect.bisect_right(self.cycles, op.start_cycle) - 1
            if i < 0:
                continue
            if self.span.addresses and not self.span.holds(self.pcs[i]):
                continue
            out.append(PkaOp(k, op.name, op.words, op.start_cycle, self.pcs[i]))
        return out

    # ------------------------------------------------------------------ naming
    def _outcome(self, r: RunResult, out: bytes, err: bytes, final: str | None) -> RunOutcome:
        m = self.machine
        return RunOutcome(final or _reason(r), r.exit_code if r.reason == StopReason.EXIT else None,
                          r.message, m.cycles, m.instructions, out, err, _hardfaults(m))

    def _golden_read(self, address: int, size: int) -> bytes:
        for base, data in self.end_state.memory.items():
            if base <= address and address + size <= base + len(data):
                return data[address - base:address - base + size]
        return self.machine.read_memory(address, size)  # flash: never written by a run

    def _symbol(self, name: str) -> tuple[int, int]:
        sym = self.image.symbol(name)
        return sym.address, sym.size

    def insn(self, pc: int) -> Insn:
        got = self._decoded.get(pc)
        if got is None:
            got = self._decoded[pc] = models.decode(pc, self._code(pc, 4))
        return got

    def _code(self, pc: int, size: int) -> bytes:
        try:
            return self.machine.read_memory(pc, size)
        except PkasimError:
            return self.machine.read_memory(pc, 2)

    def point(self, i: int) -> Point:
        nxt = self.nexts[i]
        return Point(self.ns[i], self.pcs[i], self.cycles[i], nxt or None)

    def index_of(self, n: int) -> int:
        i = bisect.bisect_left(self.ns, n)
        if i >= len(self.ns) or self.ns[i] != n:
            raise UsageError(f"instruction {n:,} is not in the window's trace")
        return i

    def where(self, pc: int) -> dict:
        """function, file, line and disassembly of a code address."""
        got = self._where.get(pc)
        if got is None:
            got = self._where[pc] = self._name(pc)
        return got

    def _name(self, pc: int) -> dict:
        if self._lines is None:
            self._lines = SourceLines(self.path)
        at = self._lines.at(pc)
        desc = self.image.describe(pc)
        return {"function": desc.split("+", 1)[0] if not desc.startswith("0x") else "",
                "symbol": desc, "file": describe_path(at[0]) if at else "", "line": at[1] if at else 0,
                "instruction": self.insn(pc).text}


def _call_oracle(oracle: Oracle, golden: RunOutcome, faulted: RunOutcome) -> bool:
    try:
        return bool(oracle(golden, faulted))
    except PkasimError:
        raise
    except Exception as exc:  # noqa: BLE001 - a plug-in that fails on the golden run cannot be used
        raise UsageError(f"an --oracle fails on the run without a fault: {type(exc).__name__}: {exc}") from None


@dataclass
class _Stop:
    """A breakpoint the injector watches: ``when(number)`` and what to do then."""

    when: Callable[[int], bool]
    action: Callable[[], bool]  # True: end the run here
    once: bool = True


class Injector:
    """Runs faults on the golden run's machine (one at a time)."""

    def __init__(self, golden: Golden) -> None:
        self.g = golden
        self.m = golden.machine
        self._stops: dict[int, list[_Stop]] = {}
        self._patches: list[tuple[int, bytes]] = []
        self._detected = False
        self._second_reached = True
        self._last: tuple | None = None  # the target of the previous fault
        self._targets: dict[Injection, tuple[int, int, int]] = {}
        self._at: tuple[tuple, Snapshot] | None = None  # the machine at a target several faults share

    # ------------------------------------------------------------------ breakpoints
    def _watch(self, pc: int, stop: _Stop) -> None:
        """Stop before the instruction at ``pc`` when ``stop.when(number)``. The
        machine's breakpoint there stays after the fault (with no stops, its condition
        is false) for the next faults, which mostly aim at the same few places: adding
        one costs a retranslation of its block."""
        entries = self._stops.pop(pc, None)
        if entries is None:
            entries = []
            self.m.add_breakpoint(pc, lambda cycle, number, e=entries: any(s.when(number) for s in e))
        self._stops[pc] = entries  # the most recently used last
        entries.append(stop)

    def _unwatch_all(self) -> None:
        for entries in self._stops.values():
            entries.clear()
        while len(self._stops) > IDLE_BREAKPOINTS:
            pc = next(iter(self._stops))
            del self._stops[pc]
            self.m.remove_breakpoint(pc)

    def close(self) -> None:
        """Remove every breakpoint this injector placed."""
        for pc in list(self._stops):
            self.m.remove_breakpoint(pc)
        self._stops.clear()

    def _at_stop(self) -> bool:
        """The run stopped at a watched breakpoint: act; True to end the run."""
        m = self.m
        number = m.instructions
        entries = self._stops.get(m.pc, [])
        end = False
        for s in [s for s in entries if s.when(number)]:
            if s.once and s in entries:
                entries.remove(s)
            end = s.action() or end
        return end

    # ------------------------------------------------------------------ one fault
    def target(self, inj: Injection) -> tuple[int, int, int]:
        """(instruction number, address, cycle) where ``inj`` is applied; for a PKA
        fault (-1, address, start cycle)."""
        got = self._targets.get(inj)
        if got is None:
            if len(self._targets) > 4096:
                self._targets.clear()
            got = self._targets[inj] = self._target(inj)
        return got

    def _target(self, inj: Injection) -> tuple[int, int, int]:
        g = self.g
        if inj.when == PKA:
            op = self._op(inj.op)
            return -1, op.pc, op.start
        p = g.point(g.index_of(inj.n))
        if inj.when == AFTER:
            if p.next_pc is None:
                raise UsageError(f"{inj.key}: the instruction after {inj.n:,} is not in the trace")
            return p.n + 1, p.next_pc, p.cycle
        return p.n, p.pc, p.cycle

    def _op(self, k: int) -> PkaOp:
        for op in self.g.ops:
            if op.k == k:
                return op
        raise UsageError(f"PKA operation {k} is not in the window")

    def _snapshot_index(self, inj: Injection) -> int:
        """The last golden snapshot before ``inj`` is applied."""
        g = self.g
        number, _, cycle = self.target(inj)
        if number >= 0:
            i = bisect.bisect_right(g.snap_insns, number) - 1
        else:
            i = bisect.bisect_right(g.snap_cycles, cycle) - 1
        if i < 0:
            raise ReplayError(f"{inj.key}: no snapshot before it")
        return i

    def _reach(self, number: int, pc: int) -> bool:
        """Run to just before instruction ``number`` (at ``pc``); False if the run ends
        or leaves the golden path first."""
        m = self.m
        if m.instructions == number and m.pc == pc:
            return True
        if m.instructions > number:
            return False
        reached = {"yes": False}

        def hit() -> bool:
            reached["yes"] = True
            return True

        self._watch(pc, _Stop(lambda n: n == number, hit))
        self._run(self.g.budget_end)
        return reached["yes"] and m.instructions == number and m.pc == pc

    def _run(self, until_cycle: int) -> RunResult:
        """Run to ``until_cycle`` (a budget stop), acting on watched breakpoints on
        the way; returns the last RunResult (reason BREAKPOINT when one ended it)."""
        m = self.m
        while True:
            r = m.run(max_cycles=max(1, until_cycle - m.cycles))
            if r.reason == StopReason.BREAKPOINT and self._stops.get(m.pc):
                if self._at_stop():
                    return r
                continue
            return r

    def inject(self, inj: Injection) -> None:
        """Apply ``inj`` to the machine stopped at its target."""
        m, g = self.m, self.g
        model = inj.model
        if model == "none":
            return
        if inj.when == BEFORE:
            p = g.point(g.index_of(inj.n))
            if model == "instr-flip":
                self._patch(p.pc, inj.bit)
                self._watch(p.pc, _Stop(lambda n, at=inj.n: n > at, self._unpatch))
            else:
                m.skip(models.skip_count(model))
            return
        if inj.when == AFTER:
            insn = g.insn(g.point(g.index_of(inj.n)).pc)
            if model == "flag-flip":
                m.set_reg("apsr", m.reg("apsr") ^ (1 << models.FLAGS[inj.flag]))
                return
            value = m.reg(inj.reg)
            if model == "reg-zero":
                value = 0
            elif model == "reg-ones":
                value = 0xFFFFFFFF
            elif model == "reg-flip":
                value ^= 1 << inj.bit
            else:  # load-flip
                width, signed = next((w, s) for r, w, s in insn.loads if r == inj.reg)
                raw = (value & ((1 << width) - 1)) ^ (1 << inj.bit)
                if signed and raw >> (width - 1):
                    raw -= 1 << width
                value = raw & 0xFFFFFFFF if width < 32 else value ^ (1 << inj.bit)
            m.set_reg(inj.reg, value)
            return
        raise UsageError(f"{inj.key}: not an instruction fault")

    def _patch(self, pc: int, bit: int) -> None:
        """Flip ``bit`` of the instruction at ``pc`` in memory (bits 16-31: its second
        halfword), until it is put back."""
        m = self.m
        at = pc + (2 if bit >= 16 else 0)
        old = m.read_memory(at, 2)
        self._patches.append((at, old))
        m.write_memory(at, (int.from_bytes(old, "little") ^ (1 << (bit % 16))).to_bytes(2, "little"))

    def _unpatch(self) -> bool:
        for at, old in reversed(self._patches):
            self.m.write_memory(at, old)
        self._patches.clear()
        for entries in self._stops.values():
            entries[:] = [s for s in entries if s.action != self._unpatch]
        return False

    def _arm_pka(self, injs: list[Injection]) -> None:
        faults = []
        for inj in injs:
            op = self._op(inj.op)
            if inj.model == "pka-skip":
                faults.append(StartFault(op.start, skip=True))
            else:
                faults.append(StartFault(op.start, corrupt=models.corrupt_result(inj, self.g.setup.seed)))
        self.g.pka.arm_fault(*faults)

    def run(self, injs: tuple[Injection, ...]) -> dict:
        """Run one fault (or a pair, applied in time order); the result row."""
        first = injs[0]
        masked = False
        try:
            ordered = self.apply(injs)
            g = self.g
            for s in g.detection.symbols:
                self._watch(g.image.symbol(s).address & ~1, _Stop(lambda n: True, self._detect, once=False))
            r, masked = self._finish()
            self._check_pka(ordered)
            outcome, note = self._classify(r, masked)
        finally:
            self._cleanup()
        return self._row((first, *[i for i in injs if i is not first]), outcome, note, r, masked)

    def apply(self, injs: tuple[Injection, ...], stop_at_pka: bool = False) -> tuple[Injection, ...]:
        """Restore the golden snapshot before the faults and apply them in time order,
        leaving the machine just after the last one that could be applied (a PKA fault
        is armed: it happens at its START; with ``stop_at_pka``, the machine stops at
        the instruction that starts the START's block). The faults, sorted."""
        g = self.g
        injs = tuple(sorted(injs, key=lambda i: (self.target(i)[2], self.target(i)[0])))
        first = self.target(injs[0])
        cached = self._at is not None and self._at[0] == first and len(injs) == 1
        if cached:
            self._restore(self._at[1])  # the machine at this target, kept from the previous fault here
        else:
            self._restore(g.snapshots[min(self._snapshot_index(i) for i in injs)])
        self._detected = False
        self._second_reached = True
        pka = [i for i in injs if i.when == PKA]
        if pka:
            if g.pka is None:
                raise UsageError("a PKA fault model on a chip without a PKA")
            self._arm_pka(pka)
        for inj in injs:
            n, at, _ = self.target(inj)
            if inj.when == PKA:
                if stop_at_pka and inj is injs[-1]:
                    i = bisect.bisect_right(g.cycles, self.target(inj)[2]) - 1
                    self._reach(g.ns[i], g.pcs[i])  # stop where the START's block begins
                continue
            if not self._reach(n, at):
                if inj is injs[0]:
                    raise ReplayError(f"{inj.key}: the run did not reach instruction {n:,} at "
                                      f"{g.image.describe(at)}")
                self._second_reached = False
                break
            if inj is injs[0] and len(injs) == 1 and not cached:
                if self._last == first:  # a second fault here: keep the machine at this point for the next ones
                    self._at = (first, g._take())
                self._last = first
            self.inject(inj)
        return injs

    def _check_pka(self, injs: tuple[Injection, ...]) -> None:
        """After the run: every armed PKA fault fired (the earliest one must have)."""
        g = self.g
        if g.pka is None or not g.pka.faults:
            return
        earliest = injs[0]
        if earliest.when == PKA and any(f.at == self.target(earliest)[2] for f in g.pka.faults):
            raise ReplayError(f"{earliest.key}: the PKA operation {earliest.op} did not start at cycle "
                              f"{self.target(earliest)[2]:,}")
        self._second_reached = False

    def detach(self) -> None:
        """Leave the machine as the faults made it, for a debugger: this injector's
        breakpoints go, an instruction it patched stays patched."""
        self._patches.clear()
        self.close()

    def _finish(self, compare: bool = True) -> tuple[RunResult, bool]:
        """Run to the end, comparing with golden states on the way when that saves
        enough; (last result, masked)."""
        g, m = self.g, self.m
        checks = 0 if compare else MAX_CHECKS
        i = bisect.bisect_right(g.snap_cycles, m.cycles)
        while checks < MAX_CHECKS and i < len(g.snapshots) and not (g.pka is not None and g.pka.faults):
            snap = g.snapshots[i]
            i += 1
            if g.result.cycles - snap.cycles < CHECK_MIN_REMAINING:
                break
            r = self._run(snap.cycles)
            if r.reason != StopReason.BUDGET or self._detected:
                return r, False
            if m.cycles != snap.cycles:
                continue
            checks += 1
            if not self._patches and self._same(snap):
                return r, True
        return self._run(g.budget_end), False

    def _same(self, snap: Snapshot) -> bool:
        """The machine equals the golden one of ``snap`` (same cycle), outputs included."""
        g, m = self.g, self.m
        out, err = snap.extra["out"]
        if g.stdout.getvalue() != g.result.stdout[:out] or g.stderr.getvalue() != g.result.stderr[:err]:
            return False
        if m.instructions != snap.instructions or m.registers() != snap.extra["regs"]:
            return False
        now = capture(m, g.logs)
        if now.memory != snap.memory or now.extra["sleeping"] != snap.extra["sleeping"]:
            return False
        if [(t, e.cancelled) for t, _, e in now.clock_queue] != [(t, e.cancelled) for t, _, e in snap.clock_queue]:
            return False
        for name, saved in snap.devices.items():
            mine = now.devices[name]
            if {k: v for k, v in mine.items() if k not in ("log", "_event") and k[0] != "\0"} != \
                    {k: v for k, v in saved.items() if k not in ("log", "_event") and k[0] != "\0"}:
                return False
        return True

    def _detect(self) -> bool:
        self._detected = True
        return True

    def _classify(self, r: RunResult, masked: bool) -> tuple[str, str]:
        g, m = self.g, self.m
        if masked:
            return "no-effect", "masked"
        final = "detected" if self._detected else None
        faulted = g._outcome(r, g.stdout.getvalue(), g.stderr.getvalue(), final)
        if final is None and r.reason == StopReason.BREAKPOINT:
            faulted.reason = "budget"  # a watched stop cannot end a run: only the budget
        faulted.reader = m.read_memory
        faulted.symbols = g._symbol
        try:
            return classify(g.result, faulted, g.oracles, g.detection)
        finally:
            faulted.reader = None

    def _restore(self, snap: Snapshot) -> None:
        self.g._restore(snap)

    def _cleanup(self) -> None:
        if self._patches:
            self._unpatch()
        self._unwatch_all()
        if self.g.pka is not None and self.g.pka.faults:
            self.g.pka.arm_fault()

    def _row(self, injs: tuple[Injection, ...], outcome: str, note: str, r: RunResult, masked: bool) -> dict:
        g, m = self.g, self.m
        first = injs[0]
        number, pc, cycle = self.target(first)
        where = g.where(pc)
        row = {
            "key": "&".join(i.key for i in injs), "model": "+".join(i.model for i in injs),
            "n": first.n if first.op < 0 else -1, "op": first.op, "cycle": cycle, "pc": pc,
            "function": where["function"], "file": where["file"], "line": where["line"],
            "instruction": where["instruction"], "detail": first.detail, "outcome": outcome,
            "exit_code": None if masked else (r.exit_code if r.reason == StopReason.EXIT else None),
            "reason": "masked" if masked else ("detected" if self._detected else r.reason.value),
            "cycles": g.result.cycles if masked else m.cycles, "note": note,
        }
        if len(injs) > 1:
            row["second"] = injs[1].key
            row["second_reached"] = self._second_reached
        return row


