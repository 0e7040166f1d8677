/*
 * Software bignum for the RSA baseline: the constant-time algorithms of Mbed TLS
 * 3.6 LTS's bignum core (bignum_core.c) on static buffers (bn.h;
 * docs/software-rsa.md). Function by function:
 *
 *   bn_mla          mbedtls_mpi_core_mla: d += s * b over a fixed length, with
 *                   bn_mul.h's Thumb-1 MULADDC_CORE on ARMv6-M (or either of its C
 *                   versions: BN_MULADDC in bn.h)
 *   bn_montmul      mbedtls_mpi_core_montmul (final subtraction by a masked copy)
 *   bn_montred      mbedtls_mpi_core_from_mont_rep (a montmul by 1)
 *   bn_mont_init    mbedtls_mpi_core_montmul_init
 *   bn_exp_mod      mbedtls_mpi_core_exp_mod (fixed window over the exponent's whole
 *                   length, table W[0..2^w-1], every entry read for each lookup as
 *                   mbedtls_mpi_core_ct_uint_table_lookup)
 *   bn_mul          mbedtls_mpi_core_mul (schoolbook with bn_mla)
 *   bn_rr, bn_mod_wide   where Mbed TLS divides (mbedtls_mpi_mod_mpi), a doubling
 *                   loop and a Montgomery reduction, each with a fixed number of
 *                   masked conditional subtractions; together about 1% of an RSA
 *                   private operation (docs/software-rsa.md)
 *
 * Nothing here branches on, or indexes memory with, a value computed from a number:
 * loop counts and addresses depend on the lengths only (`pkasim ct-check`,
 * docs/ct-check.md). Carries and borrows go through the flags (add_step, sub_step)
 * and comparisons become all-ones/all-zeros masks.
 */
#include "bn.h"

uint32_t bn_montmul_count;

/* ---- d += s * b: the inner loop of everything ---------------------------------- */

/*
 * Portable C, the way Mbed TLS's generic MULADDC_CORE does it without a double-width
 * type (bn_mul.h, "C, generic"): a 32x32 -> 64-bit product from four 16x16 -> 32-bit
 * ones, since ARMv6-M's MULS keeps only the low 32 bits.
 */
bn_uint bn_muladdc_c(size_t n, const bn_uint *s, bn_uint *d, bn_uint b)
{
    const bn_uint b0 = b & 0xFFFFu, b1 = b >> 16;
    bn_uint c = 0;

    for (; n > 0; n--) {
        bn_uint x = *s++;
        bn_uint x0 = x & 0xFFFFu, x1 = x >> 16;
        bn_uint lo = x0 * b0, m1 = x0 * b1, m2 = x1 * b0, hi = x1 * b1;
        bn_uint dv = *d;

        hi += m1 >> 16;
        hi += m2 >> 16;
        m1 <<= 16;
        m2 <<= 16;
        lo += m1; hi += lo < m1;
        lo += m2; hi += lo < m2;
        lo += c;  hi += lo < c;
        lo += dv; hi += lo < dv;
        c = hi;
        *d++ = lo;
    }
    return c;
}

/*
 * Portable C with a double-width product, as Mbed TLS's "C, longlong" MULADDC_CORE
 * (MBEDTLS_HAVE_UDBL, the path a compiler without GNU inline asm takes, e.g. Arm's
 * armcc 5): on ARMv6-M each product is a call of the runtime's __aeabi_lmul (GCC) or
 * an inline four-MULS expansion (clang).
 */
bn_uint bn_muladdc_ll(size_t n, const bn_uint *s, bn_uint *d, bn_uint b)
{
    bn_uint c = 0;

    for (; n > 0; n--) {
        uint64_t r = (uint64_t)*s++ * b;
        bn_uint r0 = (bn_uint)r, r1 = (bn_uint)(r >> 32);

        r0 += c;  r1 += r0 < c;
        r0 += *d; r1 += r0 < *d;
        c = r1;
        *d++ = r0;
    }
    return c;
}

