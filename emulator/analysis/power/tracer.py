"""Taking power traces: one machine, reset to the loaded image before every trace.

A ``Tracer`` builds the chip once, loads the firmware and keeps a snapshot of the
machine right after reset (pkasim.core.snapshot). Each trace puts that snapshot back,
writes the trace's inputs into their symbols (as ``pkasim run --load`` does, before
reset), arms the CPU's instruction hook (cpu.py) on the window's cycles and runs to
the window's end; then it adds the PKA's leakage of the operations it started
(pka.py). No Python runs per instruction.

The window is resolved once, in a reference run with the image's own input values
(``reference``): its first and last cycle, the address executing at each of its
cycles and the operations the PKA ran. Every trace's instructions are hashed with
their cycles (``CpuLeakage.digest``); a trace whose hash differs from the reference's
executed other instructions, or at other cycles, than the reference in the window:
its samples do not line up with the others' (the firmware's timing or control flow
depends on its inputs; ``pkasim ct-check`` finds where), and the campaign says so.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pkasim.analysis.power.cpu import CpuLeakage
from pkasim.analysis.power.pka import add_operations
from pkasim.analysis.windows import CallFinder, Window, line_ranges
from pkasim.base import limits
from pkasim.base.errors import LoadError, PkasimError, UsageError
from pkasim.chip.config import ChipConfig
from pkasim.core.machine import Machine
from pkasim.core.results import RunResult, StopReason
from pkasim.core.snapshot import LogArchive, capture, restore
from pkasim.host.hostfiles import HostDir
from pkasim.peripherals.pka import Pka, Started

MAX_WINDOW_CYCLES = limits.POWER_WINDOW_MAX_CYCLES  # samples per trace (87 ms at 48 MHz)
EXIT_BUDGET, EXIT_LOCKUP = 124, 125


class RunDidNotFinish(PkasimError):
    """A run ended in a way a trace cannot use: a lockup, the budget, a stuck loop."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Setup:
    """What builds a tracer (picklable, so a worker process builds its own)."""

    firmware: str
    config: ChipConfig
    argv: tuple[str, ...] = ()
    host_dir: str | None = None
    budget: int | None = None  # cycles a run to the firmware's exit may take (None: no limit)


@dataclass
class Reference:
    """The window as the reference run executed it."""

    lo: int  # first cycle (inclusive)
    hi: int  # end cycle (exclusive)
    digest: int
    instructions: int
    pcs: np.ndarray  # the address executing at each cycle of the window (0: none)
    operations: list[Started] = field(default_factory=list)  # PKA operations overlapping the window
    run_cycles: int = 0  # cycles of the whole reference run

    @property
    def cycles(self) -> int:
        return self.hi - self.lo


@dataclass
class Trace:
    """One trace's run: its digest and instruction count in the window, the run's end."""

    digest: int
    instructions: int
    result: RunResult
    operations: int


