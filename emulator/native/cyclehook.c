/*
 * pkasim cycle hook: the per-block work of the cycle model, in native code.
 *
 * Unicorn calls pk_block_hook() at the start of every translated block it is about
 * to execute. The hook
 *   1. commits the previous block's cycles, taking 2 cycles back when that block
 *      ended in a conditional branch that was not taken (the next block starts at
 *      its fall-through address; DDI0432C table 3-1: B<cond> 3 taken, 1 not taken);
 *   2. stops the run when the committed cycle count has reached the deadline (the
 *      next peripheral event, an interrupt check, or the cycle budget), before the
 *      new block executes;
 *   3. looks the new block up in the code cache (codecache.c: cost, instruction
 *      count, kind of its last instruction, the alignment checks it needs, its first
 *      instruction outside ARMv6-M), which decodes it natively from guest memory
 *      (thumb.c) the first time, wherever it is: flash, SRAM, any executable region;
 *   4. evaluates the block's alignment checks against the registers at block entry
 *      (or runs its alignment program, unaligned.c, when the block computes or loads an
 *      address itself) and stops before the block when one of its word or halfword
 *      accesses would be unaligned (ARMv6-M faults on those; Unicorn does not), when
 *      an address can only be known mid-block or the block sets SP from a register
 *      (the machine then runs the block in two parts), or when the block holds an
 *      instruction ARMv6-M does not have (UNDEFINED; Unicorn executes some).
 *
 * The rules are in docs/cycle-model.md. This file knows nothing
 * of RSA, peripherals or Python; it is loaded with ctypes (no Python C API).
 */
#include <stdlib.h>
#include <string.h>

#include "pkstate.h"

/* ARM condition codes against NZCV (ARMv6-M ARM A6.3.1). */
static int cond_holds(uint32_t cond, uint32_t apsr) {
    uint32_t n = apsr >> 31 & 1, z = apsr >> 30 & 1, c = apsr >> 29 & 1, v = apsr >> 28 & 1;
    switch (cond) {
    case 0: return z;
    case 1: return !z;
    case 2: return c;
    case 3: return !c;
    case 4: return n;
    case 5: return !n;
    case 6: return v;
    case 7: return !v;
    case 8: return c && !z;
    case 9: return !c || z;
    case 10: return n == v;
    case 11: return n != v;
    case 12: return !z && n == v;
    case 13: return z || n != v;
    default: return 1;
    }
}

/* Run a block's alignment program (unaligned.c); 1 if it stopped the run before the block. */
static int align_program(pk_state *s, void *uc, const pk_block *blk) {
    static const uint32_t stop[4] = {STOP_NONE, STOP_ALIGN, STOP_ALIGN_SPLIT, STOP_SP_WRITE};
    pk_aregs regs = {uc, s->reg_read, s->regids, s->apsr_regid, s->id_control, s->id_ipsr,
                     s->id_msp, s->id_psp, s->regs_ptr};
    uint32_t pc = 0, addr = 0;
    int found = pk_align_run(pk_code_program(s->code, blk), blk->check_n, pk_code_memory(s->code), &regs, &pc, &addr);
    if (found == PK_ALIGN_OK) return 0;
    s->stop_reason = stop[found];
    s->align_pc = pc;
    s->align_addr = addr;
    s->emu_stop(uc);
    return 1;
}

/* Whether a block's alignment program finds nothing to stop for (it changes nothing):
 * a quick one inline (unaligned.h pk_align_quick), with r0-r14 in place. */
static int program_passes(pk_state *s, void *uc, const pk_block *blk) {
    const pk_aop *ops = pk_code_program(s->code, blk);
    if ((ops->size & PK_SHAPE_QUICK) && s->regs_ptr &&
        pk_align_quick(ops, blk->check_n, pk_code_memory(s->code), s->regs_ptr))
        return 1;
    pk_aregs regs = {uc, s->reg_read, s->regids, s->apsr_regid, s->id_control, s->id_ipsr,
                     s->id_msp, s->id_psp, s->regs_ptr};
    uint32_t pc = 0, addr = 0;
    return pk_align_run(pk_code_program(s->code, blk), blk->check_n, pk_code_memory(s->code), &regs, &pc, &addr) ==
           PK_ALIGN_OK;
}

/* A block's register alignment checks (not a program) against the registers now:
 * the first that fails (its address in *addr), or NULL. */
