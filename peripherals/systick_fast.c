/*
 * SysTick's wrap event in native code: the 1 -> 0 step of the counter, COUNTFLAG, the
 * exception it pends and the next step, without stopping the engine for Python.
 *
 * peripherals/systick.py is the model and the reference (ARMv6-M ARM B3.3): it keeps
 * serving every register access (the System Control Space page it shares with the
 * NVIC and the SCB is Python's), on this same state record, and with the fast paths
 * off it schedules the step on the Python clock instead. This file only does what
 * SysTick._reach_zero does, when the step comes: tests/test_fast_paths.py compares.
 *
 * Register map (for reference; served by systick.py): 0x0 CSR, 0x4 RVR, 0x8 CVR,
 * 0xC CALIB.
 */
#include "pkstate.h"

#define CSR_TICKINT (1u << 1)
#define CSR_CLKSOURCE (1u << 2)

/* The record systick.py's SysTickState mirrors. */
typedef struct {
    pk_state *core;
    uint64_t next;     /* cycle of the next 1 -> 0 step scheduled here, or PK_NO_EVENT */
    uint64_t anchor;   /* the counter held value at cycle anchor */
    uint64_t wraps;
    uint64_t hz, ref_hz; /* core clock; reference clock (0: none) */
    uint32_t value, rvr, csr, countflag;
    uint32_t irq_exc, fast_on;
} pk_systick;

uint32_t pk_sizeof_systick(void) { return (uint32_t)sizeof(pk_systick); }

uint64_t pk_systick_next(void *t) { return ((pk_systick *)t)->next; }

/* The core cycle of the n-th SysTick clock edge after the anchor (SysTick._cycle_of_tick). */
static uint64_t cycle_of_tick(const pk_systick *t, uint64_t n) {
    if ((t->csr & CSR_CLKSOURCE) || !t->ref_hz) return t->anchor + n;
    return t->anchor + (n * t->hz + t->ref_hz - 1) / t->ref_hz;
}

/* The counter steps from 1 to 0 (SysTick._reach_zero). */
void pk_systick_fire(void *tp) {
    pk_systick *t = tp;
    pk_state *s = t->core;
    if (t->next == PK_NO_EVENT) return;
    t->wraps += 1;
    t->countflag = 1;
    t->anchor = t->next; /* exactly at the step, whatever block boundary this runs at */
    t->value = 0;
    t->next = PK_NO_EVENT;
    if (s->obs) pk_obs_emit(s->obs, PK_EV_SYSTICK_WRAP, s->cycles, 0, t->anchor);
    if (t->csr & CSR_TICKINT) pk_pend(s, t->irq_exc);
    if (t->rvr) t->next = cycle_of_tick(t, (uint64_t)t->rvr + 1);
}
