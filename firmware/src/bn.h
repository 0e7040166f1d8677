/*
 * Software bignum for the RSA baseline (docs/software-rsa.md): the constant-time
 * algorithms of Mbed TLS 3.6 LTS's bignum core (bignum_core.c), rewritten for
 * fixed-size static buffers and no heap. (Until 2026 it followed Mbed TLS 2.x, the
 * release line the xRSA paper measured in 2021, with a sliding window whose
 * multiplications depended on the exponent's bits; docs/software-rsa.md keeps those
 * figures.)
 *
 *   bn_mla       d += s * b over a fixed number of limbs (mbedtls_mpi_core_mla);
 *                on ARMv6-M the same 16-bit-halves inner step as Mbed TLS's Thumb-1
 *                MULADDC_CORE (bn_mul.h), or one of its C versions (BN_MULADDC)
 *   bn_montmul   Montgomery multiplication a*b/R mod N, R = 2^(32*nl), operand
 *                scanning with two bn_mla passes per limb (mbedtls_mpi_core_montmul)
 *   bn_exp_mod   fixed-window exponentiation over the exponent's whole length, the
 *                window from that length capped by BN_WINDOW_SIZE, each table entry
 *                picked by reading all of them (mbedtls_mpi_core_exp_mod)
 *
 * On the private-key path nothing branches on or indexes memory by a secret value.
 * Numbers are little-endian arrays of 32-bit limbs (limb 0 least significant);
 * each function states its lengths. A modulus N is odd, nl limbs, nl <= BN_MAX_LIMBS.
 * No function allocates: scratch space is passed in.
 */
#ifndef PKASIM_BN_H
#define PKASIM_BN_H

#include <stddef.h>
#include <stdint.h>

typedef uint32_t bn_uint;               /* one limb */

#define BN_LIMB_BITS 32u

/* The longest modulus: 2048 bits, a prime of an RSA-4096 key (CRT). */
#define BN_MAX_LIMBS 64u

/*
 * Largest window, as MBEDTLS_MPI_WINDOW_SIZE (1..6). bn_exp_mod picks w from the
 * exponent's whole length (4 nl bytes) by Mbed TLS 3.6's rule for this cap
 * (exp_mod_get_window_size: with 5, w = 5 above 239 bits, 4 above 79, else 1; so 5
 * for both RSA-2048 and RSA-4096 CRT exponents). The fixed window's table holds all
 * 2^w numbers W[0..2^w) of BN_MAX_LIMBS limbs: w = 5 is 32 x 256 B = 8 KiB of the
 * 16 KiB SRAM, the same as Mbed TLS 2.x's sliding-window table of w = 6 (W[32..63])
 * it replaces; w = 6 would need 16 KiB. docs/software-rsa.md has the budget.
 */
#ifndef BN_WINDOW_SIZE
#define BN_WINDOW_SIZE 5
#endif
#if BN_WINDOW_SIZE < 1 || BN_WINDOW_SIZE > 6
#error "BN_WINDOW_SIZE must be 1..6 (as MBEDTLS_MPI_WINDOW_SIZE)"
#endif
#define BN_WTAB_ENTRIES (1u << BN_WINDOW_SIZE)

/*
 * Which multiply-accumulate inner step bn_mla runs, as Mbed TLS's bn_mul.h picks
 * its MULADDC_CORE (all three are built and callable; see bn.c):
 *   BN_MULADDC_ASM  the Thumb-1 assembly (Mbed TLS with MBEDTLS_HAVE_ASM, its
 *                   default, built by GCC or clang for ARMv6-M): the default here
 *   BN_MULADDC_C16  portable C on 16-bit halves ("C, generic")
 *   BN_MULADDC_C64  portable C on a 64-bit product ("C, longlong": no GNU asm,
 *                   e.g. armcc 5, or MBEDTLS_HAVE_ASM off)
 * Choose with CFLAGS='-O2 -g -DBN_MULADDC=2' for instance; docs/software-rsa.md
 * gives the cost of each.
 */
#define BN_MULADDC_ASM 0
#define BN_MULADDC_C16 1
#define BN_MULADDC_C64 2
#ifndef BN_MULADDC
#if defined(__thumb__) && !defined(__thumb2__)
#define BN_MULADDC BN_MULADDC_ASM
#else
#define BN_MULADDC BN_MULADDC_C16
#endif
#endif
#if BN_MULADDC == BN_MULADDC_ASM && !(defined(__thumb__) && !defined(__thumb2__))
#error "BN_MULADDC_ASM is ARMv6-M (Thumb-1) assembly"
#endif

