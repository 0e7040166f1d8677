"""Chrome trace-event JSON (the Trace Event Format), on the modeled-time axis.

Opens in Perfetto (ui.perfetto.dev), chrome://tracing and speedscope. One process
(the chip) with four tracks ("threads"):

  tid 1  CPU         a span per function call (begin/end events, "ph": "B"/"E"),
                     nested as the calls nest (interrupt handlers nest on top of what
                     they interrupted), and a "WFI sleep" span inside the function
                     that slept;
  tid 2  exceptions  a span per exception, from entry (its 16 cycles included) to the
                     end of its return;
  tid 3  PKA         a complete event ("ph": "X") per operation, its busy time exactly;
  tid 4  events      instant events ("ph": "i"): SysTick wraps, interrupts pending.

``ts`` (and ``dur``) are microseconds of modeled time: cycles * 1e6 / clock_hz, so
the cycle of each event is ts * clock_hz / 1e6. Begin/end pairs rather than complete
events on the nested tracks: an end and the next begin at the same cycle then carry
the same ``ts`` exactly, which viewers that rebuild ends as ts + dur (speedscope)
could get wrong by a rounding. Events are written in time order, an end before a
begin at the same cycle. Track names are metadata events ("ph": "M": process_name,
thread_name, thread_sort_index).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from pkasim.core.observe import Event, Kind, ObservedImage, Observer
from pkasim.peripherals.nvic import exception_name
from pkasim.peripherals.pka_math import COMMANDS

CALL, RETURN, TAILCALL, EXC_ENTRY, EXC_RETURN = (int(k) for k in (Kind.CALL, Kind.RETURN, Kind.TAILCALL,
                                                                   Kind.EXC_ENTRY, Kind.EXC_RETURN))
SLEEP, SPIN, PKA_START, SYSTICK_WRAP, IRQ_PEND, RESET = (int(k) for k in (Kind.SLEEP, Kind.SPIN, Kind.PKA_START,
                                                                          Kind.SYSTICK_WRAP, Kind.IRQ_PEND, Kind.RESET))

PID = 1
TID_CPU, TID_EXC, TID_PKA, TID_EVENTS = 1, 2, 3, 4
TRACKS = {TID_CPU: "CPU (call stack)", TID_EXC: "exceptions", TID_PKA: "PKA", TID_EVENTS: "SysTick and NVIC"}


class TraceEventWriter(Observer):
    """Collects the events as JSON text while the run goes; ``close()`` writes the file.

    Each event is formatted once, as it comes (names escaped once per function), so
    a trace of a hundred thousand events costs a fraction of a second."""

    def __init__(self, path: str | Path, firmware: str = "") -> None:
        self.path = Path(path)
        self.firmware = firmware
        self.info: ObservedImage | None = None
        self.lines: list[str] = []
        self._frames: list[tuple[int, int]] = []  # (function index or -exception, start cycle)
        self._end_cycle = 0
        self._names: list[str] = []
        self._exc_names: dict[int, str] = {}

    def start(self, info: ObservedImage) -> None:
        self.info = info
        self._names = [json.dumps(name) for name in info.functions]
        self._us = 1e6 / info.clock_hz

    def _exc(self, exc: int) -> str:
        name = self._exc_names.get(exc)
        if name is None:
            name = self._exc_names[exc] = json.dumps(exception_name(exc))
        return name

    def _span(self, ph: str, tid: int, name: str, cat: str, at: int) -> None:
        """A begin or end event (``name`` already JSON text)."""
        self.lines.append(f'{{"name":{name},"cat":"{cat}","ph":"{ph}","ts":{at * self._us!r},"pid":{PID},'
                          f'"tid":{tid}}}')

    def _instant(self, name: str, cat: str, at: int) -> None:
        self.lines.append(f'{{"name":{json.dumps(name)},"cat":"{cat}","ph":"i","s":"t","ts":{at * self._us!r},'
                          f'"pid":{PID},"tid":{TID_EVENTS}}}')

    def _push(self, fn: int, at: int) -> None:
        self._frames.append((fn, at))
        if fn < 0:
            self._span("B", TID_EXC, self._exc(-fn), "exception", at)
        else:
            self._span("B", TID_CPU, self._names[fn], "function", at)

    def _close_frame(self, end: int) -> None:
        fn, _ = self._frames.pop()
        if fn < 0:
            self._span("E", TID_EXC, self._exc(-fn), "exception", end)
        else:
            self._span("E", TID_CPU, self._names[fn], "function", end)

    def events(self, batch: Sequence[Event]) -> None:
        frames = self._frames
        for cycle, _insns, b, kind, a, fn, _depth in batch:
            if kind == CALL:
                self._push(a, cycle)
            elif kind == RETURN:
                if frames and frames[-1][0] >= 0:
                    self._close_frame(cycle)
            elif kind == EXC_ENTRY:
                self._push(-a, cycle)
                self._push(fn, cycle)
            elif kind == EXC_RETURN:
                while frames:
                    top = frames[-1][0]
                    self._close_frame(cycle)
                    if top < 0:
                        break
            elif kind == SLEEP or kind == SPIN:
                name = '"WFI sleep"' if kind == SLEEP else '"idle loop"'
                self._span("B", TID_CPU, name, "sleep", cycle)
                self._span("E", TID_CPU, name, "sleep", cycle + b)
            elif kind == PKA_START:
                command = COMMANDS.get(a & 0xFF)
                name = json.dumps(f"{command.name if command else f'op 0x{a & 0xFF:02x}'} ({a >> 8} words)")
                self.lines.append(f'{{"name":{name},"cat":"pka","ph":"X","ts":{cycle * self._us!r},'
                                  f'"dur":{b * self._us!r},"pid":{PID},"tid":{TID_PKA}}}')
            elif kind == TAILCALL:
                if frames and frames[-1][0] >= 0:
                    self._close_frame(cycle)
                self._push(a, cycle)
            elif kind == SYSTICK_WRAP:
                self._instant("SysTick wrap", "systick", b)
            elif kind == IRQ_PEND:
                self._instant(f"{exception_name(a)} pending", "nvic", cycle)
            elif kind == RESET:
                while frames:
                    self._close_frame(cycle)
            if cycle > self._end_cycle:
                self._end_cycle = cycle

    def metadata(self) -> list[dict]:
        """The metadata events: the process (the chip) and the track names."""
        info = self.info
        meta: list[dict] = [{"name": "process_name", "ph": "M", "pid": PID, "tid": 0,
                             "args": {"name": f"{info.chip} ({Path(self.firmware or info.path).name})"}}]
        for tid, name in TRACKS.items():
            meta.append({"name": "thread_name", "ph": "M", "pid": PID, "tid": tid, "args": {"name": name}})
            meta.append({"name": "thread_sort_index", "ph": "M", "pid": PID, "tid": tid, "args": {"sort_index": tid}})
        return meta

    def close(self) -> None:
        """Write the file (frames still open end at the last event)."""
        while self._frames:
            self._close_frame(self._end_cycle)
        info = self.info
        other = {"generator": "pkasim", "chip": info.chip, "clock_hz": str(info.clock_hz),
                 "time": "modeled: ts and dur are microseconds of core time (cycles * 1e6 / clock_hz)"}
        events = [json.dumps(m, separators=(",", ":")) for m in self.metadata()] + self.lines
        with self.path.open("w") as fh:
            fh.write('{"traceEvents":[\n')
            fh.write(",\n".join(events))
            fh.write(f'\n],"displayTimeUnit":"ns","otherData":{json.dumps(other, separators=(",", ":"))}}}\n')
