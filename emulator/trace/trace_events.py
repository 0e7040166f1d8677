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

from peripherals.nvic import exception_name
from peripherals.pka_math import COMMANDS

from ..observe import Event, Kind, ObservedImage, Observer

PID = 1
TID_CPU, TID_EXC, TID_PKA, TID_EVENTS = 1, 2, 3, 4
TRACKS = {TID_CPU: "CPU (call stack)", TID_EXC: "exceptions", TID_PKA: "PKA", TID_EVENTS: "SysTick and NVIC"}


class TraceEventWriter(Observer):
    """Collects spans while the run goes; ``close()`` writes the JSON file."""

    def __init__(self, path: str | Path, firmware: str = "") -> None:
        self.path = Path(path)
        self.firmware = firmware
        self.info: ObservedImage | None = None
        self.spans: list[dict] = []
        self._frames: list[tuple[int, int]] = []  # (function index or -exception, start cycle)
        self._end_cycle = 0

    def start(self, info: ObservedImage) -> None:
        self.info = info

    def _us(self, cycles: int) -> float:
        return cycles * 1e6 / self.info.clock_hz

    def _begin(self, tid: int, name: str, cat: str, at: int) -> None:
        self.spans.append({"name": name, "cat": cat, "ph": "B", "ts": self._us(at), "pid": PID, "tid": tid})

    def _end(self, tid: int, name: str, cat: str, at: int) -> None:
        self.spans.append({"name": name, "cat": cat, "ph": "E", "ts": self._us(at), "pid": PID, "tid": tid})

    def _instant(self, name: str, cat: str, at: int) -> None:
        self.spans.append({"name": name, "cat": cat, "ph": "i", "s": "t", "ts": self._us(at), "pid": PID,
                           "tid": TID_EVENTS})

    def _push(self, fn: int, at: int) -> None:
        self._frames.append((fn, at))
        if fn < 0:
            self._begin(TID_EXC, exception_name(-fn), "exception", at)
        else:
            self._begin(TID_CPU, self.info.functions[fn], "function", at)

    def _close_frame(self, end: int) -> None:
        fn, _ = self._frames.pop()
        if fn < 0:
            self._end(TID_EXC, exception_name(-fn), "exception", end)
        else:
            self._end(TID_CPU, self.info.functions[fn], "function", end)

    def events(self, batch: Sequence[Event]) -> None:
        frames = self._frames
        for ev in batch:
            kind, cycle = ev.kind, ev.cycle
            if kind == Kind.CALL:
                self._push(ev.a, cycle)
            elif kind == Kind.RETURN:
                if frames and frames[-1][0] >= 0:
                    self._close_frame(cycle)
            elif kind == Kind.TAILCALL:
                if frames and frames[-1][0] >= 0:
                    self._close_frame(cycle)
                self._push(ev.a, cycle)
            elif kind == Kind.EXC_ENTRY:
                self._push(-ev.a, cycle)
                self._push(ev.fn, cycle)
            elif kind == Kind.EXC_RETURN:
                while frames:
                    fn = frames[-1][0]
                    self._close_frame(cycle)
                    if fn < 0:
                        break
            elif kind in (Kind.SLEEP, Kind.SPIN):
                name = "WFI sleep" if kind == Kind.SLEEP else "idle loop"
                self._begin(TID_CPU, name, "sleep", cycle)
                self._end(TID_CPU, name, "sleep", cycle + ev.b)
            elif kind == Kind.PKA_START:
                command = COMMANDS.get(ev.a & 0xFF)
                name = command.name if command else f"op 0x{ev.a & 0xFF:02x}"
                self.spans.append({"name": f"{name} ({ev.a >> 8} words)", "cat": "pka", "ph": "X",
                                   "ts": self._us(cycle), "dur": self._us(ev.b), "pid": PID, "tid": TID_PKA})
            elif kind == Kind.SYSTICK_WRAP:
                self._instant("SysTick wrap", "systick", ev.b)
            elif kind == Kind.IRQ_PEND:
                self._instant(f"{exception_name(ev.a)} pending", "nvic", cycle)
            elif kind == Kind.RESET:
                while frames:
                    self._close_frame(cycle)
            self._end_cycle = max(self._end_cycle, cycle)

    def document(self) -> dict:
        """The whole trace as a JSON-ready object (open frames end at the last event)."""
        while self._frames:
            self._close_frame(self._end_cycle)
        info = self.info
        meta: list[dict] = [{"name": "process_name", "ph": "M", "pid": PID, "tid": 0,
                             "args": {"name": f"{info.chip} ({Path(self.firmware or info.path).name})"}}]
        for tid, name in TRACKS.items():
            meta.append({"name": "thread_name", "ph": "M", "pid": PID, "tid": tid, "args": {"name": name}})
            meta.append({"name": "thread_sort_index", "ph": "M", "pid": PID, "tid": tid, "args": {"sort_index": tid}})
        return {
            "traceEvents": meta + self.spans,
            "displayTimeUnit": "ns",
            "otherData": {"generator": "pkasim", "chip": info.chip, "clock_hz": str(info.clock_hz),
                          "time": "modeled: ts and dur are microseconds of core time, args.cycle(s) exact cycles"},
        }

    def close(self) -> None:
        self.path.write_text(json.dumps(self.document(), separators=(",", ":")) + "\n")
