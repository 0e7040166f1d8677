/*
 * PKA driver without interrupts: operations chained by polling SR.BUSY (docs/pka.md;
 * used by the fixed-window RSA code, src/rsa_win.c, docs/xrsa.md).
 *
 * The interrupt driver of pka.c costs about 124 CPU cycles per operation (pointer
 * writes, START, WFI, exception entry, handler, return). Here CR carries no interrupt
 * enable, so the PKA never pends its IRQ, and the CPU waits in a three-instruction
 * loop on SR.BUSY (6 cycles per turn on the SC000). Everything that does not touch the
 * PKA (the next window of the exponent, the next pointer) is computed while the
 * previous operation runs: pkp_run() waits for the previous operation first, then
 * writes the pointers and START. LEN, NPTR and the pointers keep their values
 * between operations, so a squaring that follows a squaring writes CR alone.
 *
 * Error flags are sticky (they stay up until cleared through CLRFR), so they are
 * checked once per phase (pkp_errors), not after every operation: a refused START
 * leaves PKA RAM unchanged and the flag up, the later results are garbage, and the
 * phase returns the error instead of them.
 *
 * Rules for the caller: every CPU access to PKA RAM (pka_fill, pka_load_be, ...)
 * and every read of CARRY comes after pkp_wait(), or the PKA ignores it and raises
 * RAMERRF (which pkp_errors then reports).
 */
#ifndef PKASIM_PKA_POLL_H
#define PKASIM_PKA_POLL_H

#include "pka.h"

#define PKP_CR(op) (PKA_CR_EN | ((uint32_t)(op) << PKA_CR_OPCODE_POS) | PKA_CR_START)

/* Enable the PKA with every interrupt enable clear; clear the flags. */
static inline void pkp_init(void)
{
    PKA_CR = PKA_CR_EN;
    PKA_CLRFR = PKA_SR_FLAGS;
}

/* Until the operation in progress (if any) has finished. */
static inline void pkp_wait(void)
{
    while (PKA_SR & PKA_SR_BUSY)
        ;
}

/* LEN and the modulus for the operations that follow. */
static inline void pkp_config(uint32_t len, uint32_t n)
{
    pkp_wait();
    PKA_LEN = len;
    PKA_NPTR = 4u * n;
}

/* Start op on a, b (word offsets) into r, once the previous one has finished. */
static inline void pkp_run(uint32_t op, uint32_t a, uint32_t b, uint32_t r)
{
    pkp_wait();
    PKA_APTR = 4u * a;
    PKA_BPTR = 4u * b;
    PKA_RPTR = 4u * r;
    PKA_CR = PKP_CR(op);
}

/* CARRY (ADD) or borrow (SUB) of the last operation, once it has finished. */
static inline uint32_t pkp_carry(void)
{
    pkp_wait();
    return PKA_CARRY & 1u;
}

/* After the last operation: 0, or the first error flag raised since pkp_init or the
 * last call (PKA_ERR_OP, PKA_ERR_ADDR, PKA_ERR_RAM), which is then cleared. */
static inline int pkp_errors(void)
{
    pkp_wait();
    uint32_t sr = PKA_SR;
    if (!(sr & PKA_SR_ERRORS))
        return PKA_OK;
    PKA_CLRFR = PKA_SR_FLAGS;
    if (sr & PKA_SR_OPERRF)
        return PKA_ERR_OP;
    if (sr & PKA_SR_ADDRERRF)
        return PKA_ERR_ADDR;
    return PKA_ERR_RAM;
}

#endif
