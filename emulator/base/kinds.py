"""The kinds of event a run reports (observe.h's PK_EV_*), shared by the core's
observation API and the devices that emit events: a device names an event without
importing the core."""

from enum import IntEnum


class Kind(IntEnum):
    """Event kinds (observe.h's PK_EV_*): what ``a`` and ``b`` of an Event mean."""

    CALL = 1  # a = function entered, b = return address (0: the outermost frame)
    RETURN = 2  # a = function left, b = address returned to (0: unwound by an exception return)
    TAILCALL = 3  # a = function now running in the top frame, b = the one it replaced
    EXC_ENTRY = 4  # a = exception number, b = handler address
    EXC_RETURN = 5  # a = exception number returned from
    SLEEP = 6  # cycle = start of a WFI/WFE sleep, b = cycles asleep
    PKA_START = 7  # a = opcode | LEN << 8, b = busy cycles
    PKA_FINISH = 8  # a = opcode | LEN << 8, b = cycle the operation finished at
    PKA_POLL = 9  # the CPU read the PKA's SR while the PKA was busy
    SYSTICK_WRAP = 10  # b = cycle of the 1 -> 0 step
    IRQ_PEND = 11  # a = exception number that became pending
    IRQ_CLEAR = 12  # a = exception number whose pending state was cleared
    RESET = 13  # core reset: the call stack is gone
    STOP = 14  # run() returned here: every open interval ends at this cycle
    SPIN = 15  # cycle = start of an idle loop fast-forwarded to the next event, b = cycles skipped
