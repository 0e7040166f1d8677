/*
 * Software bignum for the RSA baseline: Mbed TLS 2.x bignum.c's algorithms on
 * static buffers (bn.h; docs/software-rsa.md). Function by function:
 *
 *   bn_mul_hlp      mpi_mul_hlp, with bn_mul.h's Thumb-1 MULADDC_CORE on ARMv6-M
 *                   (or either of its C versions: BN_MULADDC in bn.h)
 *   bn_montmul      mpi_montmul (2.2x: final subtraction by a masked copy)
 *   bn_montred      mpi_montred
 *   bn_mont_init    mpi_montg_init
 *   bn_exp_mod      mbedtls_mpi_exp_mod (sliding window, table W[2^(w-1)..2^w-1])
 *   bn_mul          mbedtls_mpi_mul_mpi (schoolbook with mpi_mul_hlp)
 *   bn_rr, bn_mod_wide   where Mbed TLS divides (mbedtls_mpi_mod_mpi), a doubling
 *                   loop and a Montgomery reduction; together well under 1% of an
 *                   RSA private operation (docs/software-rsa.md)
 */
#include "bn.h"

uint32_t bn_montmul_count;

/* ---- d += s * b: the inner loop of everything ---------------------------------- */

/*
 * Portable C, the way Mbed TLS's generic MULADDC_CORE does it without a double-width
 * type (bn_mul.h, "C, generic"): a 32x32 -> 64-bit product from four 16x16 -> 32-bit
 * ones, since ARMv6-M's MULS keeps only the low 32 bits.
 */
void bn_mul_hlp_c(size_t n, const bn_uint *s, bn_uint *d, bn_uint b)
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
    do {
        *d += c;
        c = *d < c;
        d++;
    } while (c != 0);
}

/*
 * Portable C with a double-width product, as Mbed TLS's "C, longlong" MULADDC_CORE
 * (MBEDTLS_HAVE_UDBL, the path a compiler without GNU inline asm takes, e.g. Arm's
 * armcc 5): on ARMv6-M each product is a call of the runtime's __aeabi_lmul (GCC) or
 * an inline four-MULS expansion (clang).
 */
void bn_mul_hlp_ll(size_t n, const bn_uint *s, bn_uint *d, bn_uint b)
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
    do {
        *d += c;
        c = *d < c;
        d++;
    } while (c != 0);
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
    "\t.section .text.bn_mul_hlp_thumb,\"ax\",%progbits\n"
    "\t.syntax unified\n"
    "\t.thumb\n"
    "\t.balign 4\n"
    "\t.global bn_mul_hlp_thumb\n"
    "\t.type bn_mul_hlp_thumb, %function\n"
    "\t.thumb_func\n"
    "bn_mul_hlp_thumb:\n\t"         /* r0 = n, r1 = s, r2 = d, r3 = b */
    "push   {r4, r5, r6, r7, lr}\n\t"
    "mov    r4, r8\n\t"
    "mov    r5, r9\n\t"
    "push   {r4, r5}\n\t"
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
    "4:\n\t"                        /* do { *d += c; c = carry; d++; } while (c) */
    "ldr    r3, [r2]\n\t"
    "adds   r3, r3, r0\n\t"
    "stmia  r2!, {r3}\n\t"
    "movs   r0, #0\n\t"
    "adcs   r0, r0\n\t"
    "bne    4b\n\t"
    "pop    {r4, r5}\n\t"
    "mov    r8, r4\n\t"
    "mov    r9, r5\n\t"
    "pop    {r4, r5, r6, r7, pc}\n"
    "\t.size bn_mul_hlp_thumb, .-bn_mul_hlp_thumb\n"
    "\t.text\n");
#endif

void bn_mul_hlp(size_t n, const bn_uint *s, bn_uint *d, bn_uint b)
{
#if BN_MULADDC == BN_MULADDC_ASM
    bn_mul_hlp_thumb(n, s, d, b);
#elif BN_MULADDC == BN_MULADDC_C64
    bn_mul_hlp_ll(n, s, d, b);
#else
    bn_mul_hlp_c(n, s, d, b);
#endif
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

    for (size_t i = 0; i < n; i++) {
        bn_uint x = a[i], y = b[i];
        bn_uint s = x + c;
        c = s < c;
        s += y;
        c += s < y;
        r[i] = s;
    }
    return c;
}

