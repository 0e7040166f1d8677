/*
 * pkasim's native state: what every part of the native core shares, in one place.
 *
 * cyclehook.c (the block hook), excmodel.c (exception entry, return, sleep), idle.c
 * (idle loops), observe.c, cthash.c and the devices' fast paths (peripherals/{pka,systick}_fast.c)
 * call these and nothing of each other: register reads with a per-call cache, the
 * commit of the executing block, the cycle offset of a peripheral access inside a
 * block, the NVIC's decisions and the pending of an exception, the table of native
 * devices with timed events (pkstate.h pk_device) and the code cache's invalidation.
 */
#include <string.h>

#include "pkstate.h"

#define FIRST_IRQ 16
#define THREAD_PRIORITY 0x100

/* ------------------------------------------------------------------ registers */

/* Register r (0-15) through Unicorn, read at most once per ``have`` set; r0-r14 read in
 * place on pkasim's engine. */
uint32_t pk_reg_cached(pk_state *s, int r, uint32_t *cache, uint32_t *have) {
    if (s->regs_ptr && r < 15) return s->regs_ptr[r]; /* in place (pkasim's engine) */
    if (!(*have & (1u << r))) {
        uint32_t v = 0;
        s->reg_read(s->uc, s->regids[r], &v);
        cache[r] = v;
        *have |= 1u << r;
    }
    return cache[r];
}

/* ------------------------------------------------------------------ guest memory */

/* Guest memory [addr, addr + n) from the host memory behind its region (RAM and flash,
 * mapped from host memory by the bus: what uc_mem_read returns, without its memory-map
 * walk), else through Unicorn; 0 on success, as uc_mem_read. */
int pk_mem_read(pk_state *s, uint32_t addr, void *out, uint32_t n) {
    return s->code ? pk_code_read(s->code, s->uc, addr, out, n) : s->mem_read(s->uc, addr, out, n);
}

/* ------------------------------------------------------------------ the executing block */

/* Commit the block that is executing: all of it (it ran to its end, or is about to
 * leave through WFI or an exception return, never through its own B<cond>). */
void pk_commit_block(pk_state *s) {
    if (!s->cur_valid) return;
    s->cycles += s->cur_cost;
    s->insns += s->cur_insns;
    s->blocks += 1;
    s->prev_valid = 1;
    s->prev_end = s->cur_end;
    s->prev_flags = s->cur_flags;
    pk_drop_block(s);
}

/* Cycles the current block spent before the instruction whose access to ``addr``
 * is being served (a peripheral sees the access at the cycle its instruction
 * starts). The instruction is found among the block's register-addressed word and
 * halfword accesses, in program order, as the next one whose address (from the live
 * registers) is ``addr``; anything else is seen at the block's start
 * (docs/cycle-model.md, "Peripheral accesses"). */
uint32_t pk_access_offset(pk_state *s, uint32_t addr) {
    uint32_t cost = 0, regs[16], have = 0;
    pk_insn insn[512];
    if (!s->cur_valid) return 0;
    /* A new execution of a block: its start, or the committed count, differs (every
     * block costs at least a cycle; in counted mode the engine counts no blocks). */
    if (s->acc_blocks != s->cycles || s->acc_start != s->cur_start) {
        s->acc_blocks = s->cycles;
        s->acc_start = s->cur_start;
        s->acc_last = -1;
    }
    uint32_t count;
    const pk_acc *acc = pk_code_accesses(s->code, s->uc, s->cur_start, s->cur_end, &count);
    if (acc) {
        /* The same search over the block's access list, decoded once (codecache.c). */
        for (int32_t k = s->acc_last + 1; k < (int32_t)count; k++) {
            uint32_t base = pk_reg_cached(s, acc[k].rn, regs, &have) + (uint32_t)acc[k].imm;
            if (acc[k].rm >= 0) base += pk_reg_cached(s, acc[k].rm, regs, &have);
            if (base == addr || (acc[k].multiple && addr - base < 64)) {
                s->acc_last = k;
                return acc[k].cost;
            }
        }
        return 0;
    }
    uint32_t n = pk_code_decode_range(s->code, s->uc, s->cur_start, s->cur_end, insn, 512, 0);
    for (uint32_t index = 0; index < n; index++) {
        const pk_desc *d = &insn[index].desc;
        if ((int32_t)index > s->acc_last && d->kind == K_ACCESS) {
            uint32_t base = pk_reg_cached(s, d->rn, regs, &have) + (uint32_t)d->imm;
            if (d->rm >= 0) base += pk_reg_cached(s, d->rm, regs, &have);
            int multiple = d->rm < 0 && d->imm == 0 && d->amask == 3;
            if (base == addr || (multiple && addr - base < 64)) {
                s->acc_last = (int32_t)index;
                return cost;
            }
        }
        cost += insn[index].cost;
    }
    return 0;
}

