/*
 * pkasim alignment programs: the word and halfword accesses of a block whose address
 * the block computes or loads itself, checked before the block runs.
 *
 * ARMv6-M faults on every unaligned word or halfword access (and LDM/STM need a word
 * aligned base); Unicorn 2.1.4 does not. codecache.c checks accesses whose address is
 * a register the block received plus constants (pk_check). For every other block it
 * asks this module for a program: the block's instructions as operations on values
 * (SSA form), cut down to those the checked addresses depend on. Run when the block
 * starts, the program computes the addresses from the live registers, the carry flag
 * and guest memory (read through host pointers, with the block's own earlier stores
 * applied over it), in program order, and reports the first access that would fault.
 *
 * Values that cannot be known before the block runs (a load from a peripheral, whose
 * read has side effects) make the run stop before the block; the machine runs it up to
 * the access, where the address is a register the new block received (ALIGN_SPLIT).
 * The core keeps SP word aligned (its bits [1:0] are zero): an instruction that sets
 * SP from a register makes the machine run through it and clear those bits (SP_WRITE).
 * docs/cycle-model.md, "Alignment", states the rule.
 */
#ifndef PK_UNALIGNED_H
#define PK_UNALIGNED_H

#include <stdint.h>

/* Not exported from the library: called only from the native code beside it (a direct
 * call, not one through the dynamic symbol table). */
#if defined(__GNUC__)
#define PK_INTERNAL __attribute__((visibility("hidden")))
#else
#define PK_INTERNAL
#endif

/* What a program found (pk_align_run). */
enum { PK_ALIGN_OK = 0, PK_ALIGN_FAULT = 1, PK_ALIGN_SPLIT = 2, PK_ALIGN_SP_WRITE = 3 };

/* A program's operations on numbered values (unaligned.c says how a program is made).
 * Values 0-15 are r0-r15 at block entry, then the carry flag at block entry, the
 * constant 0, and from V_FIRST on what operations yield (each a new value). */
#define A_NONE 0xFFFFu /* no value */
#define V_CARRY 16
#define V_ZERO 17
#define V_FIRST 18
enum {
    A_HEAD,    /* imm: mask of the entry values read (bits 0-16); d: number of values */
    A_CONST,   /* d = imm */
    A_UNKNOWN, /* d = a value not known before the block runs */
    A_ADD,     /* d = a + b + imm */
    A_SUB,     /* d = a - b - imm */
    A_RSB,     /* d = imm - a */
    A_ADC,     /* d = a + b + carry c */
    A_SBC,     /* d = a - b - (1 - carry c) */
    A_CADD,    /* d = carry out of a + (b + imm) */
    A_CSUB,    /* d = carry out of a - (b + imm) (no borrow) */
    A_CADC,    /* d = carry out of a + b + c */
    A_CSBC,    /* d = carry out of a + ~b + c */
    A_CRSB,    /* d = carry out of 0 - a */
    A_MUL,
    A_AND,
    A_ORR,
    A_EOR,
    A_BIC,
    A_MVN,
    A_LSLI, A_LSRI, A_ASRI,    /* by imm (LSR/ASR: 1-32) */
    A_CLSLI, A_CLSRI, A_CASRI, /* their carry out */
    A_LSLR, A_LSRR, A_ASRR, A_RORR,     /* by the low byte of b */
    A_CLSLR, A_CLSRR, A_CASRR, A_CRORR, /* their carry out (c: the carry before) */
    A_SXTB, A_SXTH, A_UXTB, A_UXTH, A_REV, A_REV16, A_REVSH,
    A_LOAD,  /* d = memory at a + b + imm; size: bytes | 0x80 signed */
    A_STORE, /* memory at a + b + imm = c; size: bytes */
    A_CHECK, /* fault at pc if a + b + imm has a bit of mask size & 3 set (CHECK_PARTIAL below) */
    A_SPW,   /* SP is set to a at pc (an instruction of size bytes) */
    A_MRS,   /* d = MSP (imm 8) or PSP (imm 9); a: SP at this point */
    A_SPLIT, /* stop before the block: run it up to pc first */
    A_CHECK_LOAD, /* A_CHECK (mask size - 1), then A_LOAD at the same address */
    A_CHECK_STORE, /* A_CHECK, then A_STORE */
    A_NOP,         /* a check an earlier one implies (removed before cutting down) */
    A_STORE_ANY    /* A_STORE of a value not worked out: a load it overlaps is not known */
};

/* A_CHECK size bit: an operand known to be aligned was left out of the address (an
 * index scaled by 4, SP), so a + b + imm decides the check but is not the address: when
 * it fails, the block is run up to the access (PK_ALIGN_SPLIT), where its address is
 * registers the new block received, and the fault is reported there. */
#define CHECK_PARTIAL 0x40

typedef struct {
    uint8_t op;       /* A_* above */
    uint8_t size;     /* LOAD/STORE: bytes; CHECK: the alignment mask; SPW: instruction bytes */
    uint16_t d;       /* the value written */
    uint16_t a, b, c; /* the values read (A_NONE: none) */
    int32_t imm;
    uint32_t pc;      /* CHECK, SPW: the instruction */
} pk_aop;

/* The programs of every cached block, one array (index ranges per block). */
typedef struct {
    pk_aop *ops;
    uint32_t used, cap;
} pk_aprog;

