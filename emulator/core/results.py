"""What a run ends with: the reason, the counts, the fault that led there."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from pkasim.core.exceptions import Fault

if TYPE_CHECKING:
    from pkasim.core.watchpoints import WatchHit


class StopReason(str, Enum):
    EXIT = "exit"  # the firmware exited through semihosting
    BUDGET = "budget"  # the cycle budget ran out
    LOCKUP = "lockup"  # a fault where the core cannot take HardFault
    SLEEP_FOREVER = "sleep-forever"  # WFI with nothing that could ever wake the core
    BREAKPOINT = "breakpoint"  # a debugger breakpoint or BKPT with a debugger attached
    UNTIL = "until"  # reached the address run() was asked to stop at
    RETURNED = "returned"  # call() finished
    STEP = "step"  # step() executed its instruction
    RESET = "reset"  # the firmware requested a system reset and reset_stops is set
    STUCK = "stuck"  # an endless loop that no interrupt can ever leave
    WATCHPOINT = "watchpoint"  # an instruction read or wrote a watched range


@dataclass
class RunResult:
    """What a run() ended with; ``cycles`` and ``instructions`` count the whole session."""

    reason: StopReason
    exit_code: int | None
    cycles: int
    instructions: int
    sleep_cycles: int
    wall_seconds: float
    clock_hz: int
    fault: Fault | None = None
    lockup: Fault | None = None
    message: str = ""
    watch: WatchHit | None = None  # the watched access a run stopped at (or a step made)

    @property
    def modeled_seconds(self) -> float:
        return self.cycles / self.clock_hz

    @property
    def mips(self) -> float:
        return self.instructions / self.wall_seconds / 1e6 if self.wall_seconds > 0 else 0.0


class ProbeState(str, Enum):
    """Where a call probe (Machine.probe_call) stands."""

    WAITING = "waiting"  # the function's entry has not been reached
    IN_CALL = "in-call"  # entered; its return has not been reached
    DONE = "done"  # entered and returned: both marks are kept
    STOPPED = "stopped"  # its return could not be awaited: the run stopped at the entry (StopReason.UNTIL)


@dataclass
class CallProbe:
    """A call probe's marks: the counts (of the whole session) at the first instruction
    of the function and at the address it returned to, as far as it got."""

    state: ProbeState
    entry_cycles: int
    entry_instructions: int
    return_cycles: int
    return_instructions: int


class Stop(Exception):
    """Internal: the run loop must return this result."""

    def __init__(self, reason: StopReason, message: str = "", exit_code: int | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.exit_code = exit_code
