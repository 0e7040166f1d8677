/*
 * pkasim power model: the per-instruction leakage of the CPU (docs/power.md).
 *
 * A Unicorn code hook (UC_HOOK_CODE, installed only on a machine that traces power)
 * sees each instruction before it executes. Registers then hold the state after the
 * instruction before it, so the hook for instruction i reads i's source operands and
 * finishes instruction i-1 by reading what i-1 wrote (its destination registers, the
 * value it loaded). Each instruction's leakage is one number, added to the sample of
 * the cycle the instruction starts at; nothing is called in Python per instruction.
 *
 * The model, after ELMO (McCann, Oswald, Whitnall, USENIX Security 2017: five
 * instruction classes fitted on a Cortex-M0, each instruction's leakage a weighted sum
 * of its two operands' Hamming weights and of their Hamming distances to the previous
 * instruction's operands), for instruction i of class c:
 *
 *   L_i = constant[c] + hw_op1[c] HW(a_i) + hw_op2[c] HW(b_i)
 *       + hd_op1[c] HD(A, a_i) + hd_op2[c] HD(B, b_i)
 *       + hw_result[c] sum HW(r) over the registers r it writes (SP excluded)
 *       + hd_data[c] HD(D, d) for each word d it moves on the data bus
 *
 * where a_i, b_i are the values on the two ALU operand buses (A and B hold the values
 * they carried last) and D is the data bus (its last transfer). Operands: for data
 * processing Rn (or Rdn) and Rm or the immediate; for shifts the shifted register and
 * the amount; for MULS Rn and Rdm; for loads and stores the address and the data word
 * (ELMO drives operand 2 with the data word too); for LDM, STM, PUSH and POP each word
 * in turn. Classes: alu, shift, mul, load, store, other (branches, hints, system).
 *
 * The hook places instruction i at cycle s->cycles + (costs of the instructions of the
 * current block before it): the block hook (cyclehook.c) has committed every earlier
 * block when the first instruction of a block is hooked. Only instructions starting in
 * [lo, hi) are recorded; bus state is followed from ``warm`` cycles before lo, so the
 * first instructions of the window see the buses as the instructions before left them.
 */
#include <stdlib.h>
#include <string.h>

#include "pkstate.h"

enum { LK_ALU, LK_SHIFT, LK_MUL, LK_LOAD, LK_STORE, LK_OTHER, LK_CLASSES };
enum { LK_CONST, LK_HW_OP1, LK_HW_OP2, LK_HD_OP1, LK_HD_OP2, LK_HW_RESULT, LK_HD_DATA, LK_TERMS };
enum { M_NONE, M_LOAD, M_STORE, M_LOADM, M_STOREM };
#define R_IMM (-2) /* operand b is the immediate */
#define R_SP 13
#define R_PC 15
#define LK_CACHE 4096

typedef struct {
    uint32_t tag;        /* instruction address; PK_NONE for a free slot */
    uint8_t cls, mem;    /* LK_* class; M_* memory access */
    int8_t ra, rb;       /* operand registers (-1: none; rb R_IMM: the immediate) */
    int8_t rt;           /* single load/store: the data register */
    int8_t rbase, rindex;/* address: rbase (R_PC: PC-relative) + rindex (-1: none) + imm */
    uint8_t width;       /* access bytes (1, 2, 4) */
    uint16_t cost;       /* cycles (thumb.c) */
    uint16_t wmask;      /* registers r0-r14 written (SP dropped) */
    uint16_t clobber;    /* registers whose cached values it changes (wmask, SP, PC) */
    uint16_t list;       /* LDM/STM/PUSH/POP: the registers moved, bit 14 LR, bit 15 PC */
    uint8_t size;        /* bytes */
    uint8_t signext;     /* LDRSB / LDRSH */
    int32_t imm;         /* operand b immediate, or the address offset */
} lk_insn;