class Tracer:
    """One machine taking power traces of one firmware."""

    def __init__(self, setup: Setup) -> None:
        self.setup = setup
        self.config = setup.config
        m = Machine(setup.config, stdout=io.BytesIO(), stderr=io.BytesIO(), stdin=None)
        self.image = m.load(setup.firmware)
        sh = m.semihosting
        sh.argv = [setup.firmware, *setup.argv]
        if setup.host_dir is not None:
            sh.host_dir = HostDir(Path(setup.host_dir))
        self.machine = m
        self._base = capture(m, LogArchive())
        self.cpu = CpuLeakage(m, setup.config.power)
        pkas = [dev for dev in m.peripherals.values() if isinstance(dev, Pka)]
        self.pka = pkas[0] if pkas else None
        self.operations: list[Started] = []
        if self.pka is not None:
            self.pka.on_start = self.operations.append
        self._targets: dict[str, tuple[int, ...] | None] = {}
        # random number generators (the TRNG): each trace gives them a seed of its own
        self.generators = [dev for dev in m.peripherals.values() if hasattr(dev, "set_seed")]
        self.warm = False  # a run has decided the idle loops (warm_up)

    # ------------------------------------------------------------------ symbols
    def room(self, symbol: str) -> int:
        """Bytes the object ``symbol`` names can take (LoadError, exit 65, if none)."""
        _, room, _ = self.image.extent(symbol, self.config)
        return room

    # ------------------------------------------------------------------ runs
    def _start(self, inputs: dict[str, bytes], seed: int | None = None) -> None:
        m = self.machine
        restore(m, self._base)
        self.operations.clear()
        if seed is not None:
            for dev in self.generators:
                dev.set_seed(seed)
        uc = m.core.uc
        for symbol, data in inputs.items():
            targets = self._targets.get(symbol, False)
            if targets is False:
                targets = self._targets[symbol] = self._plain_targets(symbol)
            if targets is None:
                m.write_symbol(symbol, data)
            else:
                for addr in targets:
                    uc.mem_write(addr, data)

    def _plain_targets(self, symbol: str) -> tuple[int, ...] | None:
        """Where ``Machine.write_symbol`` puts the object's bytes (where it lives, and for
        .data where its initial value is stored), when both are plain memory and no code:
        then a trace writes them directly (a write that may touch code or a device goes
        through ``write_symbol``, which tells the code caches)."""
        m = self.machine
        addr, size, _ = self.image.extent(symbol, self.config)
        sec = self.image.section_of(addr)
        places = [addr] + ([sec.lma + (addr - sec.vma)] if sec is not None and sec.lma != sec.vma else [])
        for at in places:
            if self.config.region_at(at) is None or m.bus.device_at(at) is not None:
                return None
            if any(base < at + size and at < base + len(code) for base, code in self.image.code):
                return None
        return tuple(places)

    def _finish(self, result: RunResult, to_end: bool) -> None:
        if result.reason == StopReason.EXIT or (result.reason == StopReason.BUDGET and not to_end):
            return
        code = EXIT_LOCKUP if result.reason == StopReason.LOCKUP else EXIT_BUDGET
        raise RunDidNotFinish(f"{self.setup.firmware}: the run did not end: {result.message or result.reason.value}",
                              code)

    def trace(self, inputs: dict[str, bytes], lo: int, hi: int, samples: np.ndarray, *,
              to_end: bool = False, pcs: np.ndarray | None = None, seed: int | None = None) -> Trace:
        """Run once with ``inputs`` and add the leakage of cycles [lo, hi) to ``samples``
        (float64, hi - lo long, zeroed by the caller). The run stops at the window's end,
        or with ``to_end`` when the firmware exits (its outputs are then final).
        ``seed`` reseeds the chip's random number generators (the TRNG) for this run, so
        the random numbers the firmware draws (masks, blinding) differ from trace to
        trace as on a chip; None leaves the chip file's seed."""
        self._start(inputs, seed)
        m = self.machine
        self.cpu.arm(lo, hi, samples, pcs)
        try:
            result = m.run(max_cycles=self.setup.budget if to_end else hi)
        finally:
            count = self.cpu.disarm()
        self._finish(result, to_end)
        ops = 0
        if self.pka is not None and self.operations:
            ops = add_operations(samples, lo, self.operations, self.pka.digit_bits, self.pka.timing,
                                 self.config.power.pka)
        return Trace(self.cpu.digest, count, result, ops)

    def warm_up(self, inputs: dict[str, bytes], lo: int, hi: int, seed: int | None = None) -> None:
        """One run to the window's end, its samples thrown away, before a fresh tracer's
        first trace. The machine decides once per loop whether it may fast-forward it
        (idle.c; the verdicts outlive a reset): in the first run a polling loop (the
        PKA's busy wait) runs some iterations while its verdict is pending that later
        runs skip. Its instructions would then differ from the reference run's (taken
        after a run of its own) and the trace would be counted misaligned."""
        self.trace(inputs, lo, hi, np.zeros(hi - lo), seed=seed)
        self.warm = True

    def read(self, symbol: str) -> bytes:
        """The object ``symbol`` names, as the last run left it."""
        return self.machine.read_symbol(symbol)

    # ------------------------------------------------------------------ the window
    def reference(self, window: Window, inputs: dict[str, bytes]) -> Reference:
        """Resolve ``window`` in a run with ``inputs`` (the image's own values for the
        rest), then trace it once to learn its instructions and digest."""
        m = self.machine
        self._start(inputs)
        finder = None
        if window.kind == "function":
            finder = CallFinder(window.name, window.call)
            m.observe(finder)
        try:
            result = m.run(max_cycles=self.setup.budget)
        finally:
            if finder is not None:
                m.unobserve(finder)
        self._finish(result, True)
        total = m.cycles
        if window.kind == "all":
            lo, hi = 0, total
        elif window.kind == "cycles":
            lo, hi = window.lo, min(window.hi + 1, total)
            if lo >= total:
                raise UsageError(f"--window {window}: the run ends at cycle {total:,}, before the window starts")
        elif window.kind == "function":
            if finder.entry is None:
                raise UsageError(f"--window {window}: {window.name} is called {finder.calls} time(s) in the run, "
                                 f"not {window.call}")
            lo = finder.entry.cycle
            hi = finder.exit.cycle if finder.exit is not None else total
        else:
            lo, hi = self._line_span(window, inputs)
        if hi <= lo:
            raise UsageError(f"--window {window}: empty (cycles {lo:,} to {hi:,})")
        if hi - lo > MAX_WINDOW_CYCLES:
            raise UsageError(f"--window {window}: {hi - lo:,} cycles; at most {MAX_WINDOW_CYCLES:,} samples per trace "
                             "(give a narrower window: cycles:A-B, a function, source lines)")
        samples = np.zeros(hi - lo)
        pcs = np.zeros(hi - lo, dtype=np.uint32)
        t = self.trace(inputs, lo, hi, samples, pcs=pcs)
        ops = [op for op in self.operations if op.start < hi and op.start + op.cycles > lo]
        self.warm = True
        return Reference(lo, hi, t.digest, t.instructions, pcs, ops, total)

    def _line_span(self, window: Window, inputs: dict[str, bytes]) -> tuple[int, int]:
        """First and end cycle of the instructions of FILE:L1-L2 in the run."""
        ranges = line_ranges(self.setup.firmware, window)
        m = self.machine
        self._start(inputs)
        seen: list[int] = []
        last: list[tuple[int, int]] = []

        def hit(address: int, size: int, cycle: int, number: int) -> None:
            if not seen:
                seen.append(cycle)
            last[:] = [(cycle, address)]

        handles = [m.on_instructions(lo, hi, hit) for lo, hi in ranges]
        try:
            result = m.run(max_cycles=self.setup.budget)
        finally:
            for h in handles:
                m.remove_instruction_hook(h)
        self._finish(result, True)
        if not seen:
            raise UsageError(f"--window {window}: the run never executes those lines")
        end_cycle, address = last[0]
        cost = _instruction_cycles(m, address)
        return seen[0], end_cycle + cost