/* Guest memory the programs read through host pointers (RAM and flash; never a
 * peripheral, whose reads have side effects). */
#define PK_AMEM_MAX 16
typedef struct {
    uint32_t base, size;
    const uint8_t *host;
} pk_amem;

typedef struct {
    pk_amem mem[PK_AMEM_MAX];
    uint32_t n;
    uint32_t last; /* the entry the last read found (tried first) */
} pk_amap;

/* A quick program: word loads, stores and checks through registers the block received
 * (r0-r14), zero and the program's own loads, at most PK_QUICK_OPS of them (locals
 * loaded from the stack, then an array indexed by them: most programs of compiled
 * loops). Its head's size has the bit PK_SHAPE_QUICK (pk_abuild_finish), and the block hook runs
 * it inline with r0-r14 in place: 1 when every check passes; 0 when it must run the
 * general way (pk_align_run, which finds the same: a check fails, a load is outside the
 * memory the last read found, or overlaps a store before it). A store's value is not
 * needed: no load it could change is read here. */
#define PK_SHAPE_QUICK 2
#define PK_QUICK_OPS 8
static inline int pk_align_quick(const pk_aop *ops, uint32_t n, const pk_amap *map, const uint32_t *in) {
    uint32_t v[V_FIRST + PK_QUICK_OPS], stores = 0;
    uint64_t lo[PK_QUICK_OPS], hi[PK_QUICK_OPS];
    const pk_amem *m = &map->mem[map->last];
    v[V_ZERO] = 0;
    for (const pk_aop *o = ops + 1, *end = ops + n; o < end; o++) {
        uint32_t a = (o->a < 15 ? in[o->a] : v[o->a]) + (o->b < 15 ? in[o->b] : v[o->b]) + (uint32_t)o->imm;
        if (o->op == A_LOAD || o->op == A_CHECK_LOAD) { /* a word */
            if ((o->op == A_CHECK_LOAD && (a & 3)) || m->size < 4 || a - m->base > m->size - 4) return 0;
            for (uint32_t k = 0; k < stores; k++)
                if (a < hi[k] && lo[k] < (uint64_t)a + 4) return 0;
            const uint8_t *p = m->host + (a - m->base);
            v[o->d] = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        } else if (o->op == A_CHECK) {
            if (a & o->size & 3) return 0;
        } else { /* A_STORE, A_STORE_ANY, A_CHECK_STORE */
            if (o->op == A_CHECK_STORE && (a & (o->size - 1u))) return 0;
            lo[stores] = a;
            hi[stores++] = (uint64_t)a + o->size;
        }
    }
    return 1;
}

/* Building one block's program, instruction by instruction (codecache.c fill()). */
typedef struct pk_abuild pk_abuild;

/* Guest memory at [addr, addr + size) in host memory, from the map (NULL: not RAM or flash). */
PK_INTERNAL const uint8_t *pk_amap_host(pk_amap *map, uint32_t addr, uint32_t size);
PK_INTERNAL pk_abuild *pk_abuild_new(void);
PK_INTERNAL void pk_abuild_free(pk_abuild *b);
PK_INTERNAL void pk_abuild_start(pk_abuild *b);
/* One instruction at addr (hw2: the second halfword of a 32-bit one). A literal load
 * passes lit_ok and the word; lit_const says the word cannot change under the block
 * (read-only memory). Returns -1 when out of memory. */
PK_INTERNAL int pk_abuild_insn(pk_abuild *b, uint32_t addr, uint32_t hw1, uint32_t hw2, int lit_ok,
                               uint32_t lit_word, int lit_const);
/* Whether the block needs a program: an access the register-plus-constant checks
 * cannot place, or a write of SP from a register. */
PK_INTERNAL int pk_abuild_needed(const pk_abuild *b);
/* Cut the program down and append it to prog: [*first, *first + *n). -1: no memory. */
PK_INTERNAL int pk_abuild_finish(pk_abuild *b, pk_aprog *prog, uint32_t *first, uint32_t *n);

/* Program operation o (after the head) is a check of registers the block received
 * plus a constant: its registers (-1: none), constant, mask and whether it is partial
 * (CHECK_PARTIAL). 0 otherwise. A program of such checks only is cheaper as
 * codecache.c's register checks. */
PK_INTERNAL int pk_aop_entry_check(const pk_aop *o, int *a, int *b, int32_t *off, uint8_t *mask, int *partial);

/* Where a program reads registers and the APSR (Unicorn's uc_reg_read and ids). */
typedef struct {
    void *uc;
    int (*reg_read)(void *uc, int regid, void *value);
    const int32_t *regids; /* r0..r15 */
    int32_t apsr_id, control_id, ipsr_id, msp_id, psp_id;
    const uint32_t *in_place; /* r0-r14 in the engine's CPU state (what reg_read returns), or NULL */
} pk_aregs;

/* Run a program. On a finding other than OK, *pc is the instruction and *addr the
 * faulting address (FAULT) or the address after the instruction (SP_WRITE). */
PK_INTERNAL int pk_align_run(const pk_aop *ops, uint32_t n, pk_amap *map, const pk_aregs *regs,
                             uint32_t *pc, uint32_t *addr);

#endif