#if defined(__thumb__) && !defined(__thumb2__)
/*
 * ARMv6-M assembly: the inner step is Mbed TLS's Thumb-1 MULADDC_CORE (bn_mul.h,
 * used when MBEDTLS_HAVE_ASM is on, its default), instruction for instruction:
 * 29 instructions, 4 MULS, 32 cycles with the 1-cycle multiplier (ldmia, ldr and
 * stmia take 2). Registers: r0 carry, r1 s, r2 d, r3-r7 temporaries, r8/r9 the
 * low/high halves of b. Mbed TLS unrolls its C loop by 16, 8 and 1 with the asm
 * block reloading its registers each time; here one function runs the n % 8 single
 * steps, then blocks of 8, with only a compare and a branch between blocks.
 */
#define BN_CORE                                                            \
    "ldmia  r1!, {r6}\n\t"      /* x = *s++ */                             \
    "lsrs   r7, r6, #16\n\t"    /* x1 */                                   \
    "lsls   r6, r6, #16\n\t"                                               \
    "lsrs   r6, r6, #16\n\t"    /* x0 */                                   \
    "mov    r4, r8\n\t"                                                    \
    "muls   r4, r6\n\t"         /* lo = b0 x0 */                           \
    "mov    r3, r9\n\t"                                                    \
    "muls   r6, r3\n\t"         /* m1 = x0 b1 */                           \
    "mov    r5, r9\n\t"                                                    \
    "muls   r5, r7\n\t"         /* hi = b1 x1 */                           \
    "mov    r3, r8\n\t"                                                    \
    "muls   r7, r3\n\t"         /* m2 = x1 b0 */                           \
    "lsrs   r3, r6, #16\n\t"                                               \
    "adds   r5, r5, r3\n\t"                                                \
    "lsrs   r3, r7, #16\n\t"                                               \
    "adds   r5, r5, r3\n\t"     /* hi += m1 >> 16, m2 >> 16 */             \
    "adds   r4, r4, r0\n\t"                                                \
    "movs   r0, #0\n\t"         /* (MOVS #imm leaves C alone) */           \
    "adcs   r5, r0\n\t"         /* lo += c */                              \
    "lsls   r3, r6, #16\n\t"                                               \
    "adds   r4, r4, r3\n\t"                                                \
    "adcs   r5, r0\n\t"         /* lo += m1 << 16 */                       \
    "lsls   r3, r7, #16\n\t"                                               \
    "adds   r4, r4, r3\n\t"                                                \
    "adcs   r5, r0\n\t"         /* lo += m2 << 16 */                       \
    "ldr    r3, [r2]\n\t"                                                  \
    "adds   r4, r4, r3\n\t"                                                \
    "adcs   r0, r5\n\t"         /* lo += *d; c = hi + carry */             \
    "stmia  r2!, {r4}\n\t"      /* *d++ = lo */

__asm__(
    "\t.section .text.bn_muladdc_thumb,\"ax\",%progbits\n"
    "\t.syntax unified\n"
    "\t.thumb\n"
    "\t.balign 4\n"
    "\t.global bn_muladdc_thumb\n"
    "\t.type bn_muladdc_thumb, %function\n"
    "\t.thumb_func\n"
    "bn_muladdc_thumb:\n\t"         /* r0 = n, r1 = s, r2 = d, r3 = b */
    ".cfi_startproc\n\t"             /* call frame information: gdb unwinds through it */
    "push   {r4, r5, r6, r7, lr}\n\t"
    ".cfi_def_cfa_offset 20\n\t"
    ".cfi_offset lr, -4\n\t"
    ".cfi_offset r7, -8\n\t"
    ".cfi_offset r6, -12\n\t"
    ".cfi_offset r5, -16\n\t"
    ".cfi_offset r4, -20\n\t"
    "mov    r4, r8\n\t"
    "mov    r5, r9\n\t"
    "push   {r4, r5}\n\t"
    ".cfi_def_cfa_offset 28\n\t"
    ".cfi_offset r9, -24\n\t"
    ".cfi_offset r8, -28\n\t"
    "lsrs   r4, r3, #16\n\t"
    "mov    r9, r4\n\t"             /* b1 */
    "lsls   r4, r3, #16\n\t"
    "lsrs   r4, r4, #16\n\t"
    "mov    r8, r4\n\t"             /* b0 */
    "lsls   r3, r0, #2\n\t"
    "adds   r3, r1, r3\n\t"
    "mov    ip, r3\n\t"             /* ip = s + n */
    "movs   r3, #7\n\t"
    "ands   r3, r0\n\t"
    "lsls   r3, r3, #2\n\t"
    "adds   r3, r1, r3\n\t"
    "mov    lr, r3\n\t"             /* lr = s + n % 8 */
    "movs   r0, #0\n\t"             /* c = 0 */
    "cmp    r1, lr\n\t"
    "beq    2f\n"
    "1:\n\t"
    BN_CORE
    "cmp    r1, lr\n\t"
    "bne    1b\n"
    "2:\n\t"                        /* (B<cond> reaches +-256 bytes, 8 steps are 464) */
    "cmp    r1, ip\n\t"
    "bne    3f\n\t"
    "b      4f\n"
    "3:\n\t"
    BN_CORE BN_CORE BN_CORE BN_CORE BN_CORE BN_CORE BN_CORE BN_CORE
    "cmp    r1, ip\n\t"
    "beq    4f\n\t"
    "b      3b\n"
    "4:\n\t"                        /* return c (bn_carry moves it on) */
    "pop    {r4, r5}\n\t"
    ".cfi_def_cfa_offset 20\n\t"
    "mov    r8, r4\n\t"
    "mov    r9, r5\n\t"
    ".cfi_restore r8\n\t"
    ".cfi_restore r9\n\t"
    "pop    {r4, r5, r6, r7, pc}\n\t"
    ".cfi_endproc\n"
    "\t.size bn_muladdc_thumb, .-bn_muladdc_thumb\n"
    "\t.text\n");
