/*
 * The PKA's common path in native code: register and PKA RAM accesses, an operation
 * from START to its end, and the done interrupt, without a Python call.
 *
 * peripherals/pka.py is the model and the reference: its register map, rules and
 * maths (pka_math.py) are the specification (docs/pka.md). This file serves only what
 * those rules let through untouched: word accesses to registers and PKA RAM while
 * idle, CLRFR, SR, and a START of MONTMUL with valid operands whose result the CIOS
 * product below reduces completely, of MODADD and MODSUB with both operands below N
 * (one conditional correction), of ADD and SUB, and, on a chip with the parallel pair,
 * of MONTMUL2 as of MONTMUL. Anything else (a wrong size, a reserved offset, a write
 * while BUSY, a refused START, a modular operand at or above N) is handed to pka.py
 * through ``py_access``, on the same state record, so both paths see one PKA.
 * tests/test_pka_fast.py drives both with the same random programs and compares.
 *
 * Register map (docs/pka.md): 0x00 CR, 0x04 SR, 0x08 CLRFR, 0x0C LEN, 0x10 APTR,
 * 0x14 BPTR, 0x18 NPTR, 0x1C RPTR, 0x20 CARRY, 0x24 LASTCYC, 0x28 MAXLEN, 0x2C RAMSIZE;
 * PKA RAM at 0x400. CAPS (0x30) and the parallel pair's A2PTR and R2PTR (0x34, 0x38)
 * are at or above REG_WINDOW: pka.py serves their accesses; a MONTMUL2 START reads the
 * pointers from the shared record.
 */
#include <stdlib.h>
#include <string.h>

#include "pka_montmul.h"
#include "pkstate.h"

enum { CR = 0, SR, CLRFR, LEN, APTR, BPTR, NPTR, RPTR, CARRY, LASTCYC, MAXLEN, RAMSIZE, NREGS };

#define REG_WINDOW 0x30u
#define RAM_OFFSET 0x400u
#define CR_EN (1u << 0)
#define CR_START (1u << 1)
#define CR_OPCODE_SHIFT 8
#define CR_OPCODE (0x3Fu << CR_OPCODE_SHIFT)
#define CR_WRITABLE (CR_EN | CR_OPCODE | (1u << 17) | (1u << 19) | (1u << 20) | (1u << 21))
#define SR_BUSY (1u << 16)
#define SR_PROCENDF (1u << 17)
#define SR_FLAGS ((1u << 17) | (1u << 19) | (1u << 20) | (1u << 21))
#define OP_MONTMUL 1
#define OP_MODADD 2
#define OP_MODSUB 3
#define OP_ADD 4
#define OP_SUB 5
#define OP_MONTMUL2 6 /* the parallel pair (montmul_pair chips): R = A (x) B, R2 = A2 (x) B */
#define FAST_OPS 7 /* opcodes 1..6 are served here; index 0 unused */
#define A2PTR 13   /* 0x34 / 4 */
#define R2PTR 14   /* 0x38 / 4 */
#define MAX_WORDS 128
#define LOG_LIMIT 100000

typedef struct {
    uint32_t op, words;
    uint64_t start, end;
} pk_pka_op;

/* Mirrored by peripherals/pka.py PkaState. */
typedef struct {
    uint32_t regs[16];      /* by offset / 4 (SR's word unused: flags + busy below) */
    uint32_t flags;         /* SR flag bits */
    uint32_t irq_sources;   /* flag & enable bits at the last IRQ decision */
    uint32_t busy;          /* an operation is in flight (this path's or pka.py's) */
    uint32_t fast_busy;     /* ... and it is this path's: it ends at done_at */
    uint64_t done_at;
    uint32_t irq_exc;       /* exception number the IRQ line pends; 0: not wired */
    uint32_t base;          /* bus address of the window */
    uint32_t ram_size, max_words, fast_on;
    uint8_t *ram;
    const uint32_t *op_cycles; /* busy cycles by [opcode][LEN], FAST_OPS x (MAX_WORDS + 1) */
    pk_state *core;
    pk_py_access_fn py_access;
    /* the operation in flight */
    uint32_t p_words, p_rptr;
    uint64_t p_start;
    uint32_t p_cycles, p_op, p_carry, pad;
    uint32_t result[MAX_WORDS];
    /* what this path did (pka.py adds its own counts) */
    uint64_t ops[FAST_OPS], busy_total;
    uint64_t by_len[FAST_OPS][MAX_WORDS + 1];
    pk_pka_op *log;
    uint32_t log_n, log_cap, log_truncated, pad2;
    uint32_t strict;        /* strict_operands: a MONTMUL with A or B >= N is pka.py's to refuse */
    uint32_t py_starts;     /* a fault is armed on a START (Pka.arm_fault): every START is pka.py's */
    uint32_t pair;          /* montmul_pair: MONTMUL2 is an operation of this chip */
    uint32_t p_r2ptr, pad3; /* MONTMUL2 in flight: where its second result goes */
    uint32_t result2[MAX_WORDS];
} pk_pka;

