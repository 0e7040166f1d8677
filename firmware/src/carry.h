/* Carries and borrows through the flags: one limb of an addition or subtraction,
 * shared by the software bignum (bn.c) and the ECC field arithmetic (ecc_fe.c). */
#ifndef CARRY_H
#define CARRY_H

#include <stdint.h>

/*
 * One limb of an addition or subtraction with its carry or borrow (0 or 1, nothing
 * else) in and out. In C, clang for ARMv6-M turns some of these back into compare-and-branch once
 * it has inlined and unrolled a loop (`pkasim ct-check` found one in bn_mod_wide, and
 * one in ecc_fe.c's subtraction, where the 64-bit borrow became a compare and a branch);
 * on ARMv6-M they are therefore written with the flags: ADCS and SBCS, whatever
 * the values, as Mbed TLS's own assembly does.
 */
static inline uint32_t add_step(uint32_t *r, uint32_t a, uint32_t b, uint32_t c)
{
#if defined(__thumb__) && !defined(__thumb2__)
    __asm__("lsrs   %[c], %[c], #1\n\t"     /* C = carry in */
            "adcs   %[a], %[b]\n\t"
            "movs   %[c], #0\n\t"           /* (MOVS #imm leaves C alone) */
            "adcs   %[c], %[c]"             /* carry out */
            : [a] "+l"(a), [c] "+l"(c) : [b] "l"(b) : "cc");
    *r = a;
    return c;
#else
    uint64_t s = (uint64_t)a + b + c;
    *r = (uint32_t)s;
    return (uint32_t)(s >> 32);
#endif
}

static inline uint32_t sub_step(uint32_t *r, uint32_t a, uint32_t b, uint32_t c)
{
#if defined(__thumb__) && !defined(__thumb2__)
    __asm__("negs   %[c], %[c]\n\t"         /* C = not borrow in */
            "sbcs   %[a], %[b]\n\t"
            "sbcs   %[c], %[c]\n\t"         /* 0 or -1 */
            "negs   %[c], %[c]"             /* borrow out */
            : [a] "+l"(a), [c] "+l"(c) : [b] "l"(b) : "cc");
    *r = a;
    return c;
#else
    uint64_t d = (uint64_t)a - b - c;
    *r = (uint32_t)d;
    return (uint32_t)(d >> 32) & 1u;
#endif
}

#endif