static const pk_check *failing_check(pk_state *s, const pk_block *blk, uint32_t *addr) {
    uint32_t regs[16], have = 0;
    const pk_check *c = pk_code_checks(s->code, blk);
    for (uint32_t i = 0; i < blk->check_n; i++, c++) {
        uint32_t at = (uint32_t)c->off;
        if (c->a >= 0) at += pk_reg_cached(s, c->a, regs, &have);
        if (c->b >= 0) at += pk_reg_cached(s, c->b, regs, &have);
        if (at & c->mask) {
            *addr = at;
            return c;
        }
    }
    return NULL;
}

/* Whether a block's register alignment checks pass: with r0-r14 in place (the checks
 * never name PC), every check at once and one branch; failing_check finds which. */
static int checks_pass(pk_state *s, const pk_block *blk) {
    uint32_t addr;
    const uint32_t *in = s->regs_ptr;
    if (in) {
        const pk_check *c = pk_code_checks(s->code, blk), *end = c + blk->check_n;
        uint32_t bad = 0;
        for (; c < end; c++) {
            uint32_t at = (uint32_t)c->off;
            if (c->a >= 0) at += in[c->a];
            if (c->b >= 0) at += in[c->b];
            bad |= at & c->mask;
        }
        if (!bad) return 1;
    }
    return failing_check(s, blk, &addr) == NULL;
}

/* The block's counted mode (1 plain, 2 inside a loop the idle check follows) and the
 * trust tag of its loop (idle.c), decided once per cached block. */
static uint32_t block_mode(pk_state *s, const pk_block *blk, const pk_block *scratch, uint32_t a, uint32_t size,
                           uint32_t *tag) {
    if (blk == scratch || !blk->mode) {
        uint32_t mode = pk_idle_relevant(s, a, a + size, tag) ? 2 : 1;
        if (blk != scratch) {
            ((pk_block *)blk)->mode = (uint8_t)mode;
            ((pk_block *)blk)->trust_tag = *tag;
        }
        return mode;
    }
    *tag = blk->trust_tag;
    return blk->mode;
}

/* Fetch rule with wait states: a block that does not continue sequentially fetches
 * the word holding its first halfword; if that halfword is the upper half of a word
 * the table has not charged the fetch, so the block at ``a`` (the one after the block
 * prev_* records) costs it on top. */
static uint32_t entry_fetch(const pk_state *s, uint32_t a) {
    if (s->fetch_ws && (a & 2) && a >= s->flash_base && a < s->flash_end) {
        int seq = s->prev_valid && a == s->prev_end && ((s->prev_flags & PK_F_COND) || !(s->prev_flags & PK_F_BRANCH));
        if (!seq) return s->fetch_ws;
    }
    return 0;
}

/* The trust epoch is over (or the count was set back since it began): idle.c. */
static void trust_epoch(pk_state *s) {
    if (s->cycles >= s->trust_end || s->trust_end - s->cycles > PK_TRUST_CYCLES) pk_trust_expire(s);
}

/* The block start at ``at`` is the one the call probe awaits next: in counted mode its
 * next translation calls the hook (pk_block_cost); on the stock wheel its cached block,
 * its mode unknown again, goes to block_start instead of the hook's common path. */
static void probe_await(pk_state *s, uint32_t at) {
    s->probe_at = at;
    if (s->code) pk_code_undecide(s->code, at);
}

/* Arm the call probe for a function whose first instruction is at ``entry``
 * (Machine.probe_call; the caller drops the entry's translation). */
void pk_probe_arm(pk_state *s, uint32_t entry) {
    s->probe_state = PROBE_ENTRY;
    s->probe_cycles[0] = s->probe_cycles[1] = 0;
    s->probe_insns[0] = s->probe_insns[1] = 0;
    probe_await(s, entry);
}

/* A mark of the measured call (pk_state probe_*), at the start of the block at ``a``
 * (``size`` bytes), which is about to run: the count a run stopped there reads (a
 * breakpoint's, or until's: the block's entry fetch paid, settle.py) is the call's
 * start or end. At the entry the return address (LR, a Thumb address) is awaited next; in
 * counted mode its block, if translated already, is dropped so that its next
 * translation calls the hook (pk_block_cost). A return that cannot be awaited so (LR
 * not a Thumb address, or EXC_RETURN; inside this very block; its translation not
 * dropped) stops the run before the block instead (STOP_PROBE, PROBE_STOPPED): the
 * run loop measures that call with a breakpoint. Returns 1 when it stopped the run. */