/* ------------------------------------------------------------------ maths */


/* r = a + b mod 2^(32w) (sub = 0) or a - b (sub = 1); returns the carry or borrow out. */
static uint32_t add_sub(uint32_t *r, const uint32_t *a, const uint32_t *b, uint32_t w, int sub) {
    uint64_t c = 0;
    for (uint32_t i = 0; i < w; i++) {
        if (sub) {
            uint64_t d = (uint64_t)a[i] - b[i] - c;
            r[i] = (uint32_t)d;
            c = (d >> 63) & 1;
        } else {
            c += (uint64_t)a[i] + b[i];
            r[i] = (uint32_t)c;
            c >>= 32;
        }
    }
    return (uint32_t)c;
}

/* The arithmetic of opcodes 1..5 on LEN = w words (docs/pka.md), for operands this path
 * serves: r and *carry set, 0 returned; -1 (nothing set) for pka.py to refuse or reduce:
 * a MONTMUL modulus that is even or at most 1 or too small for one subtraction, N = 0
 * for MODADD/MODSUB, or their operands so far above N that the result is more than
 * four subtractions of N away (pk_reduce_few; pka_math's (A + B) mod N and (A - B) mod N,
 * exactly). */
int pk_pka_arith(uint32_t op, uint32_t *r, const uint32_t *a, const uint32_t *b, const uint32_t *n, uint32_t w,
                 uint32_t *carry) {
    *carry = 0;
    if (op == OP_ADD || op == OP_SUB) {
        *carry = add_sub(r, a, b, w, op == OP_SUB);
        return 0;
    }
    if (op == OP_MONTMUL) {
        if (!(n[0] & 1)) return -1; /* even N: OPERRF, in pka.py */
        int big = n[0] > 1;
        for (uint32_t i = 1; i < w && !big; i++) big = n[i] != 0;
        if (!big) return -1;        /* N <= 1: OPERRF */
        return pk_montmul(r, a, b, n, w);
    }
    if (op != OP_MODADD && op != OP_MODSUB) return -1;
    uint32_t t[MAX_WORDS];
    if (op == OP_MODADD) {
        if (pk_reduce_few(t, add_sub(t, a, b, w, 0), n, w)) return -1; /* (a + b) mod n */
    } else if (!add_sub(t, a, b, w, 1)) {
        if (pk_reduce_few(t, 0, n, w)) return -1; /* a >= b: (a - b) mod n */
    } else {
        add_sub(t, b, a, w, 1); /* a < b: n - ((b - a) mod n), or 0 */
        if (pk_reduce_few(t, 0, n, w)) return -1;
        int zero = 1;
        for (uint32_t i = 0; i < w && zero; i++) zero = t[i] == 0;
        if (!zero) add_sub(t, n, t, w, 1);
    }
    memcpy(r, t, sizeof(uint32_t) * w);
    return 0;
}

/* ------------------------------------------------------------------ state */

static void update_irq(pk_pka *p) {
    uint32_t sources = p->flags & p->regs[CR] & SR_FLAGS;
    uint32_t rose = sources & ~p->irq_sources;
    p->irq_sources = sources;
    if (rose && p->irq_exc) pk_pend(p->core, p->irq_exc);
}

uint64_t pk_pka_next(void *pka) {
    pk_pka *p = pka;
    return p->fast_busy ? p->done_at : PK_NO_EVENT;
}