/* Scratch of one Montgomery multiplication: 2*nl + 2 limbs (Mbed TLS's T). */
#define BN_MONT_SCRATCH(nl) (2u * (nl) + 2u)

/* Working storage of bn_exp_mod (Mbed TLS allocates these on the heap). */
typedef struct {
    bn_uint w[BN_WTAB_ENTRIES][BN_MAX_LIMBS];   /* W[i] = A^i R mod N, i < 2^w */
    bn_uint sel[BN_MAX_LIMBS];                  /* the entry a window selected */
    bn_uint t[BN_MONT_SCRATCH(BN_MAX_LIMBS)];   /* montmul scratch */
} bn_exp_ws;

/*
 * x, with the compiler made to forget what it knows of it (Mbed TLS's
 * mbedtls_ct_compiler_opaque): a mask derived from a comparison is known to be 0 or
 * all ones, and without this the compiler turns `b & mask` back into a branch.
 */
static inline bn_uint bn_ct_opaque(bn_uint x)
{
    __asm__ volatile("" : "+r"(x));
    return x;
}

/* ---- limb vectors --------------------------------------------------------- */

/*
 * d[0..n) += s[0..n) * b; returns the carry out of d[n-1] (Mbed TLS's MULADDC loops).
 * bn_mla calls the one BN_MULADDC picks; all builds are kept callable for the tests.
 */
bn_uint bn_muladdc_c(size_t n, const bn_uint *s, bn_uint *d, bn_uint b);     /* C, 16-bit halves */
bn_uint bn_muladdc_ll(size_t n, const bn_uint *s, bn_uint *d, bn_uint b);    /* C, 64-bit product */
#if defined(__thumb__) && !defined(__thumb2__)
bn_uint bn_muladdc_thumb(size_t n, const bn_uint *s, bn_uint *d, bn_uint b); /* ARMv6-M asm */
#endif

/* d[0..n) += c, over all n limbs whatever c; returns the carry out. */
bn_uint bn_carry(bn_uint *d, size_t n, bn_uint c);

/*
 * d[0..dl) += s[0..sl) * b, sl <= dl, the carry taken through all of d whatever
 * the values (mbedtls_mpi_core_mla); returns the carry out of d[dl-1].
 */
bn_uint bn_mla(bn_uint *d, size_t dl, const bn_uint *s, size_t sl, bn_uint b);

/* x = 0; dst = src (n limbs; dst may equal src). */
void bn_zero(bn_uint *x, size_t n);
void bn_copy(bn_uint *dst, const bn_uint *src, size_t n);

/* r = a + b, n limbs each; returns the carry out. r may alias a or b. */
bn_uint bn_add(bn_uint *r, const bn_uint *a, const bn_uint *b, size_t n);
/* r = a - b, n limbs each; returns the borrow out. r may alias a or b. */
bn_uint bn_sub(bn_uint *r, const bn_uint *a, const bn_uint *b, size_t n);
/* r = a + (b & mask), r = a - (b & mask): mask all ones or zero (conditional
 * add and subtract without a branch). */
bn_uint bn_add_masked(bn_uint *r, const bn_uint *a, const bn_uint *b, size_t n, bn_uint mask);
bn_uint bn_sub_masked(bn_uint *r, const bn_uint *a, const bn_uint *b, size_t n, bn_uint mask);
/*
 * x (nl limbs, plus a small top limb) -= n when x + top R >= n, decided by a mask
 * from a full-length borrow, never a branch; returns the new top.
 */
bn_uint bn_csub(bn_uint *x, bn_uint top, const bn_uint *n, size_t nl);

/* r (an + bn limbs) = a * b; r must not alias a or b (mbedtls_mpi_core_mul). */
void bn_mul(bn_uint *r, const bn_uint *a, size_t an, const bn_uint *b, size_t bn);

/* Big-endian bytes <-> limbs: x (nl limbs) = buf[0..len), or buf = x (len bytes). */
void bn_from_be(bn_uint *x, size_t nl, const uint8_t *buf, size_t len);
void bn_to_be(uint8_t *buf, size_t len, const bn_uint *x, size_t nl);

/* ---- Montgomery arithmetic modulo an odd N of nl limbs, R = 2^(32*nl) -------- */

/* -N^-1 mod 2^32 from N's low limb (mpi_montg_init). */
bn_uint bn_mont_init(bn_uint n0);

/*
 * a = a * b * R^-1 mod N (mpi_montmul). a, b < R with a*b < R*N (so a < N or
 * b < N suffices); the result is fully reduced (< N). a may equal b (squaring);
 * t: BN_MONT_SCRATCH(nl) limbs, not aliasing the others.
 */