typedef struct {
    pk_state *s;
    pk_rules rules;
    double w[LK_CLASSES][LK_TERMS];
    /* the window being traced */
    uint32_t armed, done;
    uint64_t lo, hi, warm_from;
    double *samples;     /* hi - lo samples, owned by the caller */
    uint32_t *pcs;       /* hi - lo PCs (0 where no instruction starts), or NULL */
    uint64_t digest;     /* a hash over (cycle, pc) of the instructions in the window */
    uint64_t count;      /* instructions recorded */
    /* the block instance being followed */
    uint64_t blk_blocks;
    uint32_t blk_start, blk_valid, blk_skip;
    uint32_t offset, last_addr, last_cost;
    /* the buses */
    uint32_t bus_a, bus_b, bus_d;
    /* the instruction whose results are read at the next hook */
    uint32_t pend_valid;
    const lk_insn *pend;
    uint64_t pend_cycle;
    double pend_sum;
    uint32_t pend_a, pend_b, pend_d, pend_has;  /* bus values it drives (pend_has: bit 0 a, 1 b, 2 d) */
    uint32_t pend_pc;
    /* register values read in this block instance (an instruction's clobbers dropped
     * before the next one reads them) */
    uint32_t regs[16], have, last_clobber;
    lk_insn cache[LK_CACHE];
} pk_leak;

static inline uint32_t hw32(uint32_t x) { return (uint32_t)__builtin_popcount(x); }

static uint32_t reg(pk_leak *L, int r) {
    if (!(L->have & (1u << r))) {
        uint32_t v = 0;
        L->s->reg_read(L->s->uc, L->s->regids[r], &v);
        L->regs[r] = v;
        L->have |= 1u << r;
    }
    return L->regs[r];
}

/* ------------------------------------------------------------------ decoding */

static void set_ops(lk_insn *o, int cls, int ra, int rb, int32_t imm) {
    o->cls = (uint8_t)cls;
    o->ra = (int8_t)ra;
    o->rb = (int8_t)rb;
    o->imm = imm;
}

static void set_mem(lk_insn *o, int mem, int rt, int rbase, int rindex, int32_t off, int width) {
    o->cls = (uint8_t)(mem == M_LOAD || mem == M_LOADM ? LK_LOAD : LK_STORE);
    o->mem = (uint8_t)mem;
    o->rt = (int8_t)rt;
    o->rbase = (int8_t)rbase;
    o->rindex = (int8_t)rindex;
    o->imm = off;
    o->width = (uint8_t)width;
}

