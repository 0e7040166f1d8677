"""VCD (IEEE 1364 value change dump) of the chip's signals, for GTKWave.

Signals (scope ``chip``):

  core.sleeping        1 while the core sleeps in WFI/WFE
  core.exception[5:0]  the active exception number (IPSR), 0 in Thread mode
  pka.busy             1 while a PKA operation runs
  pka.opcode[5:0]      the running operation's opcode (0 when idle)
  pka.irq              the PKA's interrupt line, pending in the NVIC (1 from the
                       operation's done interrupt until the core takes it)
  pka.done             an event at the cycle each operation finishes
  systick.wrap         an event at each 1 -> 0 step of SysTick
  nvic.irq_pending[31:0]  pending IRQ lines (bit n = IRQn)
  nvic.systick_pending    the SysTick exception pending

VCD time must be a power-of-ten unit, and one cycle at the core clock rarely is, so
the timescale is 1 ps and each change sits at round(cycle * 1e12 / clock_hz): exact
to the picosecond, and in cycle order. The writer is pyvcd's (pinned in setup.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from vcd import VCDWriter

from pkasim.core.observe import Event, Kind, ObservedImage, Observer

SYSTICK, FIRST_IRQ = 15, 16


class VcdWriter(Observer):
    """Collects value changes while the run goes; ``close()`` writes the file."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.info: ObservedImage | None = None
        self.changes: list[tuple[int, int, str, object]] = []  # (cycle, order, signal, value)
        self._order = 0
        self._active: list[int] = []
        self._pending = 0  # bit n: exception n pending
        self._pka_irq: int | None = None
        self._end = 0
        self._now: dict[str, int] = {}

    def start(self, info: ObservedImage) -> None:
        self.info = info
        self._pka_irq = info.irqs.get("pka")

    def _set(self, cycle: int, signal: str, value: object) -> None:
        self.changes.append((cycle, self._order, signal, value))
        self._order += 1

    def _level(self, cycle: int, signal: str, value: int) -> None:
        """A wire or register that only changes when its value does."""
        if self._now.get(signal) != value:
            self._now[signal] = value
            self._set(cycle, signal, value)

    def _pending_changed(self, cycle: int) -> None:
        self._level(cycle, "nvic.irq_pending", (self._pending >> FIRST_IRQ) & 0xFFFFFFFF)
        self._level(cycle, "nvic.systick_pending", (self._pending >> SYSTICK) & 1)
        if self._pka_irq is not None:
            self._level(cycle, "pka.irq", (self._pending >> (FIRST_IRQ + self._pka_irq)) & 1)

    def events(self, batch: Sequence[Event]) -> None:
        for ev in batch:
            kind, cycle = ev.kind, ev.cycle
            if kind == Kind.SLEEP:
                self._set(cycle, "core.sleeping", 1)
                self._set(cycle + ev.b, "core.sleeping", 0)
                self._end = max(self._end, cycle + ev.b)
            elif kind == Kind.EXC_ENTRY:
                self._active.append(ev.a)
                self._level(cycle, "core.exception", ev.a)
                if self._pending >> ev.a & 1:
                    self._pending &= ~(1 << ev.a)
                    self._pending_changed(cycle)
            elif kind == Kind.EXC_RETURN:
                if self._active:
                    self._active.pop()
                self._level(cycle, "core.exception", self._active[-1] if self._active else 0)
            elif kind == Kind.PKA_START:
                self._set(cycle, "pka.busy", 1)
                self._set(cycle, "pka.opcode", ev.a & 0x3F)
                self._set(cycle + ev.b, "pka.busy", 0)
                self._set(cycle + ev.b, "pka.opcode", 0)
            elif kind == Kind.PKA_FINISH:
                self._set(ev.b, "pka.done", True)
            elif kind == Kind.SYSTICK_WRAP:
                self._set(ev.b, "systick.wrap", True)
            elif kind == Kind.IRQ_PEND:
                self._pending |= 1 << ev.a
                self._pending_changed(cycle)
            elif kind == Kind.IRQ_CLEAR:
                self._pending &= ~(1 << ev.a)
                self._pending_changed(cycle)
            elif kind == Kind.RESET:
                self._active.clear()
                self._level(cycle, "core.exception", 0)
            self._end = max(self._end, cycle)

    def _ps(self, cycle: int) -> int:
        hz = self.info.clock_hz
        return (cycle * 10**12 + hz // 2) // hz

    def close(self) -> None:
        info = self.info
        with self.path.open("w") as fh:
            writer = VCDWriter(fh, timescale="1 ps", date="", version="pkasim", check_values=False,
                               comment=f"{info.chip} at {info.clock_hz} Hz: one core cycle = "
                                       f"{10**12 / info.clock_hz:g} ps")
            signals = {
                "core.sleeping": writer.register_var("chip.core", "sleeping", "wire", size=1, init=0),
                "core.exception": writer.register_var("chip.core", "exception", "reg", size=6, init=0),
                "pka.busy": writer.register_var("chip.pka", "busy", "wire", size=1, init=0),
                "pka.opcode": writer.register_var("chip.pka", "opcode", "reg", size=6, init=0),
                "pka.irq": writer.register_var("chip.pka", "irq", "wire", size=1, init=0),
                "pka.done": writer.register_var("chip.pka", "done", "event"),
                "systick.wrap": writer.register_var("chip.systick", "wrap", "event"),
                "nvic.irq_pending": writer.register_var("chip.nvic", "irq_pending", "reg", size=32, init=0),
                "nvic.systick_pending": writer.register_var("chip.nvic", "systick_pending", "wire", size=1, init=0),
            }
            hz, change = info.clock_hz, writer.change
            self.changes.sort(key=lambda c: (c[0], c[1]))
            for cycle, _, name, value in self.changes:
                change(signals[name], (cycle * 10**12 + hz // 2) // hz, value)
            writer.close(self._ps(self._end))  # the dump ends where the run did
