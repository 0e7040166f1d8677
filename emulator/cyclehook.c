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
 *   3. looks the new block up in a per-start-address cache (cost, instruction count,
 *      kind of its last instruction, the alignment checks it needs), filling the cache
 *      the first time from per-halfword tables that Python built with capstone;
 *   4. evaluates the block's alignment checks against the registers at block entry
 *      and stops before the block when one of its word or halfword accesses would be
 *      unaligned (ARMv6-M faults on those; Unicorn does not).
 *
 * The rules the tables encode are in docs/cycle-model.md. This file knows nothing
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

static int in_table(const pk_state *s, uint32_t a) {
    return a >= s->code_base && ((a - s->code_base) >> 1) < s->code_halfwords;
}

/* Representation of a register during the walk of a block: entry values plus const. */
typedef struct { int8_t a, b; uint8_t ok; int32_t off; } rep_t;

static int add_check(pk_state *s, const rep_t *r, int32_t off, uint8_t mask, uint32_t pc) {
    if (s->checks_used == s->checks_cap) {
        uint32_t cap = s->checks_cap ? s->checks_cap * 2 : 1024;
        pk_check *n = realloc(s->checks, cap * sizeof(pk_check));
        if (!n) return -1;
        s->checks = n;
        s->checks_cap = cap;
    }
    pk_check *c = &s->checks[s->checks_used++];
    c->a = r->a;
    c->b = r->b;
    c->mask = mask;
    c->off = r->off + off;
    c->pc = pc;
    return 0;
}

static rep_t rep_add(rep_t x, rep_t y) {
    rep_t r = {-1, -1, 0, 0};
    if (!x.ok || !y.ok) return r;
    if (x.b >= 0 && (y.a >= 0 || y.b >= 0)) return r;
    if (y.b >= 0 && (x.a >= 0 || x.b >= 0)) return r;
    r.ok = 1;
    r.off = x.off + y.off;
    int8_t regs[4] = {x.a, x.b, y.a, y.b};
    int n = 0;
    for (int i = 0; i < 4; i++) {
        if (regs[i] < 0) continue;
        if (n == 0) r.a = regs[i]; else if (n == 1) r.b = regs[i]; else { r.ok = 0; return r; }
        n++;
    }
    return r;
}

/* First visit of a block: walk its instructions once, cache cost and checks.
 * Returns 0, or -1 when the block holds a halfword the tables do not describe
 * (code outside the image's code sections): the caller then asks Python. */
static int fill_block(pk_state *s, uint32_t start, uint32_t size, pk_block *blk) {
    uint32_t end = start + size, a = start, cost = 0, insns = 0, last = 0;
    rep_t reg[16];
    for (int i = 0; i < 16; i++) { reg[i].a = (int8_t)i; reg[i].b = -1; reg[i].ok = 1; reg[i].off = 0; }
    blk->check_first = s->checks_used;
    blk->check_n = 0;
    blk->uncheckable = 0;
    while (a < end) {
        uint32_t h = (a - s->code_base) >> 1;
        uint32_t n = s->len[h];
        if (n == 0) { s->checks_used = blk->check_first; return -1; }
        cost += s->cost[h];
        insns += 1;
        last = a;
        const pk_desc *d = &s->desc[h];
        if (s->align_enabled) {
            rep_t zero = {-1, -1, 1, 0};
            switch (d->kind) {
            case K_CONST: {
                rep_t r = {-1, -1, 1, d->imm};
                reg[d->rd] = r;
                break;
            }
            case K_ADDI: {
                rep_t r = reg[d->rn];
                r.off += d->imm;
                reg[d->rd] = r;
                break;
            }
            case K_ADDR:
                reg[d->rd] = rep_add(reg[d->rn], reg[d->rm]);
                break;
            case K_ACCESS: {
                rep_t base = rep_add(reg[d->rn], d->rm >= 0 ? reg[d->rm] : zero);
                if (!base.ok) blk->uncheckable = 1;
                else if (add_check(s, &base, d->imm, d->amask, a) == 0) blk->check_n++;
                break;
            }
            default:
                break;
            }
            if (d->kind != K_CONST && d->kind != K_ADDI && d->kind != K_ADDR) {
                for (int r = 0; r < 16; r++)
                    if (d->wmask & (1u << r)) reg[r].ok = 0;
            }
        }
        a += 2 * n;
    }
    blk->size = size;
    blk->cost = cost;
    blk->insns = insns;
    blk->last_flags = s->flags[(last - s->code_base) >> 1];
    return 0;
}

static uint32_t read_reg(pk_state *s, int r, uint32_t *cache, uint32_t *have) {
    if (!(*have & (1u << r))) {
        uint32_t v = 0;
        s->reg_read(s->uc, s->regids[r], &v);
        cache[r] = v;
        *have |= 1u << r;
    }
    return cache[r];
}

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
    s->cur_valid = 0;
}

