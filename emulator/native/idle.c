/*
 * Idle loops, fast-forwarded: a firmware spinning in `b .`, or polling a flag or a
 * device register that cannot change before the next event, runs to that event in
 * one step, its cycles exact in whole iterations, as WFI sleeps.
 *
 * A loop qualifies when (1) it is one block that branches back to its own start, or
 * a few blocks within a short span of code [start, end) entered at start, the last
 * of which branches back to start (a poll the compiler unrolled:
 * `ldr; tst; beq out` four times, then `bne start`), (2) Python has checked its code
 * once (runloop.py RunLoop._loop_verdict: loads, arithmetic, compares and branches
 * only; no store, call, system instruction or breakpoint), (3) the registers (r0-r12,
 * SP, LR, APSR) at the start of two consecutive iterations are identical, (4) no
 * device read in between was served by Python (a Python device may change by itself,
 * SysTick's CVR does; the native PKA's registers hold until its next event), and (5)
 * no device event fired in between (in a loop of several blocks the event may fall
 * after the iteration's read of the device: the registers then still hold the value
 * read before it, though the device has changed). Then
 * every further iteration is the same until an event (a device event, an interrupt,
 * the budget). A one-block loop takes the count past the next event at once (k
 * iterations of c cycles), where the event fires at the block boundary as it would
 * have. A loop of several blocks skips only the iterations that end before the next
 * event, and the one in which the event falls runs as usual: the event may end it in
 * any of its blocks. With no event ahead at all the firmware is stuck: the run stops
 * (STOP_STUCK) instead of burning the cycle budget.
 */
#include <string.h>

#include "pkstate.h"

/* A loop of several blocks: at most this many bytes of code and blocks an iteration. */
#define MULTI_SPAN 64u
#define MULTI_BLOCKS 8u
/* Iterations of a several-block loop compared before it is taken for one that makes
 * progress (a counter) and left alone until it is left. */
#define MULTI_TRIES 8u

static int verdict(pk_state *s, uint32_t key, uint32_t end) {
    uint32_t i = (key >> 1) & (PK_VERDICTS - 1);
    return s->verdict_addr[i] == key && s->verdict_end[i] == end ? s->verdict[i] : 0;
}

/* One more iteration of the loop at start ended (cost cycles, insns instructions,
 * blocks blocks). Returns 1 when the engine was stopped. */
static int iteration(pk_state *s, uint32_t key, uint32_t end, uint64_t cost, uint64_t insns, uint64_t blocks,
                     int multi) {
    uint32_t regs[16];
    if (s->loop_have == 2) return 0; /* decided: this loop is not skipped */
    if (++s->loop_count < 2) return 0;
    if (multi && s->loop_count > MULTI_TRIES) {
        s->loop_have = 2;
        return 0;
    }
    int v = verdict(s, key, end);
    if (v == 0) {
        s->loop_key = key;
        s->stop_reason = STOP_LOOPCHK;
        s->emu_stop(s->uc);
        return 1;
    }
    if (v != 1 || cost == 0) {
        s->loop_have = 2;
        return 0;
    }
    for (int r = 0; r < 15; r++) s->reg_read(s->uc, s->regids[r], &regs[r]);
    s->reg_read(s->uc, s->apsr_regid, &regs[15]);
    if (s->loop_have && s->py_reads == s->loop_py_reads && s->dev_events == s->loop_dev_events &&
        memcmp(regs, s->loop_regs, sizeof regs) == 0) {
        uint64_t native = pk_native_next(s);
        if (native == PK_NO_EVENT && s->py_next == PK_NO_EVENT) {
            s->stop_reason = STOP_STUCK;
            s->emu_stop(s->uc);
            return 1;
        }
        uint64_t next = native < s->deadline ? native : s->deadline;
        if (next != PK_NO_EVENT && next > s->cycles) {
            uint64_t k = multi ? (next - s->cycles) / cost : (next - s->cycles + cost - 1) / cost;
            if (k) {
                if (s->obs) pk_obs_emit(s->obs, PK_EV_SPIN, s->cycles, 0, k * cost);
                s->cycles += k * cost;
                s->insns += k * insns;
                s->blocks += k * blocks;
            }
        }
    }
    memcpy(s->loop_regs, regs, sizeof regs);
    s->loop_have = 1;
    s->loop_py_reads = s->py_reads;
    s->loop_dev_events = s->dev_events;
    return 0;
}

/* Called at the start of a block that just ran to its own start again. Returns 1
 * when the engine was stopped (Python must decide, or the loop is stuck). */
int pk_idle_loop(pk_state *s, uint32_t start, uint32_t end, uint32_t cost, uint32_t insns) {
    if (s->loop_start != start || s->loop_end != 0) {
        s->loop_start = start;
        s->loop_end = 0;
        s->loop_count = 0;
        s->loop_have = 0;
        s->loop_since = s->cycles - cost;
    }
    return iteration(s, start, end, cost, insns, 1, 0);
}

/* Called after the block [done_start, done_end) (cost cycles, insns instructions)
 * ran and the block at next is about to: follows loops of several blocks. Returns 1
 * when the engine was stopped. */
int pk_idle_track(pk_state *s, uint32_t done_start, uint32_t done_end, uint32_t next, uint32_t cost,
                  uint32_t insns) {
    if (next < done_start && done_end - next <= MULTI_SPAN) {
        /* A branch back: the end of an iteration of [next, done_end), or a new loop. */
        if (s->loop_start == next && s->loop_end == done_end) {
            uint64_t c = (uint64_t)s->loop_acc_cost + cost, n = (uint64_t)s->loop_acc_insns + insns;
            uint64_t b = (uint64_t)s->loop_acc_blocks + 1;
            s->loop_acc_cost = s->loop_acc_insns = s->loop_acc_blocks = 0;
            return iteration(s, next | 1u, done_end, c, n, b, 1);
        }
        s->loop_start = next;
        s->loop_end = done_end;
        s->loop_count = 0;
        s->loop_have = 0;
        s->loop_since = s->cycles;
        s->loop_acc_cost = s->loop_acc_insns = s->loop_acc_blocks = 0;
        return 0;
    }
    if (s->loop_end != 0 && done_start >= s->loop_start && done_end <= s->loop_end && next > done_start &&
        next < s->loop_end && s->loop_acc_blocks + 1 < MULTI_BLOCKS) {
        /* On within the loop's code. */
        s->loop_acc_cost += cost;
        s->loop_acc_insns += insns;
        s->loop_acc_blocks += 1;
        return 0;
    }
    s->loop_start = 0xFFFFFFFFu;
    s->loop_end = 0;
    return 0;
}