/* Operands and class of the ARMv6-M instruction hw1 (hw2) at addr (DDI0419 A5.2). */
static void lk_decode16(uint32_t addr, uint32_t hw, lk_insn *o) {
    int rd = hw & 7, rn = (hw >> 3) & 7, rm = (hw >> 6) & 7;
    (void)addr;
    if (hw < 0x4000) {
        uint32_t op = (hw >> 9) & 0x1F;
        if (op < 12) { /* LSLS/LSRS/ASRS Rd, Rm, #imm5 (LSLS #0 is MOVS Rd, Rm) */
            uint32_t imm5 = (hw >> 6) & 0x1F;
            if (op < 4 && imm5 == 0) set_ops(o, LK_ALU, -1, rn, 0);
            else set_ops(o, LK_SHIFT, rn, R_IMM, (int32_t)(imm5 ? imm5 : 32));
        } else if (op == 12 || op == 13) { /* ADDS/SUBS Rd, Rn, Rm */
            set_ops(o, LK_ALU, rn, rm, 0);
        } else if (op == 14 || op == 15) { /* ADDS/SUBS Rd, Rn, #imm3 */
            set_ops(o, LK_ALU, rn, R_IMM, rm);
        } else {
            int r8 = (hw >> 8) & 7;
            if (((hw >> 11) & 3) == 0) set_ops(o, LK_ALU, -1, R_IMM, (int32_t)(hw & 0xFF)); /* MOVS #imm8 */
            else set_ops(o, LK_ALU, r8, R_IMM, (int32_t)(hw & 0xFF)); /* CMP, ADDS, SUBS #imm8 */
        }
        return;
    }
    if (hw < 0x4400) { /* data processing (register): op Rdn, Rm */
        uint32_t op = (hw >> 6) & 0xF;
        int cls = (op == 2 || op == 3 || op == 4 || op == 7) ? LK_SHIFT : op == 13 ? LK_MUL : LK_ALU;
        if (op == 9) set_ops(o, LK_ALU, rn, R_IMM, 0);       /* RSBS Rd, Rn, #0 */
        else if (op == 15) set_ops(o, LK_ALU, -1, rn, 0);    /* MVNS Rd, Rm */
        else if (op == 13) set_ops(o, LK_MUL, rn, rd, 0);    /* MULS Rdm, Rn, Rdm */
        else set_ops(o, cls, rd, rn, 0);
        return;
    }
    if (hw < 0x4800) { /* special data processing, BX, BLX */
        int dn = (int)(((hw >> 4) & 8) | (hw & 7)), m = (hw >> 3) & 0xF;
        switch ((hw >> 8) & 3) {
        case 0: set_ops(o, dn == R_PC ? LK_OTHER : LK_ALU, dn, m, 0); return;  /* ADD Rdn, Rm */
        case 1: set_ops(o, LK_ALU, dn, m, 0); return;                           /* CMP Rn, Rm */
        case 2: set_ops(o, dn == R_PC ? LK_OTHER : LK_ALU, -1, m, 0); return;  /* MOV Rd, Rm */
        default: set_ops(o, LK_OTHER, -1, m, 0); return;                        /* BX, BLX Rm */
        }
    }
    if (hw < 0x5000) { set_mem(o, M_LOAD, (hw >> 8) & 7, R_PC, -1, (int32_t)(hw & 0xFF) * 4, 4); return; }
    if (hw < 0x6000) { /* load/store register offset */
        static const int width[8] = {4, 2, 1, 1, 4, 2, 1, 2};
        uint32_t op = (hw >> 9) & 7;
        set_mem(o, op >= 3 ? M_LOAD : M_STORE, rd, rn, rm, 0, width[op]);
        o->signext = (uint8_t)(op == 3 || op == 7);
        return;
    }
    if (hw < 0x9000) { /* load/store immediate offset */
        uint32_t imm5 = (hw >> 6) & 0x1F;
        int mem = (hw >> 11) & 1 ? M_LOAD : M_STORE;
        if (hw < 0x7000) set_mem(o, mem, rd, rn, -1, (int32_t)imm5 * 4, 4);
        else if (hw < 0x8000) set_mem(o, mem, rd, rn, -1, (int32_t)imm5, 1);
        else set_mem(o, mem, rd, rn, -1, (int32_t)imm5 * 2, 2);
        return;
    }
    if (hw < 0xA000) { /* STR/LDR Rt, [SP, #imm8*4] */
        set_mem(o, (hw & 0x800) ? M_LOAD : M_STORE, (hw >> 8) & 7, R_SP, -1, (int32_t)(hw & 0xFF) * 4, 4);
        return;
    }
    if (hw < 0xA800) { set_ops(o, LK_ALU, R_PC, R_IMM, (int32_t)(hw & 0xFF) * 4); return; } /* ADR */
    if (hw < 0xB000) { set_ops(o, LK_ALU, R_SP, R_IMM, (int32_t)(hw & 0xFF) * 4); return; } /* ADD Rd, SP, #imm */
    if (hw < 0xC000) {
        uint32_t top = hw >> 8;
        if (top == 0xB0) { set_ops(o, LK_ALU, R_SP, R_IMM, (int32_t)(hw & 0x7F) * 4); return; }
        if (top == 0xB2 || top == 0xBA) { set_ops(o, LK_ALU, -1, rn, 0); return; } /* extend, reverse */
        if (top == 0xB4 || top == 0xB5) { /* PUSH */
            set_mem(o, M_STOREM, -1, R_SP, -1, 0, 4);
            o->list = (uint16_t)((hw & 0xFF) | ((hw & 0x100) ? 1u << 14 : 0));
            return;
        }
        if (top == 0xBC || top == 0xBD) { /* POP */
            set_mem(o, M_LOADM, -1, R_SP, -1, 0, 4);
            o->list = (uint16_t)((hw & 0xFF) | ((hw & 0x100) ? 1u << 15 : 0));
            return;
        }
        set_ops(o, LK_OTHER, -1, -1, 0); /* CPS, BKPT, hints */
        return;
    }
    if (hw < 0xD000) { /* STM / LDM Rn, {list} */
        set_mem(o, (hw & 0x800) ? M_LOADM : M_STOREM, -1, (hw >> 8) & 7, -1, 0, 4);
        o->list = (uint16_t)(hw & 0xFF);
        return;
    }
    set_ops(o, LK_OTHER, -1, -1, 0); /* B<cond>, SVC, UDF, B */
}

