/*
 * Idle loops, fast-forwarded: a firmware spinning in `b .`, or polling a flag or a
 * device register that cannot change before the next event, runs to that event in
 * one step, its cycles exact in whole iterations, as WFI sleeps.
 *
 * A loop qualifies when (1) it is one block that branches back to its own start,
 * (2) Python has checked that block once (runloop.py RunLoop._loop_verdict: loads,
 * arithmetic, compares and branches only; no store, call, system instruction or
 * breakpoint), (3) the registers (r0-r12, SP, LR, APSR) at the start of two
 * consecutive iterations are identical, and (4) no device read in between was served
 * by Python (a Python device may change by itself, SysTick's CVR does; the native
 * PKA's registers hold until its next event). Then every further iteration is the
 * same until an event (a device event, an interrupt, the budget): k iterations of c
 * cycles take the count past the next event at once, where the event fires as it
 * would have. With no event ahead at all the firmware is stuck: the run stops
 * (STOP_STUCK) instead of burning the cycle budget.
 */
#include <string.h>

#include "pkstate.h"

static int verdict(pk_state *s, uint32_t start) {
    uint32_t i = (start >> 1) & 255;
    return s->verdict_addr[i] == start ? s->verdict[i] : 0;
}

/* Called at the start of a block that just ran to its own start again. Returns 1
 * when the engine was stopped (Python must decide, or the loop is stuck). */
int pk_idle_loop(pk_state *s, uint32_t start, uint32_t cost, uint32_t insns) {
    uint32_t regs[16];
    if (s->loop_start != start) {
        s->loop_start = start;
        s->loop_count = 0;
        s->loop_have = 0;
        s->loop_since = s->cycles - cost;
    }
    if (++s->loop_count < 2) return 0;
    int v = verdict(s, start);
    if (v == 0) {
        s->stop_reason = STOP_LOOPCHK;
        s->emu_stop(s->uc);
        return 1;
    }
    if (v != 1 || cost == 0) return 0;
    for (int r = 0; r < 15; r++) s->reg_read(s->uc, s->regids[r], &regs[r]);
    s->reg_read(s->uc, s->apsr_regid, &regs[15]);
    if (s->loop_have && s->py_reads == s->loop_py_reads && memcmp(regs, s->loop_regs, sizeof regs) == 0) {
        uint64_t native = pk_native_next(s);
        if (native == PK_NO_EVENT && s->py_next == PK_NO_EVENT) {
            s->stop_reason = STOP_STUCK;
            s->emu_stop(s->uc);
            return 1;
        }
        uint64_t next = native < s->deadline ? native : s->deadline;
        if (next != PK_NO_EVENT && next > s->cycles) {
            uint64_t k = (next - s->cycles + cost - 1) / cost;
            if (s->obs) pk_obs_emit(s->obs, PK_EV_SPIN, s->cycles, 0, k * cost);
            s->cycles += k * cost;
            s->insns += k * insns;
            s->blocks += k;
        }
    }
    memcpy(s->loop_regs, regs, sizeof regs);
    s->loop_have = 1;
    s->loop_py_reads = s->py_reads;
    return 0;
}