static int probe_mark(pk_state *s, void *uc, uint32_t a, uint32_t size) {
    if (s->probe_state == PROBE_ENTRY) {
        uint32_t lr = 0;
        if (s->regs_ptr) lr = s->regs_ptr[14];
        else s->reg_read(uc, s->regids[14], &lr);
        uint32_t ret = lr & ~1u;
        if (!(lr & 1) || ret >= 0xF0000000u || (ret >= a && ret < a + size) ||
            (s->counted && (!s->uc_ctl || s->uc_ctl(uc, s->ctl_remove_cache, (uint64_t)ret, (uint64_t)ret + 2) != 0))) {
            s->probe_state = PROBE_STOPPED;
            s->probe_at = PK_NONE;
            s->stop_reason = STOP_PROBE;
            s->emu_stop(uc);
            return 1;
        }
        s->probe_cycles[0] = s->cycles + entry_fetch(s, a);
        s->probe_insns[0] = s->insns;
        s->probe_state = PROBE_CALL;
        probe_await(s, ret);
        if (s->probe_py) s->probe_py(0);
    } else if (s->probe_state == PROBE_CALL) {
        s->probe_cycles[1] = s->cycles + entry_fetch(s, a);
        s->probe_insns[1] = s->insns;
        s->probe_state = PROBE_DONE;
        s->probe_at = PK_NONE;
        if (s->probe_py) s->probe_py(1);
    }
    return 0;
}

/* The work at a block start. ``counted``: the engine's generated code has already
 * added the previous block's cycles and instructions (uc_block_account, docs/engine.md)
 * and applied its not-taken adjustment; the rest is the same. */