/* The busy time has passed: the result lands in PKA RAM, PROCENDF rises (Pka._finish). */
void pk_pka_finish(void *pka) {
    pk_pka *p = pka;
    if (!p->fast_busy) return;
    if (p->core->obs)
        pk_obs_emit(p->core->obs, PK_EV_PKA_FINISH, p->core->cycles, p->p_op | p->p_words << 8, p->done_at);
    p->fast_busy = 0;
    p->busy = 0;
    memcpy(p->ram + p->p_rptr, p->result, 4u * p->p_words);
    if (p->p_op == OP_MONTMUL2) /* after R: where they overlap, R2 wins (pka.py _finish) */
        memcpy(p->ram + p->p_r2ptr, p->result2, 4u * p->p_words);
    p->regs[CARRY] = p->p_carry;
    p->regs[LASTCYC] = p->p_cycles;
    p->ops[p->p_op] += 1;
    p->by_len[p->p_op][p->p_words] += 1;
    p->busy_total += p->p_cycles;
    if (p->log_n < LOG_LIMIT) {
        if (p->log_n == p->log_cap) {
            /* 8,192 entries first (192 KiB, above malloc's 128 KiB mmap threshold: a
             * mapping of its own, whose pages are touched only as entries are written
             * and which grows by mremap, without a copy): 4,096 (96 KiB, from the heap)
             * made an RSA-2048 job's log move once, copying it into 24 new pages */
            uint32_t cap = p->log_cap ? p->log_cap * 2 : 8192;
            pk_pka_op *grown = realloc(p->log, sizeof(pk_pka_op) * cap);
            if (grown) {
                p->log = grown;
                p->log_cap = cap;
            }
        }
        if (p->log_n < p->log_cap) {
            pk_pka_op *op = &p->log[p->log_n++];
            op->op = p->p_op;
            op->words = p->p_words;
            op->start = p->p_start;
            op->end = p->p_start + p->p_cycles;
        }
    } else {
        p->log_truncated = 1;
    }
    p->flags |= SR_PROCENDF;
    update_irq(p);
}

static int operand_ok(const pk_pka *p, uint32_t ptr, uint32_t words) {
    return ptr % 4 == 0 && (uint64_t)ptr + 4u * words <= p->ram_size;
}

/* An operand in PKA RAM, read where it lies (the results go to p->result and
 * p->result2 until the operation ends, so nothing writes the RAM while the arithmetic
 * reads it), or from a copy in ``copy`` if the RAM is not word-aligned in host memory. */
static const uint32_t *operand(const pk_pka *p, uint32_t ptr, uint32_t *copy, uint32_t words) {
    const uint8_t *at = p->ram + ptr;
    if (((uintptr_t)at & 3) == 0) return (const uint32_t *)(const void *)at;
    memcpy(copy, at, 4u * words);
    return copy;
}

/* START of an operation this path can serve, computed now and due at done_at; -1 (and
 * nothing changed) for pka.py to check, refuse or compute. MONTMUL2 (pka.py
 * _start_pair): R = A (x) B and R2 = A2 (x) B with one N, every operand read before
 * either result is written, busy for one MONTMUL (its op_cycles row is MONTMUL's). */
static int start_fast(pk_pka *p, uint32_t cr, uint64_t now) {
    uint32_t words = p->regs[LEN];
    if (p->py_starts) return -1;
    uint32_t op = (cr & CR_OPCODE) >> CR_OPCODE_SHIFT;
    int pair = op == OP_MONTMUL2 && p->pair;
    if (!(cr & CR_EN) || op < OP_MONTMUL || (op > OP_SUB && !pair)) return -1;
    if (words < 1 || words > p->max_words || words > MAX_WORDS) return -1;
    int uses_n = op <= OP_MODSUB || pair;
    if (!operand_ok(p, p->regs[APTR], words) || !operand_ok(p, p->regs[BPTR], words) ||
        !operand_ok(p, p->regs[RPTR], words) || (uses_n && !operand_ok(p, p->regs[NPTR], words)))
        return -1;
    if (pair && (!operand_ok(p, p->regs[A2PTR], words) || !operand_ok(p, p->regs[R2PTR], words))) return -1;
    uint32_t ca[MAX_WORDS], cb[MAX_WORDS], cn[MAX_WORDS], ca2[MAX_WORDS];
    const uint32_t *a = operand(p, p->regs[APTR], ca, words), *b = operand(p, p->regs[BPTR], cb, words);
    const uint32_t *n = uses_n ? operand(p, p->regs[NPTR], cn, words) : NULL;
    const uint32_t *a2 = pair ? operand(p, p->regs[A2PTR], ca2, words) : NULL;
    /* strict_operands: a modular operand at or above N is pka.py's to refuse (OPERRF) */
    if (uses_n && p->strict && (pk_geq(a, 0, n, words) || pk_geq(b, 0, n, words))) return -1;
    if (pair && p->strict && pk_geq(a2, 0, n, words)) return -1;
    uint32_t carry;
    if (pk_pka_arith(pair ? OP_MONTMUL : op, p->result, a, b, n, words, &carry) != 0) return -1;
    if (pair && pk_pka_arith(OP_MONTMUL, p->result2, a2, b, n, words, &carry) != 0) return -1;
    p->p_op = op;
    p->p_carry = carry;
    p->p_words = words;
    p->p_rptr = p->regs[RPTR];
    p->p_r2ptr = pair ? p->regs[R2PTR] : 0;
    p->p_cycles = p->op_cycles[op * (MAX_WORDS + 1) + words];
    p->p_start = now;
    p->done_at = now + p->p_cycles;
    if (p->done_at < p->core->native_min) p->core->native_min = p->done_at;
    pk_counted_soon(p->core, p->done_at); /* only the next event moved */
    p->busy = 1;
    p->fast_busy = 1;
    if (p->core->obs) pk_obs_emit(p->core->obs, PK_EV_PKA_START, now, op | words << 8, p->p_cycles);
    return 0;
}