#endif

/* ---- carries and borrows without branches ---------------------------------------- */

#include "carry.h"

bn_uint bn_carry(bn_uint *d, size_t n, bn_uint c)
{
    if (n == 0)
        return c;
    c = add_step(&d[0], d[0], c, 0);        /* (c may be any limb, the carry is 0 or 1) */
    for (size_t i = 1; i < n; i++)
        c = add_step(&d[i], d[i], 0, c);
    return c;
}

bn_uint bn_mla(bn_uint *d, size_t dl, const bn_uint *s, size_t sl, bn_uint b)
{
#if BN_MULADDC == BN_MULADDC_ASM
    bn_uint c = bn_muladdc_thumb(sl, s, d, b);
#elif BN_MULADDC == BN_MULADDC_C64
    bn_uint c = bn_muladdc_ll(sl, s, d, b);
#else
    bn_uint c = bn_muladdc_c(sl, s, d, b);
#endif
    return bn_carry(d + sl, dl - sl, c);
}

/* ---- limb vectors ---------------------------------------------------------------- */

void bn_zero(bn_uint *x, size_t n)
{
    while (n-- > 0)
        *x++ = 0;
}

void bn_copy(bn_uint *dst, const bn_uint *src, size_t n)
{
    while (n-- > 0)
        *dst++ = *src++;
}

bn_uint bn_add(bn_uint *r, const bn_uint *a, const bn_uint *b, size_t n)
{
    bn_uint c = 0;

    for (size_t i = 0; i < n; i++)
        c = add_step(&r[i], a[i], b[i], c);
    return c;
}

bn_uint bn_sub(bn_uint *r, const bn_uint *a, const bn_uint *b, size_t n)
{
    bn_uint c = 0;

    for (size_t i = 0; i < n; i++)
        c = sub_step(&r[i], a[i], b[i], c);
    return c;
}

bn_uint bn_add_masked(bn_uint *r, const bn_uint *a, const bn_uint *b, size_t n, bn_uint mask)
{
    bn_uint c = 0;

    mask = bn_ct_opaque(mask);
    for (size_t i = 0; i < n; i++)
        c = add_step(&r[i], a[i], b[i] & mask, c);
    return c;
}

bn_uint bn_sub_masked(bn_uint *r, const bn_uint *a, const bn_uint *b, size_t n, bn_uint mask)
{
    bn_uint c = 0;

    mask = bn_ct_opaque(mask);
    for (size_t i = 0; i < n; i++)
        c = sub_step(&r[i], a[i], b[i] & mask, c);
    return c;
}

bn_uint bn_csub(bn_uint *x, bn_uint top, const bn_uint *n, size_t nl)
{
    bn_uint borrow = 0;

    /* The borrow of x - n over all nl limbs, nothing stored (mbedtls_mpi_core_lt_ct). */
    for (size_t i = 0; i < nl; i++) {
        bn_uint unused;
        borrow = sub_step(&unused, x[i], n[i], borrow);
    }
    /* x + top R >= n exactly when top - borrow does not wrap (top is small). */
    bn_uint mask = ((bn_ct_opaque(top) - bn_ct_opaque(borrow)) >> 31) - 1u;
    return top - bn_sub_masked(x, x, n, nl, mask);
}