static void block_start(void *uc, uint32_t a, uint32_t size, pk_state *s, int counted, const pk_block *hit) {
    /* The block's totals: cached (``hit``: already looked up), or decoded from guest
     * memory now (codecache.c). */
    pk_block scratch;
    int err = 0, watch = -1;
    uint32_t tag = 0, mode = 0;
    const pk_block *blk = hit ? hit : pk_code_block(s->code, uc, a, size, (int)s->align_enabled, &scratch, &err, &watch);
    if (blk) mode = block_mode(s, blk, &scratch, a, size, &tag);
    if (s->span_hi && !(s->span_lo <= a && a + size <= s->span_hi)) {
        /* Leaving the span of a loop decided for this entry: followed again. */
        s->span_lo = 0xFFFFFFFFu;
        s->span_hi = 0;
    }
    if (s->cur_valid) {
        uint32_t c = s->cur_cost, done_start = s->cur_start, done_insns = s->cur_insns;
        if (!counted && (s->cur_flags & PK_F_COND) && a == s->cur_end) {
            /* Fall-through address: not taken, unless the branch targets that very
             * address, in which case the flags (unchanged since) decide. */
            int taken = 0;
            if (s->cur_flags & PK_F_CONDNEXT) {
                uint32_t apsr = 0;
                s->reg_read(uc, s->apsr_regid, &apsr);
                taken = cond_holds((s->cur_flags >> 4) & 0xF, apsr);
            }
            if (!taken) c -= s->cond_penalty;
        }
        if (!counted) {
            s->cycles += c;
            s->insns += done_insns;
        }
        s->blocks += 1;
        s->prev_valid = 1;
        s->prev_end = s->cur_end;
        s->prev_flags = s->cur_flags;
        pk_drop_block(s);
        trust_epoch(s);
        if (s->cur_flags & PK_F_IRQCHK) {
            if (!s->native_on) {
                s->stop_reason = STOP_IRQCHK;
                s->emu_stop(uc);
                return;
            }
            s->irq_check = 1;
        }
        if (!s->native_on) {
            s->loop_start = 0xFFFFFFFFu;
        } else if (mode != 2 || s->span_hi || pk_trusted(s, tag)) {
            /* Not followed, on either engine (counted mode runs these blocks without
             * the hook): a block outside every loop the idle check could skip, a
             * block of the loop decided for this entry (the span), a block of a loop
             * trusted to make progress (idle.c; patch 9's gate). The next block the
             * check follows is judged with the block before it, whichever that was. */
        } else if (a == done_start) {
            if (pk_idle_loop(s, a, s->cur_end, c, done_insns)) return;
        } else {
            /* The block about to run, as it runs when it goes on to its end. */
            pk_upcoming up = {0, 0, 0};
            if (blk) {
                up.end = a + size;
                up.cost = blk->cost + entry_fetch(s, a) - ((blk->last_flags & PK_F_COND) ? s->cond_penalty : 0);
                up.insns = blk->insns;
            }
            if (a < done_start || s->loop_end) {
                /* A branch back, or within a loop of several blocks being followed. */
                if (pk_idle_track(s, done_start, s->cur_end, a, c, done_insns, &up)) return;
            } else {
                pk_idle_enter(s, done_start, s->cur_end, a, c, &up); /* a known loop is followed from here */
            }
        }
    } else {
        trust_epoch(s);
        if (s->split_start == a) {
            /* The rest of a block split by the alignment checks (the first block of its
             * run, so nothing is committed here): it was admitted whole. */
            s->split_start = 0xFFFFFFFFu;
            goto admitted;
        }
    }
    if (s->native_on && s->cycles >= s->native_min) pk_native_due(s);
    if (s->cycles >= s->deadline) {
        s->stop_reason = STOP_DEADLINE;
        s->emu_stop(uc);
        return;
    }
    if (s->irq_check && s->native_on) {
        /* An exception may have become takeable: take it before this block runs
         * (ARMv6-M B1.5.4), as the run loop would after a stop here. */
        uint32_t primask = 0;
        int exc;
        s->irq_check = 0;
        s->reg_read(uc, s->id_primask, &primask);
        exc = pk_next_to_take(s->nvic, (int)(primask & 1));
        if (exc >= 0) {
            if (pk_take(s, exc, a) == 0) return; /* PC now at the vector: this block does not run */
            s->stop_reason = STOP_IRQCHK;         /* the run loop takes it (and reports the fault) */
            s->emu_stop(uc);
            return;
        }
    }
    if (a == s->probe_at && probe_mark(s, uc, a, size)) return;

admitted:
    if (blk && blk != &scratch && blk->start != a) { /* (the cache was emptied meanwhile) */
        blk = pk_code_block(s->code, uc, a, size, (int)s->align_enabled, &scratch, &err, &watch);
        if (blk) mode = block_mode(s, blk, &scratch, a, size, &tag);
    }
    if (!blk) {
        s->stop_reason = STOP_NATIVE_ERROR;
        s->native_error = (uint32_t)err;
        s->emu_stop(uc);
        return;
    }
    if (watch < 0 && counted) watch = pk_code_watch_needed(s->code); /* decoded at translation */
    if (watch >= 0) {
        /* Code now runs from writable memory the write watch does not cover yet:
         * stop before the block so the machine can extend the watch. */
        s->stop_reason = STOP_WATCH;
        s->watch_region = (uint32_t)watch;
        s->emu_stop(uc);
        return;
    }
    if (s->align_skip_start != a) {
        if (blk->program) {
            if (align_program(s, uc, blk)) return;
        } else if (blk->check_n) {
            uint32_t addr;
            const pk_check *c = failing_check(s, blk, &addr);
            if (c != NULL) {
                /* a partial check (an aligned operand left out): the block runs up to
                 * the access, whose address is then registers the new block received */
                s->stop_reason = c->partial ? STOP_ALIGN_SPLIT : STOP_ALIGN;
                s->align_pc = c->pc;
                s->align_addr = c->partial ? 0 : addr;
                s->emu_stop(uc);
                return;
            }
        }
        if (blk->undef_off != PK_NONE) {
            /* An instruction outside ARMv6-M: stop before the block; the machine runs
             * the instructions before it, then takes the fault there. */
            s->stop_reason = STOP_UNDEF;
            s->undef_pc = a + blk->undef_off;
            s->emu_stop(uc);
            return;
        }
    }
    uint32_t cost = blk->cost, insns = blk->insns, flags = blk->last_flags;
    s->align_skip_start = 0xFFFFFFFFu;
    cost += entry_fetch(s, a);
    s->cur_mode = mode;
    s->cur_valid = 1;
    s->cur_start = a;
    s->cur_end = a + size;
    s->cur_cost = cost;
    s->cur_insns = insns;
    s->cur_flags = flags;
    pk_ring_note(s, a);
}

/* The stock wheel's block hook. The common block start (the block before it ran to
 * its end, nothing is due, the block is cached, its checks pass, the idle check does
 * not follow it) only commits and records; block_start does the same and all the
 * rest (and reports a check that fails). */