static void lk_decode32(uint32_t hw1, uint32_t hw2, lk_insn *o) {
    if ((hw1 & 0xFFF0) == 0xF380 && (hw2 & 0xFF00) == 0x8800) { /* MSR spec, Rn */
        set_ops(o, LK_OTHER, -1, (int)(hw1 & 0xF), 0);
        return;
    }
    set_ops(o, LK_OTHER, -1, -1, 0); /* BL, MRS, barriers */
}

static const lk_insn *lk_lookup(pk_leak *L, uint32_t addr) {
    lk_insn *o = &L->cache[(addr >> 1) & (LK_CACHE - 1)];
    if (o->tag == addr) return o;
    uint8_t buf[4] = {0, 0, 0, 0};
    if (L->s->mem_read(L->s->uc, addr, buf, 4) != 0) L->s->mem_read(L->s->uc, addr, buf, 2);
    uint32_t hw1 = (uint32_t)buf[0] | (uint32_t)buf[1] << 8, hw2 = (uint32_t)buf[2] | (uint32_t)buf[3] << 8;
    pk_insn d;
    pk_decode(addr, hw1, hw2, &L->rules, &d);
    memset(o, 0, sizeof *o);
    o->rt = o->rbase = o->rindex = -1;
    if (d.size == 4) lk_decode32(hw1, hw2, o);
    else lk_decode16(addr, hw1, o);
    o->cost = d.undefined ? 1 : d.cost;
    o->size = d.size;
    o->wmask = (uint16_t)(d.undefined ? 0 : d.desc.wmask & ~(1u << R_SP));
    /* MSR may write SP (MSP/PSP); anything undefined faults into a new block anyway */
    o->clobber = (uint16_t)(d.undefined ? 0xFFFF : d.desc.wmask | 1u << R_PC | (d.size == 4 ? 1u << R_SP : 0));
    o->tag = addr;
    return o;
}

/* ------------------------------------------------------------------ the model */

static uint32_t operand(pk_leak *L, int r, uint32_t addr, int32_t imm) {
    if (r == R_IMM) return (uint32_t)imm;
    if (r == R_PC) return (addr + 4) & ~3u;
    return reg(L, r);
}

static uint32_t address_of(pk_leak *L, const lk_insn *o, uint32_t addr) {
    uint32_t base = o->rbase == R_PC ? (addr + 4) & ~3u : reg(L, o->rbase);
    if (o->rindex >= 0) base += reg(L, o->rindex);
    return base + (uint32_t)o->imm;
}

static inline uint64_t mix(uint64_t h, uint64_t v) {
    h = (h ^ v) * 0x100000001b3ULL;
    return h ^ (h >> 29);
}

static void record(pk_leak *L, uint64_t cycle, uint32_t pc, uint32_t cost, double value) {
    if (cycle < L->lo || cycle >= L->hi) return;
    uint64_t i = cycle - L->lo;
    L->samples[i] += value;
    if (L->pcs) {
        uint64_t n = L->hi - L->lo;
        for (uint32_t k = 0; k < cost && i + k < n; k++) L->pcs[i + k] = pc;
    }
    L->digest = mix(L->digest, (cycle - L->lo) << 32 | pc);
    L->count++;
}