/* Cycles and instructions from the current block's start up to stop (a run that
 * stopped in the middle of a block commits exactly what executed). */
uint32_t pk_cost_before(pk_state *s, uint32_t stop, uint32_t *insns) {
    return pk_code_cost_range(s->code, s->uc, s->cur_start, stop, insns);
}

/* Code at [addr, addr + len) was written (by the debugger, or by the guest through
 * pk_code_write_hook): forget the blocks decoded from it, and the loop verdicts made
 * on them. Returns 1 if cached code was there. */
int pk_code_changed(pk_state *s, uint32_t addr, uint32_t len) {
    if (!pk_code_written(s->code, addr, len)) return 0;
    memset(s->verdict_addr, 0xFF, sizeof s->verdict_addr);
    memset(s->verdict, 0, sizeof s->verdict);
    s->loop_start = 0xFFFFFFFFu;
    return 1;
}

/* ------------------------------------------------------------------ the NVIC's decisions
 * (peripherals/nvic.py Nvic.next_to_take / would_wake, line for line) */

static int is_enabled(const pk_nvic *n, int e) {
    return e < FIRST_IRQ || (n->enabled >> (e - FIRST_IRQ) & 1);
}

/* Set bits in ascending order: for each pending exception, lowest number first. */
static int best_pending(const pk_nvic *n) {
    int best = -1;
    for (uint64_t m = n->pending; m; m &= m - 1) {
        int e = __builtin_ctzll(m);
        if (!is_enabled(n, e)) continue;
        if (best < 0 || n->prio[e] < n->prio[best]) best = e; /* ties: the lower number */
    }
    return best;
}

static int execution_priority(const pk_nvic *n, int primask) {
    int prio = THREAD_PRIORITY;
    for (uint64_t m = n->active; m; m &= m - 1) {
        int e = __builtin_ctzll(m);
        if (n->prio[e] < prio) prio = n->prio[e];
    }
    if (primask && prio > 0) prio = 0;
    return prio;
}

int pk_next_to_take(const pk_nvic *n, int primask) {
    int best = best_pending(n);
    if (best < 0) return -1;
    return n->prio[best] < execution_priority(n, primask) ? best : -1;
}

int pk_would_wake(const pk_nvic *n) {
    int best = best_pending(n);
    return best >= 0 && n->prio[best] < execution_priority(n, 0);
}

/* An IRQ line of a native device: Nvic.set_pending, then the core looks again. */
void pk_pend(pk_state *s, uint32_t exc) {
    pk_nvic *n = s->nvic;
    if (exc >= FIRST_IRQ + n->irqs || exc >= 64) return;
    if (!(n->pending >> exc & 1)) {
        n->pending |= (uint64_t)1 << exc;
        s->irq_check = 1;
        pk_counted_wake(s);
        if (s->obs) pk_obs_emit(s->obs, PK_EV_IRQ_PEND, s->cycles, exc, 0);
    }
}

/* ------------------------------------------------------------------ native device events */

uint64_t pk_native_next(pk_state *s) {
    uint64_t next = PK_NO_EVENT;
    for (uint32_t i = 0; i < s->n_devices; i++) {
        uint64_t t = s->devices[i].next(s->devices[i].dev);
        if (t < next) next = t;
    }
    return next;
}

/* Fire every native device event whose time has come (at a block boundary, as the
 * clock fires Python's). A step long past (a SysTick period shorter than the block
 * that ran) fires as often as it was due, as the clock's run_due does. */
void pk_native_due(pk_state *s) {
    if (s->cycles < s->native_min) return;
    for (uint32_t i = 0; i < s->n_devices; i++) {
        pk_device *d = &s->devices[i];
        while (d->next(d->dev) <= s->cycles) {
            d->due(d->dev);
            s->dev_events++;
        }
    }
    s->native_min = pk_native_next(s);
    pk_counted_wake(s);
}

/* A native device's next event may have moved earlier (Python wrote its state):
 * pk_native_due looks again at the next block boundary. */
void pk_native_changed(pk_state *s) {
    s->native_min = 0;
    pk_counted_wake(s);
}

/* ------------------------------------------------------------------ lifetime */

/* Release the code cache of a machine that is going away. */
void pk_free(pk_state *s) {
    pk_code_free(s->code);
    s->code = NULL;
}

uint32_t pk_sizeof_state(void) { return (uint32_t)sizeof(pk_state); }
uint32_t pk_sizeof_insn(void) { return (uint32_t)sizeof(pk_insn); }
