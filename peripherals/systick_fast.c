/*
 * SysTick in native code: the wrap event (the 1 -> 0 step of the counter, COUNTFLAG,
 * the exception it pends and the next step) without stopping the engine for Python,
 * and the register writes that move it (CSR, RVR, CVR).
 *
 * peripherals/systick.py is the model and the reference (ARMv6-M ARM B3.3), on this
 * same state record: it serves the reads, every access while the fast paths are off,
 * and what needs its words (an RVR value above 24 bits, a write to CALIB, a size
 * other than a word); with the fast paths off it schedules the step on the Python
 * clock instead. The functions here do what SysTick._reach_zero and SysTick.write do,
 * line for line: tests/test_fast_paths.py compares.
 *
 * Register map: 0x0 CSR, 0x4 RVR, 0x8 CVR, 0xC CALIB. The window shares the System
 * Control Space page with the NVIC and the SCB (emulator/native/sharedpage.c).
 */
#include "pkstate.h"

#define CSR_ENABLE (1u << 0)
#define CSR_TICKINT (1u << 1)
#define CSR_CLKSOURCE (1u << 2)
#define CSR 0x0u
#define RVR 0x4u
#define CVR 0x8u
#define MAX24 0xFFFFFFu

/* The record systick.py's SysTickState mirrors. */
typedef struct {
    pk_state *core;
    uint64_t next;     /* cycle of the next 1 -> 0 step scheduled here, or PK_NO_EVENT */
    uint64_t anchor;   /* the counter held value at cycle anchor */
    uint64_t wraps;
    uint64_t hz, ref_hz; /* core clock; reference clock (0: none) */
    uint32_t value, rvr, csr, countflag;
    uint32_t irq_exc, fast_on;
    pk_py_access_fn py_access; /* what this path hands back to systick.py */
    uint32_t base, pad;        /* the window's bus address */
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

/* ------------------------------------------------------------------ the registers */

/* SysTick clock edges in core cycles (start, end] (SysTick._ticks_between). */
static uint64_t ticks_between(const pk_systick *t, uint64_t start, uint64_t end) {
    if ((t->csr & CSR_CLKSOURCE) || !t->ref_hz) return end - start;
    return (uint64_t)((unsigned __int128)(end - start) * t->ref_hz / t->hz);
}

/* The counter n ticks after the anchor (SysTick._value_after). */
static uint32_t value_after(const pk_systick *t, uint64_t n) {
    if (n <= t->value) return (uint32_t)(t->value - n);
    if (t->rvr == 0) return 0;
    return (uint32_t)(t->rvr - (n - t->value - 1) % ((uint64_t)t->rvr + 1));
}

/* CVR at cycle now (SysTick.current). */
static uint32_t current(const pk_systick *t, uint64_t now) {
    if (!(t->csr & CSR_ENABLE)) return t->value;
    return value_after(t, ticks_between(t, t->anchor, now));
}

/* The next 1 -> 0 step from the anchor (SysTick._reschedule, fast paths on). */
static void reschedule(pk_systick *t) {
    t->next = PK_NO_EVENT;
    if (!(t->csr & CSR_ENABLE)) return;
    uint64_t n = t->value > 0 ? t->value : t->rvr ? (uint64_t)t->rvr + 1 : 0;
    if (!n) return;
    t->next = cycle_of_tick(t, n);
    pk_native_changed(t->core);
}

uint64_t pk_systick_read(void *uc, uint64_t offset, unsigned size, pk_systick *t) {
    (void)uc;
    uint32_t off = (uint32_t)offset;
    return t->py_access(off, size, 0, 0, pk_access_offset(t->core, t->base + off));
}

/* SysTick.write for CSR, RVR (24 bits) and CVR as words, at the cycle of the access. */
void pk_systick_write(void *uc, uint64_t offset, unsigned size, uint64_t value, pk_systick *t) {
    (void)uc;
    uint32_t off = (uint32_t)offset, v = (uint32_t)value;
    uint32_t toff = pk_access_offset(t->core, t->base + off);
    if (size == 4 && t->fast_on && (off == CSR || (off == RVR && v <= MAX24) || off == CVR)) {
        uint64_t now = t->core->cycles + toff;
        if (off == CVR) { /* any write clears CVR and COUNTFLAG, and pends nothing */
            t->value = 0;
            t->countflag = 0;
        } else {
            t->value = current(t, now);
            if (off == CSR) t->csr = (v & (CSR_ENABLE | CSR_TICKINT | CSR_CLKSOURCE)) | (t->ref_hz ? 0 : CSR_CLKSOURCE);
            else t->rvr = v;
        }
        t->anchor = now;
        reschedule(t);
        return;
    }
    t->py_access(off, size, v, 1, toff);
}