void bn_mul(bn_uint *r, const bn_uint *a, size_t an, const bn_uint *b, size_t bn)
{
    bn_zero(r, an + bn);
    for (size_t j = 0; j < bn; j++)
        bn_mla(r + j, an + 1u, a, an, b[j]);
}

void bn_from_be(bn_uint *x, size_t nl, const uint8_t *buf, size_t len)
{
    bn_zero(x, nl);
    for (size_t i = 0; i < len && i < 4u * nl; i++)
        x[i / 4u] |= (bn_uint)buf[len - 1u - i] << (8u * (i % 4u));
}

void bn_to_be(uint8_t *buf, size_t len, const bn_uint *x, size_t nl)
{
    for (size_t i = 0; i < len; i++)
        buf[len - 1u - i] = i < 4u * nl ? (uint8_t)(x[i / 4u] >> (8u * (i % 4u))) : 0u;
}

/* ---- Montgomery arithmetic ---------------------------------------------------------- */

bn_uint bn_mont_init(bn_uint n0)
{
    /* Newton's iteration for n0^-1 mod 2^32, from a start correct to 4 bits. */
    bn_uint x = n0;

    x += ((n0 + 2u) & 4u) << 1;
    for (unsigned i = BN_LIMB_BITS; i >= 8u; i /= 2u)
        x *= 2u - n0 * x;
    return ~x + 1u;
}

/*
 * a = a * b * R^-1 mod N with b of bl limbs (bl = nl, or 1 for bn_montred), as
 * mbedtls_mpi_core_montmul: for each limb a[i], T += a[i] * b and T += u * N with
 * u = (T[0] + a[i] b[0]) * mm, which zeroes T's low limb; the pointer d then moves
 * one limb up instead of shifting T. Each accumulate runs over the same nl + 2
 * limbs whatever the carries. The result T < 2N; N is subtracted and the
 * difference or T taken by a mask (mbedtls_ct_memcpy_if).
 */
static void montmul(bn_uint *a, const bn_uint *b, size_t bl, const bn_uint *n, size_t nl,
                    bn_uint mm, bn_uint *t)
{
    bn_uint *d = t;

    bn_montmul_count++;
    bn_zero(t, BN_MONT_SCRATCH(nl));
    for (size_t i = 0; i < nl; i++, d++) {
        bn_uint u0 = a[i];
        bn_uint u1 = (d[0] + u0 * b[0]) * mm;

        bn_mla(d, nl + 2u, b, bl, u0);
        bn_mla(d, nl + 2u, n, nl, u1);
    }
    /* d[0..nl] = T < 2N. a = T; then d = T + 2^(32 nl) - N, whose top limb is 1
     * exactly when T >= N, and a takes d's low limbs then. */
    bn_copy(a, d, nl);
    d[nl] += 1u;
    d[nl] -= bn_sub(d, d, n, nl);
    bn_uint mask = bn_ct_opaque(0u - d[nl]);
    for (size_t i = 0; i < nl; i++)
        a[i] = (a[i] & ~mask) | (d[i] & mask);
}

void bn_montmul(bn_uint *a, const bn_uint *b, const bn_uint *n, size_t nl, bn_uint mm, bn_uint *t)
{
    montmul(a, b, nl, n, nl, mm, t);
}

void bn_montred(bn_uint *a, const bn_uint *n, size_t nl, bn_uint mm, bn_uint *t)
{
    static const bn_uint one = 1;

    montmul(a, &one, 1, n, nl, mm, t);
}

void bn_mod_wide(bn_uint *r, bn_uint *t, const bn_uint *n, size_t nl, bn_uint mm, const bn_uint *rr)
{
    bn_uint *d = t;

    /* Montgomery reduction of x = t[0..2nl): (x + U N) / R with U < R, each step's
     * carry carried to the top. */
    t[2u * nl] = 0;
    t[2u * nl + 1u] = 0;
    for (size_t i = 0; i < nl; i++, d++)
        bn_mla(d, 2u * nl + 2u - i, n, nl, d[0] * mm);
    /* d[0..nl] = (x + U N) / R < x / R + N <= 3N when x < 2^(64 nl) and N >= R/2:
     * two masked subtractions, always both. */
    d[nl] = bn_csub(d, d[nl], n, nl);
    d[nl] = bn_csub(d, d[nl], n, nl);
    bn_copy(r, d, nl);
    /* x R^-1 * R^2 * R^-1 = x mod N. */
    montmul(r, rr, nl, n, nl, mm, t);
}