/* ------------------------------------------------------------------ the bus side */

/* An access whose cycle matters (a START, a poll the observer records, anything
 * pka.py serves) finds its instruction in the block (pk_access_offset), so that
 * repeated accesses to one address keep their program order. The idle fast paths
 * (a word of PKA RAM, an operand register, CLRFR, the status with no observer) answer
 * the same at any cycle of the block and do not look: five accesses in six of
 * rsa2048-pka's 25,500, whose search was 6% of the run's host time. A later search
 * then starts before their instructions, as it already starts before the block's
 * stack and RAM accesses (which never look): it can only end on one of them if that
 * instruction's live address is the later access's own address. */
#define TOFF() (toff != NO_TOFF ? toff : (toff = pk_access_offset(p->core, p->base + off)))
#define NO_TOFF 0xFFFFFFFFu

uint64_t pk_pka_read(void *uc, uint64_t offset, unsigned size, pk_pka *p) {
    (void)uc;
    uint32_t off = (uint32_t)offset, toff = NO_TOFF; /* located at most once */
    if (size == 4 && off % 4 == 0 && p->fast_on) {
        if (off >= RAM_OFFSET && off < RAM_OFFSET + p->ram_size) {
            if (!p->busy) {
                uint32_t v;
                memcpy(&v, p->ram + off - RAM_OFFSET, 4);
                return v;
            }
        } else if (off == 4 * SR) {
            if (p->busy && p->core->obs) pk_obs_emit(p->core->obs, PK_EV_PKA_POLL, p->core->cycles + TOFF(), 0, 0);
            return p->flags | (p->busy ? SR_BUSY : 0);
        } else if (off < REG_WINDOW && off != 4 * CLRFR) {
            return p->regs[off / 4];
        }
    }
    return p->py_access(off, size, 0, 0, TOFF());
}

void pk_pka_write(void *uc, uint64_t offset, unsigned size, uint64_t value, pk_pka *p) {
    (void)uc;
    uint32_t off = (uint32_t)offset, v = (uint32_t)value, toff = NO_TOFF; /* located at most once */
    if (size == 4 && off % 4 == 0 && p->fast_on) {
        if (off >= RAM_OFFSET && off < RAM_OFFSET + p->ram_size) {
            if (!p->busy) {
                memcpy(p->ram + off - RAM_OFFSET, &v, 4);
                return;
            }
        } else if (off == 4 * CLRFR) {
            p->flags &= ~(v & SR_FLAGS);
            update_irq(p);
            return;
        } else if (!p->busy) {
            if (off == 4 * LEN || off == 4 * APTR || off == 4 * BPTR || off == 4 * NPTR || off == 4 * RPTR) {
                p->regs[off / 4] = v;
                return;
            }
            if (off == 4 * CR && !(v & ~(CR_WRITABLE | CR_START))) {
                uint32_t old = p->regs[CR];
                p->regs[CR] = v & CR_WRITABLE;
                if (!(v & CR_START) || start_fast(p, v & CR_WRITABLE, p->core->cycles + TOFF()) == 0) {
                    update_irq(p);
                    return;
                }
                p->regs[CR] = old; /* pka.py checks, refuses or computes it */
            }
        }
    }
    p->py_access(off, size, v, 1, TOFF());
}

#undef TOFF
#undef NO_TOFF

uint32_t pk_sizeof_pka(void) { return (uint32_t)sizeof(pk_pka); }

void pk_pka_free_log(pk_pka *p) {
    free(p->log);
    p->log = NULL;
    p->log_n = p->log_cap = p->log_truncated = 0;
}