def _instruction_cycles(machine: Machine, address: int) -> int:
    """The table cost of the instruction at ``address`` (the end of a lines window)."""
    import ctypes

    from pkasim import native

    data = machine.read_memory(address & ~1, 4)
    hw1, hw2 = int.from_bytes(data[:2], "little"), int.from_bytes(data[2:], "little")
    cfg = machine.config
    rules = native.Rules(cfg.core.muls_cycles, cfg.flash.wait_states, cfg.flash.base, cfg.flash.end)
    insn = native.Insn()
    machine.core.lib.pk_decode(address, hw1, hw2, ctypes.byref(rules), ctypes.byref(insn))
    return max(1, insn.cost)


def check_symbols(tracer: Tracer, symbols: list[str]) -> dict[str, int]:
    """Each symbol's room in bytes; LoadError (exit 65) for one the image lacks, or one
    in .bss (the start-up code would zero what was written before reset)."""
    rooms = {}
    for sym in symbols:
        rooms[sym] = tracer.room(sym)
        addr = tracer.image.symbol(sym).address
        sec = tracer.image.section_of(addr)
        if sec is not None and sec.nobits:
            raise LoadError(f"'{sym}' is in {sec.name}, which the startup code zeroes at reset: give it an initial "
                            "value (.data) so the value written before reset survives")
    return rooms