void bn_rr(bn_uint *rr, const bn_uint *n, size_t nl)
{
    /* R mod N = R - N for R/2 <= N < R, then 32 nl doublings each followed by a
     * masked subtraction: 2x < 2N, so one subtraction brings it below N again. */
    bn_zero(rr, nl);
    bn_sub(rr, rr, n, nl);
    for (size_t k = 0; k < 32u * nl; k++) {
        bn_uint top = rr[nl - 1u] >> 31;
        for (size_t i = nl - 1u; i > 0; i--)
            rr[i] = (rr[i] << 1) | (rr[i - 1u] >> 31);
        rr[0] <<= 1;
        bn_csub(rr, top, n, nl);
    }
}

/* ---- exponentiation ------------------------------------------------------------------- */

unsigned bn_window_size(size_t ebits)
{
#if BN_WINDOW_SIZE >= 6
    return ebits > 671 ? 6u : ebits > 239 ? 5u : ebits > 79 ? 4u : 1u;
#elif BN_WINDOW_SIZE == 5
    return ebits > 239 ? 5u : ebits > 79 ? 4u : 1u;
#elif BN_WINDOW_SIZE > 1
    return ebits > 79 ? (unsigned)BN_WINDOW_SIZE : 1u;
#else
    (void)ebits;
    return 1u;
#endif
}

/* sel = table[idx] of count entries of nl limbs, reading every entry
 * (mbedtls_mpi_core_ct_uint_table_lookup). */
static void ct_select(bn_uint *sel, const bn_uint (*table)[BN_MAX_LIMBS], size_t count, size_t nl,
                      bn_uint idx)
{
    bn_zero(sel, nl);
    for (bn_uint j = 0; j < count; j++) {
        bn_uint diff = j ^ idx;
        bn_uint mask = bn_ct_opaque(((diff | (0u - diff)) >> 31) - 1u);   /* all ones when j == idx */
        for (size_t i = 0; i < nl; i++)
            sel[i] |= table[j][i] & mask;
    }
}

void bn_exp_mod(bn_uint *x, const bn_uint *a, const uint8_t *e, size_t elen,
                const bn_uint *n, size_t nl, const bn_uint *rr, bn_exp_ws *ws)
{
    const bn_uint mm = bn_mont_init(n[0]);
    bn_uint *t = ws->t;
    const size_t ebits = 8u * elen;
    const unsigned wsize = bn_window_size(ebits);
    const size_t welem = (size_t)1 << wsize;

    /* W[0] = R mod N (1 in the Montgomery domain), W[1] = A R mod N,
     * W[i] = W[i-1] W[1] up to 2^w - 1. */
    bn_zero(ws->w[0], nl);
    ws->w[0][0] = 1u;
    montmul(ws->w[0], rr, nl, n, nl, mm, t);
    bn_copy(ws->w[1], a, nl);
    montmul(ws->w[1], rr, nl, n, nl, mm, t);
    for (size_t i = 2; i < welem; i++) {
        bn_copy(ws->w[i], ws->w[i - 1u], nl);
        montmul(ws->w[i], ws->w[1], nl, n, nl, mm, t);
    }
    bn_copy(x, ws->w[0], nl);

    /*
     * Left to right over all of e's bits, leading zeros included: a squaring per bit;
     * after every wsize bits, and after the last, one multiplication by W[window]
     * (W[0] for a window of zeros), the entry read by ct_select.
     */
    bn_uint window = 0;
    unsigned window_bits = 0;
    for (size_t b = 0; b < ebits; b++) {
        montmul(x, x, nl, n, nl, mm, t);
        window = (window << 1) | ((e[b / 8u] >> (7u - b % 8u)) & 1u);
        if (++window_bits == wsize || b + 1u == ebits) {
            ct_select(ws->sel, ws->w, welem, nl, window);
            montmul(x, ws->sel, nl, n, nl, mm, t);
            window = 0;
            window_bits = 0;
        }
    }
    /* Out of the Montgomery domain. */
    bn_montred(x, n, nl, mm, t);
}