void pk_block_hook(void *uc, uint64_t address, uint32_t size, pk_state *s) {
    uint32_t a = (uint32_t)address;
    /* The lookup first: its loads overlap the tests of the state below, which are
     * combined without a branch each (at nearly every block they all pass). */
    const pk_block *blk = pk_code_hit(s->code, a, size);
    uint32_t flags = s->cur_flags;
    uint32_t other = (uint32_t)!s->cur_valid | (flags & (PK_F_IRQCHK | PK_F_CONDNEXT)) | (uint32_t)!s->native_on |
                     s->irq_check | s->fetch_ws | s->span_hi | (uint32_t)(s->align_skip_start == a);
    if (!other && blk && blk->mode && blk->undef_off == PK_NONE &&
        (blk->mode != 2 || pk_trusted(s, blk->trust_tag))) {
        uint64_t cycles = s->cycles + s->cur_cost - ((flags & PK_F_COND) && a == s->cur_end ? s->cond_penalty : 0);
        uint64_t limit = s->native_min < s->deadline ? s->native_min : s->deadline;
        if (s->trust_end < limit) limit = s->trust_end;
        if (cycles < limit && s->trust_end - cycles <= PK_TRUST_CYCLES &&
            (blk->program ? program_passes(s, uc, blk) : !blk->check_n || checks_pass(s, blk))) {
            s->cycles = cycles;
            s->insns += s->cur_insns;
            s->blocks += 1;
            s->prev_valid = 1;
            s->prev_end = s->cur_end;
            s->prev_flags = flags;
            s->align_skip_start = 0xFFFFFFFFu;
            s->cur_mode = blk->mode;
            s->cur_start = a;
            s->cur_end = a + size;
            s->cur_cost = blk->cost;
            s->cur_insns = blk->insns;
            s->cur_flags = blk->last_flags;
            pk_ring_note(s, a);
            return;
        }
    }
    block_start(uc, a, size, s, 0, blk);
}

/* ------------------------------------------------------------------ counted mode */

/* Something the counted hook decides on changed (an exception may be takeable, a
 * device event moved, the deadline came closer): call the hook at the next block. */
void pk_counted_wake(pk_state *s) { s->limit = s->limit_inline = 0; }

/* A native device's next event moved earlier, to ``at``, and nothing else the hook
 * decides on changed: the limit pk_counted_relimit would now make (it takes the least of
 * the deadline, native_min and the trust epoch's end) is the one it made, or ``at``.
 * Lowering it here spares a hook call at the next block start, which would find
 * nothing to do there. */
void pk_counted_soon(pk_state *s, uint64_t at) {
    if (at < s->limit) s->limit = at;
    if (at < s->limit_inline) s->limit_inline = at;
}

/* The cycle count at which the generated code must call the hook again, or 0 for the
 * next block: the deadline, a native device's next event or the end of the trust
 * epoch (idle.c); at once while anything must be looked at per block (no native
 * paths, an observer), when an exception may have become takeable, and after a
 * block that can change what is takeable. (The blocks the idle check follows call
 * the hook by their mode, UC_BLOCK_SPAN.) */
void pk_counted_relimit(pk_state *s) {
    uint64_t lim = s->deadline;
    if (s->native_min < lim) lim = s->native_min;
    if (s->trust_end < lim) lim = s->trust_end; /* the trust epoch's end (idle.c) */
    if (!s->native_on || s->obs || s->irq_check) lim = 0;
    if (s->cur_valid) {
        if (s->cur_flags & PK_F_IRQCHK) lim = 0;
    }
    s->limit = lim;
    s->limit_inline = s->span_hi ? 0 : lim; /* (engine patch 19: the quick test, no span) */
}

void pk_block_hook_counted(void *uc, uint64_t address, uint32_t size, pk_state *s) {
    block_start(uc, (uint32_t)address, size, s, 1, NULL);
    pk_counted_relimit(s);
}

/* Unicorn's uc_block_cost (the engine's patch 5). */
typedef struct {
    uint32_t cost, insns, flags, not_taken, mode, hook_next;
    uint32_t entry_cost, seq_mask, seq_value; /* patch 11: a cost unless entered sequentially */
    uint32_t gate_tag; /* UC_BLOCK_SPAN: no hook while no span is set and *gate == gate_tag (patch 17) */
    uint32_t *gate;
} pk_block_cost_t;

/* At translation: what the engine's generated code counts for the block
 * [address, address + size). Blocks the hook must see at every start (an
 * instruction ARMv6-M lacks, alignment checks of pkasim's own) get none. */