void bn_montmul(bn_uint *a, const bn_uint *b, const bn_uint *n, size_t nl, bn_uint mm, bn_uint *t);

/* a = a * R^-1 mod N, a < R (mpi_montred: a montmul by 1). */
void bn_montred(bn_uint *a, const bn_uint *n, size_t nl, bn_uint mm, bn_uint *t);

/*
 * r = x mod N for a wide x of 2*nl limbs held in t[0..2nl) (t is
 * BN_MONT_SCRATCH(nl) limbs and is overwritten): Montgomery reduction of x
 * (x R^-1 mod N) then a montmul by rr = R^2 mod N. Stands in for Mbed TLS's
 * mbedtls_mpi_mod_mpi (long division) where the RSA code reduces a number.
 * N >= R/2 (an RSA prime): two masked subtractions follow, always both.
 */
void bn_mod_wide(bn_uint *r, bn_uint *t, const bn_uint *n, size_t nl, bn_uint mm, const bn_uint *rr);

/* rr = R^2 mod N for R/2 <= N < R, by 32 nl doublings from R - N, each with a
 * masked subtraction (Mbed TLS: a shift and a long division). */
void bn_rr(bn_uint *rr, const bn_uint *n, size_t nl);

/*
 * x = a^e mod N (mbedtls_mpi_core_exp_mod): a < N (nl limbs), e big-endian bytes
 * e[0..elen), rr = R^2 mod N. x must not alias a, rr or ws. The same operations
 * for every a, e and N of these lengths: 2^w table montmuls, 8 elen squarings,
 * ceil(8 elen / w) multiplications, one reduction.
 */
void bn_exp_mod(bn_uint *x, const bn_uint *a, const uint8_t *e, size_t elen,
                const bn_uint *n, size_t nl, const bn_uint *rr, bn_exp_ws *ws);

/* Window size bn_exp_mod uses for an exponent of ebits bits (Mbed TLS 3.6's rule, capped). */
unsigned bn_window_size(size_t ebits);

/* Montgomery multiplications made by bn_exp_mod calls since the last reset (a count
 * for the docs and tests; the increments cost a few cycles per multiplication). */
extern uint32_t bn_montmul_count;

/* ---- RSA on this bignum (rsa_soft.c) -------------------------------------------- */

#include "rsa.h"

/*
 * The contract of rsa.h's rsa_private and rsa_get_public_key (key layout, return
 * values, in may equal out, any input below 2^nbits), in software: CRT, q half
 * first, each half a bn_exp_mod. Named apart so that an image can link both this
 * and the PKA implementation. Accepts any nbits that is a multiple of 64 from 128 to
 * 4096 (the PKA firmware: 2048 and 4096), with primes of exactly nbits/2 bits.
 */
int soft_rsa_private(const rsa_key_t *key, const uint8_t *in, uint8_t *out);
int soft_rsa_get_public_key(rsa_key_t *key, uint8_t *n);

/* A prime is even or not exactly nbits/2 bits long (the PKA firmware's codes are -1..-5). */
#define SOFT_RSA_ERR_KEY (-6)

/*
 * One bignum operation, for tests (tests/test_rsa_soft.py): in = {op, nl, a[2 nl],
 * b[nl], n[nl], e[nl]} in words, e as 4 nl big-endian bytes, n odd, 1 <= nl <= 16;
 * out = 2 nl + 2 words, the result from word 0. Returns 0, or -1 for a bad op or nl.
 */
int soft_rsa_bn_call(const uint32_t *in, uint32_t *out);

#define BN_PROBE_MONTMUL    0   /* out = a b R^-1 mod n (a, b: nl limbs) */
#define BN_PROBE_EXP_MOD    1   /* out = a^e mod n (a < n: nl limbs) */
#define BN_PROBE_MOD_WIDE   2   /* out = a mod n (a: 2 nl limbs, n >= R/2) */
#define BN_PROBE_RR         3   /* out = R^2 mod n */
#define BN_PROBE_MUL        4   /* out = a b (2 nl limbs) */
#define BN_PROBE_MUL_HLP    5   /* out = a + b * n[0] (a: 2 nl limbs) with bn_mla */
#define BN_PROBE_MUL_HLP_C  6   /* the same with the portable C bn_muladdc_c */
#define BN_PROBE_MONT_INIT  7   /* out[0] = -n^-1 mod 2^32 */
#define BN_PROBE_MUL_HLP_LL 8   /* as BN_PROBE_MUL_HLP with bn_muladdc_ll */

#endif