void pk_block_hook(void *uc, uint64_t address, uint32_t size, pk_state *s) {
    uint32_t a = (uint32_t)address;

    if (s->cur_valid) {
        uint32_t c = s->cur_cost, done_start = s->cur_start;
        if ((s->cur_flags & PK_F_COND) && a == s->cur_end) {
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
        s->cycles += c;
        s->insns += s->cur_insns;
        s->blocks += 1;
        s->prev_valid = 1;
        s->prev_end = s->cur_end;
        s->prev_flags = s->cur_flags;
        s->cur_valid = 0;
        if (s->cur_flags & PK_F_IRQCHK) {
            if (!s->native_on) {
                s->stop_reason = STOP_IRQCHK;
                s->emu_stop(uc);
                return;
            }
            s->irq_check = 1;
        }
        if (a == done_start && s->native_on) {
            if (pk_idle_loop(s, a, c, s->cur_insns)) return;
        } else {
            s->loop_start = 0xFFFFFFFFu;
        }
    }
    if (s->native_on) pk_native_due(s);
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

    uint32_t cost, insns, flags;
    int known = in_table(s, a) && in_table(s, a + size - 1);
    if (known) {
        pk_block *blk = &s->cache[(a - s->code_base) >> 1];
        if (blk->size != size) {
            if (blk->size != 0) {
                /* Same start, other length (a run that stopped mid-block): count it
                 * without replacing the cache entry of the usual length. */
                pk_block tmp;
                uint32_t used = s->checks_used;
                known = fill_block(s, a, size, &tmp) == 0;
                s->checks_used = used;
                cost = tmp.cost; insns = tmp.insns; flags = tmp.last_flags;
                goto counted;
            }
            if (fill_block(s, a, size, blk) != 0) { blk->size = 0; known = 0; goto counted; }
        }
        cost = blk->cost;
        insns = blk->insns;
        flags = blk->last_flags;
        if (blk->check_n && s->align_skip_start != a) {
            uint32_t regs[16], have = 0;
            const pk_check *c = &s->checks[blk->check_first];
            for (uint32_t i = 0; i < blk->check_n; i++, c++) {
                uint32_t addr = (uint32_t)c->off;
                if (c->a >= 0) addr += read_reg(s, c->a, regs, &have);
                if (c->b >= 0) addr += read_reg(s, c->b, regs, &have);
                if (addr & c->mask) {
                    s->stop_reason = STOP_ALIGN;
                    s->align_pc = c->pc;
                    s->align_addr = addr;
                    s->emu_stop(uc);
                    return;
                }
            }
        }
    }
counted:
    if (!known) {
        uint64_t r = s->fallback(address, size);
        cost = (uint32_t)(r & 0xFFFFFFFFu);
        insns = (uint32_t)(r >> 32) & 0xFFFFFF;
        flags = (uint32_t)(r >> 56);
    }
    s->align_skip_start = 0xFFFFFFFFu;
    /* Fetch rule with wait states: a block that does not continue sequentially
     * fetches the word holding its first halfword; if that halfword is the upper
     * half of a word the table has not charged the fetch, so charge it here. */
    if (s->fetch_ws && (a & 2) && a >= s->flash_base && a < s->flash_end) {
        int seq = s->prev_valid && a == s->prev_end &&
                  ((s->prev_flags & PK_F_COND) || !(s->prev_flags & PK_F_BRANCH));
        if (!seq) cost += s->fetch_ws;
    }
    s->cur_valid = 1;
    s->cur_start = a;
    s->cur_end = a + size;
    s->cur_cost = cost;
    s->cur_insns = insns;
    s->cur_flags = flags;
    s->ring[s->ring_pos++ % RING] = a;
}

/* Cycles the current block spent before the instruction whose access to ``addr``
 * is being served (a peripheral sees the access at the cycle its instruction
 * starts). The instruction is found among the block's register-addressed word and
 * halfword accesses, in program order, as the next one whose address (from the live
 * registers) is ``addr``; anything else is seen at the block's start
 * (docs/cycle-model.md, "Peripheral accesses"). */
uint32_t pk_access_offset(pk_state *s, uint32_t addr) {
    uint32_t a, end, cost = 0, regs[16], have = 0;
    int32_t index = 0;
    if (!s->cur_valid) return 0;
    if (s->acc_blocks != s->blocks || s->acc_start != s->cur_start) {
        s->acc_blocks = s->blocks;
        s->acc_start = s->cur_start;
        s->acc_last = -1;
    }
    for (a = s->cur_start, end = s->cur_end; a < end; index++) {
        if (!in_table(s, a)) return 0;
        uint32_t h = (a - s->code_base) >> 1;
        if (!s->len[h]) return 0;
        const pk_desc *d = &s->desc[h];
        if (index > s->acc_last && d->kind == K_ACCESS) {
            uint32_t base = read_reg(s, d->rn, regs, &have) + (uint32_t)d->imm;
            if (d->rm >= 0) base += read_reg(s, d->rm, regs, &have);
            int multiple = d->rm < 0 && d->imm == 0 && d->amask == 3;
            if (base == addr || (multiple && addr - base < 64)) {
                s->acc_last = index;
                return cost;
            }
        }
        cost += s->cost[h];
        a += 2 * s->len[h];
    }
    return 0;
}

/* Flash data reads cost the wait states (installed only when wait_states > 0). */
void pk_flash_read_hook(void *uc, int type, uint64_t address, int size, int64_t value, pk_state *s) {
    (void)uc; (void)type; (void)address; (void)size; (void)value;
    s->cycles += s->fetch_ws;
}

pk_block *pk_alloc_cache(uint32_t halfwords) {
    return calloc(halfwords ? halfwords : 1, sizeof(pk_block));
}

void pk_free(pk_state *s) {
    free(s->cache);
    free(s->checks);
    s->cache = NULL;
    s->checks = NULL;
    s->checks_used = s->checks_cap = 0;
}

/* Forget cached blocks (after code in the table changed, e.g. a new image). */
void pk_clear_cache(pk_state *s) {
    if (s->cache) memset(s->cache, 0, (size_t)s->code_halfwords * sizeof(pk_block));
    s->checks_used = 0;
}

uint32_t pk_sizeof_state(void) { return (uint32_t)sizeof(pk_state); }
uint32_t pk_sizeof_desc(void) { return (uint32_t)sizeof(pk_desc); }
