/*
 * pkasim observer: the native half of the observation API (docs/api.md, "Observing
 * a run"). It records what a run did, as events in a buffer Python drains:
 *
 *   - function entry and exit, found at block starts from per-halfword tables built
 *     once per image (observe.c: a separate Unicorn block hook, installed only while
 *     something observes);
 *   - events from outside blocks (exception entry and return, WFI sleep, PKA
 *     operations, SysTick wraps, IRQ pend/clear), given by whoever models them
 *     through pk_obs_emit(), from Python (ctypes) or from native code.
 *
 * Native code that models such an event calls pk_obs_emit() when its observer
 * pointer is non-NULL; the event kinds below are the ones emulator/core/observe.py knows.
 */
#ifndef PKASIM_OBSERVE_H
#define PKASIM_OBSERVE_H

#include <stdint.h>

enum pk_obs_kind {
    PK_EV_CALL = 1,        /* a = function entered, b = return address (0: the outermost frame) */
    PK_EV_RETURN = 2,      /* a = function left, b = address returned to */
    PK_EV_TAILCALL = 3,    /* a = function now running in the top frame, b = the one it replaced */
    PK_EV_EXC_ENTRY = 4,   /* a = exception number; b = handler address */
    PK_EV_EXC_RETURN = 5,  /* a = exception number returned from */
    PK_EV_SLEEP = 6,       /* cycle = start of a WFI/WFE sleep, b = cycles asleep */
    PK_EV_PKA_START = 7,   /* a = opcode | LEN << 8, b = busy cycles */
    PK_EV_PKA_FINISH = 8,  /* a = opcode | LEN << 8, b = the cycle it finished at */
    PK_EV_PKA_POLL = 9,    /* the CPU read the PKA's SR while it was busy */
    PK_EV_SYSTICK_WRAP = 10, /* b = the cycle of the 1 -> 0 step */
    PK_EV_IRQ_PEND = 11,   /* a = exception number that became pending */
    PK_EV_IRQ_CLEAR = 12,  /* a = exception number whose pending state was cleared */
    PK_EV_RESET = 13,      /* core reset: the call stack is gone */
    PK_EV_STOP = 14,       /* a run() returned here (closes every interval) */
    PK_EV_SPIN = 15,       /* cycle = start of an idle loop fast-forwarded to the next event, b = cycles */
};

/* One recorded event: 40 bytes, the layout emulator/core/observe.py unpacks. */
typedef struct {
    uint64_t cycle;  /* model time of the event (core cycles), never decreasing */
    uint64_t insns;  /* instructions retired by then */
    uint64_t b;      /* second argument (see the kinds) */
    uint32_t kind;
    uint32_t a;      /* first argument */
    uint32_t fn;     /* function on top of the call stack after the event (0: none known) */
    uint32_t depth;  /* call-stack depth after the event */
} pk_obs_event;

typedef struct pk_obs pk_obs;

/* Record an event that happened outside the blocks the hook sees. ``cycle`` is the
 * model time of the event; the instruction count is read from the cycle hook. */
void pk_obs_emit(void *obs, uint32_t kind, uint64_t cycle, uint32_t a, uint64_t b);

#endif
