/*
 * Software bignum for the RSA baseline (docs/software-rsa.md): the algorithms of
 * Mbed TLS's bignum.c (2.x, the release line the xRSA paper measured in 2021),
 * rewritten for fixed-size static buffers and no heap.
 *
 *   bn_mul_hlp   d += s * b over a limb vector, carry propagated (mpi_mul_hlp);
 *                on ARMv6-M the same 16-bit-halves inner step as Mbed TLS's Thumb-1
 *                MULADDC_CORE (bn_mul.h), or one of its C versions (BN_MULADDC)
 *   bn_montmul   Montgomery multiplication a*b/R mod N, R = 2^(32*nl), operand
 *                scanning with two bn_mul_hlp passes per limb (mpi_montmul)
 *   bn_exp_mod   sliding-window exponentiation in the Montgomery domain, window
 *                chosen from the exponent's length and capped by BN_WINDOW_SIZE
 *                (mbedtls_mpi_exp_mod and MBEDTLS_MPI_WINDOW_SIZE)
 *
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
 * Largest sliding window, as MBEDTLS_MPI_WINDOW_SIZE (Mbed TLS default 6; 1..6).
 * bn_exp_mod picks w from the exponent length like Mbed TLS (6 above 671 bits, so
 * 6 for both RSA-2048 and RSA-4096 CRT exponents) and caps it here. The table holds
 * 2^(w-1) numbers of BN_MAX_LIMBS limbs: w = 6 is 32 x 256 B = 8 KiB of the 16 KiB
 * SRAM. It fits with the rest of the RSA-4096 working set (10.0 KiB of .bss in all,
 * 2.8 KiB of key/message/signature buffers in .data) and leaves 3.2 KiB for a stack
 * that needs 0.4 KiB; a window of 5 would free 4 KiB for 1.4% more time, 4 another
 * 2 KiB for 3.8%. docs/software-rsa.md has the budget.
 */
#ifndef BN_WINDOW_SIZE
#define BN_WINDOW_SIZE 6
#endif
#if BN_WINDOW_SIZE < 1 || BN_WINDOW_SIZE > 6
#error "BN_WINDOW_SIZE must be 1..6 (as MBEDTLS_MPI_WINDOW_SIZE)"
#endif
#define BN_WTAB_ENTRIES (1u << (BN_WINDOW_SIZE - 1))

/*
 * Which multiply-accumulate inner step bn_mul_hlp runs, as Mbed TLS's bn_mul.h picks
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
    bn_uint w[BN_WTAB_ENTRIES][BN_MAX_LIMBS];   /* W[2^(w-1)] .. W[2^w - 1] */
    bn_uint w1[BN_MAX_LIMBS];                   /* W[1] = A R mod N */
    bn_uint t[BN_MONT_SCRATCH(BN_MAX_LIMBS)];   /* montmul scratch */
} bn_exp_ws;

/* ---- limb vectors --------------------------------------------------------- */

/*
 * d[0..n) += s[0..n) * b, then the carry is added into d[n], d[n+1], ... until it
 * dies out (the caller guarantees room, as in Mbed TLS). bn_mul_hlp is the one the
 * library uses; both builds are kept callable for the tests.
 */
void bn_mul_hlp(size_t n, const bn_uint *s, bn_uint *d, bn_uint b);
void bn_mul_hlp_c(size_t n, const bn_uint *s, bn_uint *d, bn_uint b);     /* C, 16-bit halves */
void bn_mul_hlp_ll(size_t n, const bn_uint *s, bn_uint *d, bn_uint b);    /* C, 64-bit product */
#if defined(__thumb__) && !defined(__thumb2__)
void bn_mul_hlp_thumb(size_t n, const bn_uint *s, bn_uint *d, bn_uint b); /* ARMv6-M asm */
#endif

/* x = 0; dst = src (n limbs; dst may equal src). */
void bn_zero(bn_uint *x, size_t n);
void bn_copy(bn_uint *dst, const bn_uint *src, size_t n);

/* r = a + b, n limbs each; returns the carry out. r may alias a or b. */
bn_uint bn_add(bn_uint *r, const bn_uint *a, const bn_uint *b, size_t n);
/* r = a - b, n limbs each; returns the borrow out. r may alias a or b. */
bn_uint bn_sub(bn_uint *r, const bn_uint *a, const bn_uint *b, size_t n);
/* -1, 0, 1 as a <, ==, > b (n limbs each). */
int bn_cmp(const bn_uint *a, const bn_uint *b, size_t n);
/* Bits in a (n limbs): 0 for zero. */
size_t bn_bitlen(const bn_uint *a, size_t n);

/* r (an + bn limbs) = a * b; r must not alias a or b (mbedtls_mpi_mul_mpi). */
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
 * Any odd N; when N >= R/2 (an RSA prime) at most two subtractions follow.
 */
void bn_mod_wide(bn_uint *r, bn_uint *t, const bn_uint *n, size_t nl, bn_uint mm, const bn_uint *rr);

/* rr = R^2 mod N, by doubling (Mbed TLS: a shift and a long division). */
void bn_rr(bn_uint *rr, const bn_uint *n, size_t nl);

/*
 * x = a^e mod N (mbedtls_mpi_exp_mod): a < N (nl limbs), e big-endian bytes
 * e[0..elen), rr = R^2 mod N. x must not alias a, rr or ws.
 */
void bn_exp_mod(bn_uint *x, const bn_uint *a, const uint8_t *e, size_t elen,
                const bn_uint *n, size_t nl, const bn_uint *rr, bn_exp_ws *ws);

/* Window size bn_exp_mod uses for an exponent of ebits bits (Mbed TLS's rule, capped). */
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
#define BN_PROBE_MUL_HLP    5   /* out = a + b * n[0] (a: 2 nl limbs) with bn_mul_hlp */
#define BN_PROBE_MUL_HLP_C  6   /* the same with the portable C bn_mul_hlp_c */
#define BN_PROBE_MONT_INIT  7   /* out[0] = -n^-1 mod 2^32 */
#define BN_PROBE_MUL_HLP_LL 8   /* as BN_PROBE_MUL_HLP with bn_mul_hlp_ll */

#endif