int pk_block_cost(void *uc, uint64_t address, uint32_t size, pk_block_cost_t *c, pk_state *s) {
    uint32_t a = (uint32_t)address;
    pk_block scratch;
    int err, watch;
    const pk_block *blk = pk_code_block(s->code, uc, a, size, (int)s->align_enabled, &scratch, &err, &watch);
    if (!blk) return 0; /* the hook at every start: it reports the error */
    uint32_t tag;
    uint32_t mode = block_mode(s, blk, &scratch, a, size, &tag);
    c->cost = blk->cost;
    c->insns = blk->insns;
    c->flags = blk->last_flags;
    /* the hook or the generated code records the block; either way its exit through
     * the fall-through of its B<cond> takes the not-taken cycles off */
    c->not_taken = (blk->last_flags & PK_F_COND) ? s->cond_penalty : 0;
    c->hook_next = (blk->last_flags & PK_F_IRQCHK) ? 1 : 0;
    /* With flash wait states, a block at the upper half of a flash word costs the
     * fetch of that word unless it continues the block before sequentially (the
     * fetch rule, as block_start applies it): the generated code decides from the
     * record of the block before (patch 11), or calls the hook when there is none. */
    if (s->fetch_ws && (a & 2) && a >= s->flash_base && a < s->flash_end) {
        c->entry_cost = s->fetch_ws;
        c->seq_mask = PK_F_COND | PK_F_BRANCH;
        c->seq_value = PK_F_BRANCH; /* sequential: a conditional branch's fall-through, or no branch */
    }
    /* The hook at every start: an instruction ARMv6-M lacks, pkasim's own alignment
     * checks, code the write watch must cover first, the block a call probe awaits. */
    if (watch >= 0 || blk->undef_off != PK_NONE || blk->check_n || a == s->probe_at) c->mode = 1; /* UC_BLOCK_HOOK */
    else c->mode = mode == 2 ? 2 : 0; /* UC_BLOCK_SPAN or UC_BLOCK_INLINE */
    /* A block of exactly one loop the idle check follows: no hook while that loop is
     * trusted (its slot holds its tag, idle.c) and no span is set. */
    c->gate_tag = c->mode == 2 ? tag : 0;
    c->gate = c->gate_tag ? pk_trust_gate(s, tag) : NULL;
    return 1;
}

/* Flash data reads cost the wait states (installed only when wait_states > 0). */
void pk_flash_read_hook(void *uc, int type, uint64_t address, int size, int64_t value, pk_state *s) {
    (void)uc; (void)type; (void)address; (void)size; (void)value;
    s->cycles += s->fetch_ws;
}

/* A watchpoint's memory hook (emulator/core/watchpoints.py): its range widened REACH
 * bytes below, for the first access of an LDM/STM/PUSH/POP that reaches it. An
 * access wholly below the range matters only as such a first access: when the block
 * the cycle hook recorded holds none of them, return without calling Python (a store
 * loop right below a watched word would otherwise call it at every store there). */
typedef void (*pk_hookmem_fn)(void *uc, int type, uint64_t address, int size, int64_t value, void *user);
typedef struct {
    pk_state *s;
    pk_hookmem_fn py; /* the Python hook */
    uint32_t first;   /* the watched range's first byte */
} pk_watch_hook_t;

void pk_watch_hook(void *uc, int type, uint64_t address, int size, int64_t value, pk_watch_hook_t *w) {
    pk_state *s = w->s;
    if (address + (uint64_t)size <= w->first && s->cur_valid && s->cur_end > s->cur_start &&
        s->cur_end - s->cur_start <= 4096) {
        uint8_t code[4096];
        uint32_t n = s->cur_end - s->cur_start, at = 0;
        int multi = 0;
        if (s->mem_read(uc, s->cur_start, code, n) == 0) {
            while (at + 2 <= n && !multi) {
                uint32_t hw = (uint32_t)code[at] | (uint32_t)code[at + 1] << 8;
                multi = (hw & 0xF600) == 0xB400 || (hw & 0xF000) == 0xC000; /* PUSH/POP, STM/LDM */
                at += hw >> 11 >= 0x1D ? 4 : 2;
            }
            if (!multi) return;
        }
    }
    w->py(uc, type, address, size, value, NULL);
}

/* Guest stores to watched code (a UC_HOOK_MEM_WRITE over the code span of a
 * writable region, installed by emulator/core/codecache.py once code runs there). */
void pk_code_write_hook(void *uc, int type, uint64_t address, int size, int64_t value, pk_state *s) {
    (void)uc; (void)type; (void)value;
    pk_code_changed(s, (uint32_t)address, (uint32_t)size);
}