bn_uint bn_sub(bn_uint *r, const bn_uint *a, const bn_uint *b, size_t n)
{
    bn_uint c = 0;

    for (size_t i = 0; i < n; i++) {
        bn_uint x = a[i], y = b[i];
        bn_uint z = x < c;
        x -= c;
        c = (x < y) + z;
        r[i] = x - y;
    }
    return c;
}

int bn_cmp(const bn_uint *a, const bn_uint *b, size_t n)
{
    while (n-- > 0) {
        if (a[n] != b[n])
            return a[n] > b[n] ? 1 : -1;
    }
    return 0;
}

size_t bn_bitlen(const bn_uint *a, size_t n)
{
    while (n > 0 && a[n - 1] == 0)
        n--;
    if (n == 0)
        return 0;
    size_t bits = 32u * n;
    for (bn_uint top = a[n - 1]; !(top & 0x80000000u); top <<= 1)
        bits--;
    return bits;
}

void bn_mul(bn_uint *r, const bn_uint *a, size_t an, const bn_uint *b, size_t bn)
{
    bn_zero(r, an + bn);
    for (size_t j = bn; j > 0; j--)
        bn_mul_hlp(an, a, r + j - 1, b[j - 1]);
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
 * mpi_montmul: for each limb a[i], T += a[i] * b and T += u * N with
 * u = (T[0] + a[i] b[0]) * mm, which zeroes T's low limb; the pointer d then moves
 * one limb up instead of shifting T. The result T < 2N; N is subtracted and the
 * difference or T taken by a mask, as Mbed TLS 2.2x does (a conditional assignment
 * without a branch on the secret comparison).
 */
static void montmul(bn_uint *a, const bn_uint *b, size_t bl, const bn_uint *n, size_t nl,
                    bn_uint mm, bn_uint *t)
{
    bn_uint *d = t;

    bn_montmul_count++;
    bn_zero(t, BN_MONT_SCRATCH(nl));
    for (size_t i = 0; i < nl; i++) {
        bn_uint u0 = a[i];
        bn_uint u1 = (d[0] + u0 * b[0]) * mm;

        bn_mul_hlp(bl, b, d, u0);
        bn_mul_hlp(nl, n, d, u1);
        *d++ = u0;              /* (the limb shifted out; Mbed TLS stores u0 there too) */
        d[nl + 1] = 0;
    }
    /* d[0..nl] = T < 2N. a = T; then d = T + 2^(32 nl) - N, whose top limb is 1
     * exactly when T >= N, and a takes d's low limbs then. */
    bn_copy(a, d, nl);
    d[nl] += 1u;
    d[nl] -= bn_sub(d, d, n, nl);
    bn_uint mask = 0u - d[nl];
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

    /* Montgomery reduction of x = t[0..2nl): (x + U N) / R with U < R. */
    t[2u * nl] = 0;
    t[2u * nl + 1u] = 0;
    for (size_t i = 0; i < nl; i++, d++)
        bn_mul_hlp(nl, n, d, d[0] * mm);
    /* d[0..nl] = (x + U N) / R < x / R + N <= 3N when x < 2^(64 nl) and N >= R/2. */
    while (d[nl] != 0 || bn_cmp(d, n, nl) >= 0)
        d[nl] -= bn_sub(d, d, n, nl);
    bn_copy(r, d, nl);
    /* x R^-1 * R^2 * R^-1 = x mod N. */
    montmul(r, rr, nl, n, nl, mm, t);
}

void bn_rr(bn_uint *rr, const bn_uint *n, size_t nl)
{
    size_t nb = bn_bitlen(n, nl);

    /* From 2^(nb-1) < N, double up to 2^(64 nl), subtracting N whenever it fits. */
    bn_zero(rr, nl);
    rr[(nb - 1u) / 32u] = 1u << ((nb - 1u) % 32u);
    for (size_t k = nb - 1u; k < 64u * nl; k++) {
        bn_uint top = rr[nl - 1u] >> 31;
        for (size_t i = nl - 1u; i > 0; i--)
            rr[i] = (rr[i] << 1) | (rr[i - 1u] >> 31);
        rr[0] <<= 1;
        if (top || bn_cmp(rr, n, nl) >= 0)
            bn_sub(rr, rr, n, nl);
    }
}

/* ---- exponentiation ------------------------------------------------------------------- */

/* Bits in a big-endian byte string: 0 for zero. */
static size_t be_bitlen(const uint8_t *e, size_t elen)
{
    size_t i = 0;

    while (i < elen && e[i] == 0)
        i++;
    if (i == elen)
        return 0;
    size_t bits = 8u * (elen - i);
    for (uint8_t top = e[i]; !(top & 0x80u); top <<= 1)
        bits--;
    return bits;
}

unsigned bn_window_size(size_t ebits)
{
    unsigned w = ebits > 671 ? 6u : ebits > 239 ? 5u : ebits > 79 ? 4u : ebits > 23 ? 3u : 1u;

    return w > BN_WINDOW_SIZE ? (unsigned)BN_WINDOW_SIZE : w;
}

void bn_exp_mod(bn_uint *x, const bn_uint *a, const uint8_t *e, size_t elen,
                const bn_uint *n, size_t nl, const bn_uint *rr, bn_exp_ws *ws)
{
    const bn_uint mm = bn_mont_init(n[0]);
    bn_uint *t = ws->t;
    const size_t ebits = be_bitlen(e, elen);
    const unsigned wsize = bn_window_size(ebits);

    /* W[1] = A R mod N; X = R mod N (1 in the Montgomery domain). */
    bn_copy(ws->w1, a, nl);
    montmul(ws->w1, rr, nl, n, nl, mm, t);
    bn_copy(x, rr, nl);
    bn_montred(x, n, nl, mm, t);

    /* W[2^(w-1)] = W[1]^(2^(w-1)), then W[i] = W[i-1] W[1] up to 2^w - 1. */
    const size_t first = (size_t)1 << (wsize - 1u);
    if (wsize > 1u) {
        bn_uint *wj = ws->w[0];
        bn_copy(wj, ws->w1, nl);
        for (unsigned i = 0; i < wsize - 1u; i++)
            montmul(wj, wj, nl, n, nl, mm, t);
        for (size_t i = 1; i < first; i++) {
            bn_copy(ws->w[i], ws->w[i - 1u], nl);
            montmul(ws->w[i], ws->w1, nl, n, nl, mm, t);
        }
    }

    /*
     * Left to right over the exponent's bits. state 0: leading zeros, skipped;
     * state 1: between windows, each zero bit is a squaring; state 2: collecting a
     * window of wsize bits that starts with a one, then wsize squarings and one
     * multiplication by W[window].
     */
    unsigned state = 0, nbits = 0;
    size_t wbits = 0;
    for (size_t i = 0; i < elen; i++) {
        for (int k = 7; k >= 0; k--) {
            unsigned ei = (e[i] >> k) & 1u;

            if (ei == 0 && state == 0)
                continue;
            if (ei == 0 && state == 1) {
                montmul(x, x, nl, n, nl, mm, t);
                continue;
            }
            state = 2;
            nbits++;
            wbits |= (size_t)ei << (wsize - nbits);
            if (nbits == wsize) {
                for (unsigned j = 0; j < wsize; j++)
                    montmul(x, x, nl, n, nl, mm, t);
                montmul(x, wbits == 1u ? ws->w1 : ws->w[wbits - first], nl, n, nl, mm, t);
                state--;
                nbits = 0;
                wbits = 0;
            }
        }
    }
    /* The bits left in an unfinished window, one at a time. */
    for (unsigned i = 0; i < nbits; i++) {
        montmul(x, x, nl, n, nl, mm, t);
        wbits <<= 1;
        if (wbits & ((size_t)1 << wsize))
            montmul(x, ws->w1, nl, n, nl, mm, t);
    }
    /* Out of the Montgomery domain. */
    bn_montred(x, n, nl, mm, t);
}