/* Finish the pending instruction: what it wrote is in the registers now. */
static void finish_pending(pk_leak *L) {
    if (!L->pend_valid) return;
    const lk_insn *o = L->pend;
    const double *w = L->w[o->cls];
    double sum = L->pend_sum;
    uint32_t a = L->pend_a, b = L->pend_b, d = L->pend_d, has = L->pend_has;
    for (uint32_t m = o->wmask; m; m &= m - 1) sum += w[LK_HW_RESULT] * hw32(reg(L, __builtin_ctz(m)));
    if (o->mem == M_LOAD) {
        uint32_t v = reg(L, o->rt);
        if (o->width < 4) v &= (1u << (8 * o->width)) - 1; /* the bus carried the byte or halfword */
        sum += w[LK_HW_OP2] * hw32(v) + w[LK_HD_OP2] * hw32(L->bus_b ^ v) + w[LK_HD_DATA] * hw32(L->bus_d ^ v);
        b = d = v;
        has |= 6;
    } else if (o->mem == M_LOADM) {
        uint32_t bb = L->bus_b, dd = L->bus_d;
        for (uint32_t m = o->list; m; m &= m - 1) {
            int r = __builtin_ctz(m);
            uint32_t v = r == R_PC ? reg(L, R_PC) : reg(L, r);
            sum += w[LK_HW_OP2] * hw32(v) + w[LK_HD_OP2] * hw32(bb ^ v) + w[LK_HD_DATA] * hw32(dd ^ v);
            bb = dd = v;
        }
        b = d = bb;
        has |= o->list ? 6 : 0;
    }
    if (has & 1) L->bus_a = a;
    if (has & 2) L->bus_b = b;
    if (has & 4) L->bus_d = d;
    record(L, L->pend_cycle, L->pend_pc, o->cost, sum);
    L->pend_valid = 0;
}

/* Start instruction o at addr, cycle: the terms its operands give now; the rest when
 * its results can be read (finish_pending at the next hook). */
static void begin(pk_leak *L, const lk_insn *o, uint32_t addr, uint64_t cycle) {
    const double *w = L->w[o->cls];
    double sum = w[LK_CONST];
    uint32_t a = 0, b = 0, d = 0, has = 0;
    if (o->mem == M_NONE) {
        if (o->ra != -1) {
            a = operand(L, o->ra, addr, o->imm);
            sum += w[LK_HW_OP1] * hw32(a) + w[LK_HD_OP1] * hw32(L->bus_a ^ a);
            has |= 1;
        }
        if (o->rb != -1) {
            b = operand(L, o->rb, addr, o->imm);
            sum += w[LK_HW_OP2] * hw32(b) + w[LK_HD_OP2] * hw32(L->bus_b ^ b);
            has |= 2;
        }
    } else if (o->mem == M_LOAD || o->mem == M_STORE) {
        a = address_of(L, o, addr);
        sum += w[LK_HW_OP1] * hw32(a) + w[LK_HD_OP1] * hw32(L->bus_a ^ a);
        has |= 1;
        if (o->mem == M_STORE) {
            d = reg(L, o->rt);
            if (o->width < 4) d &= (1u << (8 * o->width)) - 1;
            b = d;
            sum += w[LK_HW_OP2] * hw32(d) + w[LK_HD_OP2] * hw32(L->bus_b ^ d) + w[LK_HD_DATA] * hw32(L->bus_d ^ d);
            has |= 6;
        }
    } else {
        uint32_t n = (uint32_t)__builtin_popcount(o->list);
        uint32_t base = reg(L, o->rbase);
        if (o->rbase == R_SP && o->mem == M_STOREM) base -= 4 * n; /* PUSH: full descending */
        uint32_t aa = L->bus_a;
        for (uint32_t k = 0; k < n; k++) {
            uint32_t at = base + 4 * k;
            sum += w[LK_HW_OP1] * hw32(at) + w[LK_HD_OP1] * hw32(aa ^ at);
            aa = at;
        }
        a = aa;
        has |= n ? 1 : 0;
        if (o->mem == M_STOREM) {
            uint32_t bb = L->bus_b, dd = L->bus_d;
            for (uint32_t m = o->list; m; m &= m - 1) {
                uint32_t v = reg(L, __builtin_ctz(m));
                sum += w[LK_HW_OP2] * hw32(v) + w[LK_HD_OP2] * hw32(bb ^ v) + w[LK_HD_DATA] * hw32(dd ^ v);
                bb = dd = v;
            }
            b = d = bb;
            has |= n ? 6 : 0;
        }
    }
    L->pend = o;
    L->pend_valid = 1;
    L->pend_cycle = cycle;
    L->pend_pc = addr;
    L->pend_sum = sum;
    L->pend_a = a;
    L->pend_b = b;
    L->pend_d = d;
    L->pend_has = has;
}

