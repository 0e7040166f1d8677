"""Time: one cycle counter and an event queue. Nothing in the model reads the host clock.

The counter lives in the native hook's state (committed cycles). Peripherals schedule
callbacks at absolute cycle numbers; the machine runs the CPU until the earliest one
(the hook stops the run there), then fires everything that is due.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from typing import Protocol


class CycleSource(Protocol):
    cycles: int


class Event:
    """A scheduled callback; cancel() makes it a no-op without searching the heap."""

    __slots__ = ("at", "callback", "name", "cancelled")

    def __init__(self, at: int, callback: Callable[[], None], name: str) -> None:
        self.at = at
        self.callback = callback
        self.name = name
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Clock:
    """The machine's only clock: ``now`` in core cycles, ``hz`` to turn them into time."""

    def __init__(self, source: CycleSource, hz: int, on_schedule: Callable[[int], None] | None = None) -> None:
        self._source = source
        self.hz = hz
        self._queue: list[tuple[int, int, Event]] = []
        self._seq = itertools.count()
        self._on_schedule = on_schedule

    @property
    def now(self) -> int:
        return int(self._source.cycles)

    def seconds(self, cycles: int | None = None) -> float:
        return (self.now if cycles is None else cycles) / self.hz

    def schedule(self, at: int, callback: Callable[[], None], name: str = "") -> Event:
        """Call ``callback`` once the cycle count reaches ``at`` (at a block boundary)."""
        event = Event(max(at, self.now), callback, name)
        heapq.heappush(self._queue, (event.at, next(self._seq), event))
        if self._on_schedule is not None:
            self._on_schedule(event.at)
        return event

    def next_deadline(self) -> int | None:
        while self._queue and self._queue[0][2].cancelled:
            heapq.heappop(self._queue)
        return self._queue[0][0] if self._queue else None

    def run_due(self) -> int:
        """Fire every event due now, in time order; returns how many fired."""
        fired = 0
        while True:
            at = self.next_deadline()
            if at is None or at > self.now:
                return fired
            _, _, event = heapq.heappop(self._queue)
            event.callback()
            fired += 1

    def advance_to(self, at: int) -> None:
        """Skip idle time (WFI): the counter jumps, nothing executes meanwhile."""
        if at > self.now:
            self._source.cycles = at
