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

typedef struct {
    uint8_t op;       /* A_* (unaligned.c) */
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

/* Building one block's program, instruction by instruction (codecache.c fill()). */
typedef struct pk_abuild pk_abuild;

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
 * plus a constant: its registers (-1: none), constant and mask. 0 otherwise. A
 * program of such checks only is cheaper as codecache.c's register checks. */
PK_INTERNAL int pk_aop_entry_check(const pk_aop *o, int *a, int *b, int32_t *off, uint8_t *mask);

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