/* ------------------------------------------------------------------ the hook */

void pk_leak_hook(void *uc, uint64_t address, uint32_t size, pk_leak *L) {
    (void)uc; (void)size;
    if (!L->armed) return;
    pk_state *s = L->s;
    if (!s->cur_valid) return; /* the block hook stopped before this block: it does not run now */
    uint32_t addr = (uint32_t)address;
    if (!L->blk_valid || s->blocks != L->blk_blocks || s->cur_start != L->blk_start) {
        L->blk_valid = 1;
        L->blk_blocks = s->blocks;
        L->blk_start = s->cur_start;
        L->offset = 0;
        L->last_addr = PK_NONE;
        L->have = 0;
        L->blk_skip = s->cycles + s->cur_cost + 64 < L->warm_from;
    }
    if (L->blk_skip) return;
    if (addr == L->last_addr) {
        L->pend_valid = 0; /* hooked again before it ran: begin it again below */
    } else if (L->last_addr != PK_NONE) {
        L->offset += L->last_cost;
        L->have &= ~L->last_clobber;
    }
    uint64_t cycle = s->cycles + L->offset;
    finish_pending(L);
    if (cycle >= L->hi) {
        L->armed = 0;
        L->done = 1;
        return;
    }
    const lk_insn *o = lk_lookup(L, addr);
    L->last_addr = addr;
    L->last_cost = o->cost;
    L->last_clobber = o->clobber;
    if (cycle + 64 < L->warm_from) return;
    begin(L, o, addr, cycle);
}

/* ------------------------------------------------------------------ the API */

pk_leak *pk_leak_new(pk_state *s, const double *weights, uint32_t muls_cycles) {
    pk_leak *L = calloc(1, sizeof *L);
    if (!L) return NULL;
    L->s = s;
    L->rules.muls_cycles = muls_cycles;
    L->rules.fetch_ws = s->fetch_ws;
    L->rules.flash_base = s->flash_base;
    L->rules.flash_end = s->flash_end;
    memcpy(L->w, weights, sizeof L->w);
    for (int i = 0; i < LK_CACHE; i++) L->cache[i].tag = PK_NONE;
    return L;
}

void pk_leak_free(pk_leak *L) { free(L); }

/* Forget the decoded instructions (the code they came from may have changed). */
void pk_leak_forget(pk_leak *L) {
    for (int i = 0; i < LK_CACHE; i++) L->cache[i].tag = PK_NONE;
}

/* Trace the instructions that start in [lo, hi) into samples[0 .. hi-lo) (added to
 * what is there) and, when pcs is not NULL, their addresses into pcs[]; follow the
 * buses from warm cycles before lo. The buses start at zero. */
void pk_leak_arm(pk_leak *L, uint64_t lo, uint64_t hi, uint64_t warm, double *samples, uint32_t *pcs) {
    L->lo = lo;
    L->hi = hi;
    L->warm_from = lo > warm ? lo - warm : 0;
    L->samples = samples;
    L->pcs = pcs;
    L->digest = 0xcbf29ce484222325ULL;
    L->count = 0;
    L->blk_valid = 0;
    L->pend_valid = 0;
    L->bus_a = L->bus_b = L->bus_d = 0;
    L->done = 0;
    L->armed = 1;
}

/* The run stopped: finish the last instruction (its results are in the registers) and
 * stop tracing. Returns the instructions recorded. */
uint64_t pk_leak_disarm(pk_leak *L) {
    if (L->armed) {
        L->have = 0;
        finish_pending(L);
    }
    L->armed = 0;
    return L->count;
}

uint64_t pk_leak_digest(const pk_leak *L) { return L->digest; }
uint32_t pk_leak_done(const pk_leak *L) { return L->done; }
uint32_t pk_leak_classes(void) { return LK_CLASSES; }
uint32_t pk_leak_terms(void) { return LK_TERMS; }

/* ------------------------------------------------------------------ the PKA's datapath
 * pkasim.analysis.power.pka states the model and computes it in NumPy for any digit
 * size; these two functions compute the same for 32-bit digits, the default chip's,
 * where an RSA window holds dozens of operations per trace. */

static void place(double *out, uint64_t first, uint64_t length, uint64_t step, uint64_t steps, double value) {
    out[first + (step * length) / steps] += value;
}

/* MONTMUL's d^2 digit steps (radix 2^32): row i reads a_i, then b_j and n_j for each j
 * and writes digit j of the new T. Step k = i d + j goes to cycle first + k length /
 * d^2 of out. T after the last row (d + 2 words) is left in t. */
void pk_pka_rows(uint32_t d, const uint32_t *a, const uint32_t *b, const uint32_t *n, uint32_t *t, uint64_t first,
                 uint64_t length, double hd_read, double hd_write, double *out) {
    uint32_t n_prime = 1; /* -n^-1 mod 2^32 by Newton's iteration (n odd) */
    for (int k = 0; k < 5; k++) n_prime *= 2u - n[0] * n_prime;
    n_prime = 0u - n_prime;
    memset(t, 0, (d + 2) * sizeof *t);
    uint32_t bus_a = 0, bus_b = 0, bus_n = 0, bus_w = 0;
    uint64_t steps = (uint64_t)d * d;
    for (uint32_t i = 0; i < d; i++) {
        uint32_t ai = a[i];
        uint32_t q = (t[0] + ai * b[0]) * n_prime;
        uint64_t c1 = 0, c2 = 0;
        /* t = (t + ai b + q n) / 2^32, the digits of the new T written from j = 0 up */
        for (uint32_t j = 0; j < d; j++) {
            uint64_t s = (uint64_t)t[j] + (uint64_t)ai * b[j] + c1;
            c1 = s >> 32;
            uint64_t u = (s & 0xFFFFFFFFu) + (uint64_t)q * n[j] + c2;
            c2 = u >> 32;
            if (j > 0) t[j - 1] = (uint32_t)u;
        }
        uint64_t s = (uint64_t)t[d] + c1 + c2;
        t[d - 1] = (uint32_t)s;
        s = (uint64_t)t[d + 1] + (s >> 32);
        t[d] = (uint32_t)s;
        t[d + 1] = (uint32_t)(s >> 32);
        for (uint32_t j = 0; j < d; j++) {
            uint32_t flips = hw32(bus_b ^ b[j]) + hw32(bus_n ^ n[j]);
            if (j == 0) flips += hw32(bus_a ^ ai);
            bus_b = b[j];
            bus_n = n[j];
            place(out, first, length, (uint64_t)i * d + j, steps,
                  hd_read * flips + hd_write * hw32(bus_w ^ t[j]));
            bus_w = t[j];
        }
        bus_a = ai;
    }
}

/* One pass over d digits of a multi-pass operation: read x_j and y_j, write w_j (the
 * write bus held w_prev before); the pass's steps are steps step0 .. step0 + d - 1
 * of the phase's `steps`, over [first, first + length) of out. */
void pk_pka_pass(uint32_t d, const uint32_t *x, const uint32_t *y, const uint32_t *w, uint32_t w_prev, uint64_t first,
                 uint64_t length, uint64_t step0, uint64_t steps, double hd_read, double hd_write, double *out) {
    uint32_t bx = 0, by = 0, bw = w_prev;
    for (uint32_t j = 0; j < d; j++) {
        double v = hd_read * (hw32(bx ^ x[j]) + hw32(by ^ y[j])) + hd_write * hw32(bw ^ w[j]);
        bx = x[j];
        by = y[j];
        bw = w[j];
        place(out, first, length, step0 + j, steps, v);
    }
}
