/*
 * RSA-2048 and RSA-4096 private-key operations on a 2048-bit Montgomery multiplier,
 * by the xRSA method (docs/xrsa.md; the paper's Algorithms 1-3, Table II and
 * equation 3). tests/xrsa_model.py is the same sequence of PKA operations in Python.
 *
 * Notation: (x) is MONTMUL, a (x) b = a*b*R^-1 mod p with R = 2^(32*L); (+) and (-)
 * are MODADD and MODSUB. L = nbits/64 words per prime: 32 for RSA-2048, 64 for
 * RSA-4096. Operands are in PKA RAM at the word offsets of rsa_layout.h.
 *
 * Two builds of this file (firmware/Makefile):
 *   RSA_OPTIMIZED=0  the paper variant (xrsa.elf): Algorithms 1-3 as printed, with
 *                    Algorithm 2 read as s_i = s_(i-1) (x) s_1 (the erratum of issue #3)
 *                    and N = p*q computed for the final subtraction of equation 3;
 *   RSA_OPTIMIZED=1  the optimized variant (xrsa_opt.elf): R^2 by squaring the
 *                    Montgomery form of 2, and the other savings of docs/xrsa.md.
 *
 * Each is built a second time with RSA_STRICT=1 (rsa_strict.o, rsa_opt_strict.o) for a
 * PKA with strict_operands (docs/pka.md: every operand of a modular operation below
 * its modulus): R mod p = 0 - p by SUB instead of (R - 1) (+) 1, and m2 and S_q, which
 * may exceed p, reduced by one subtraction of p chosen by the borrow. That build
 * defines rsa_private_strict only. The lenient build changes on its error path alone:
 * when the PKA refuses an operation of the first exponentiation (OPERRF), rsa_private
 * starts over in rsa_private_strict. On a strict PKA that is always the first MODADD,
 * (R - 1) (+) 1, at the same point for every key; any other refusal there (an even or
 * zero q) is a bad key, which the strict build refuses again (docs/xrsa.md, "A strict
 * PKA").
 *
 * On a PKA whose multiplier takes 4096-bit operands (MAXLEN >= 128, e.g.
 * configs/native4096.yaml) RSA-4096's step 4 and equation 3 use it natively: h*q and
 * p*q are one LEN-128 MONTMUL each instead of Table II (docs/xrsa.md, "A chip with a
 * native 4096-bit multiplier"). The exponentiations stay at LEN 64 on any chip.
 *
 * Constant time: the sequence of PKA operations, their lengths and the CPU's
 * instructions depend on nbits (and the chip's MAXLEN and RAMSIZE) only. The exponent bit picks the result pointer of
 * Algorithm 3's multiplication (y or the dummy) with a mask, not a branch; the
 * PKA's busy time depends on the operation and LEN only (docs/pka.md).
 */
#include "rsa.h"
#include "pka.h"
#include "rsa_layout.h"

#ifndef RSA_OPTIMIZED
#define RSA_OPTIMIZED 0
#endif
#ifndef RSA_STRICT
#define RSA_STRICT 0
#endif

#if RSA_STRICT
/* The strict build's static functions under their own names: an image links both
 * builds, and profiles and the regress baselines name functions by symbol. */
#define add_low strict_add_low
#define crt_exp strict_crt_exp
#define fetch_select strict_fetch_select
#define modadd strict_modadd
#define mont strict_mont
#define mont_r2 strict_mont_r2
#define native4096 strict_native4096
#define native_load strict_native_load
#define native_mul strict_native_mul
#define native_recombine strict_native_recombine
#define native_setup strict_native_setup
#define prime_words strict_prime_words
#define split_copy strict_split_copy
#define split_load strict_split_load
#define wide_mul strict_wide_mul
#define wide_setup strict_wide_setup
/* The strict build's entry point (the lenient build's rsa_private calls it). */
int rsa_private_strict(const rsa_key_t *key, const uint8_t *in, uint8_t *out);
#elif RSA_OPTIMIZED
const char rsa_variant[] = "optimized";
#else
const char rsa_variant[] = "paper";
#endif
#if !RSA_STRICT
int rsa_private_strict(const rsa_key_t *key, const uint8_t *in, uint8_t *out);
#endif

/* The layout fits in PKA RAM and regions live together do not overlap. */
LAY_CHECK_FITS;
LAY_CHECK_EXP;
LAY_CHECK_M;
LAY_CHECK_NAT;
LAY_CHECK_RED;
_Static_assert(LAY_RAM_WORDS <= PKA_RAM_WORDS, "the RSA layout needs more PKA RAM than the chip has");
_Static_assert(LAY_P_LEN >= PKA_MAX_WORDS && LAY_MOD1_LEN == 64, "a slot holds a 2048-bit operand");

#define WIDE 64u            /* LEN of the products modulo 2^2048 - 1 */
#define HALF 32u            /* 1024 bits */
#define NATIVE 128u         /* LEN of the products modulo 2^4096 - 1 on a 4096-bit multiplier */

_Static_assert(LAY_NAT_MOD_LEN == NATIVE && LAY_NAT_X_LEN == NATIVE && LAY_NAT_Y_LEN == NATIVE &&
               LAY_NAT_ACC_LEN == NATIVE && LAY_NAT_N_LEN == NATIVE && LAY_Y_LEN == WIDE,
               "native regions hold 4096-bit operands");

#define TRY(call) do { int rc_ = (call); if (rc_ < 0) return rc_; } while (0)

static inline int mont(uint32_t L, uint32_t a, uint32_t b, uint32_t n, uint32_t r)
{
    return pka_exec(PKA_MONTMUL, L, a, b, n, r);
}

static inline int modadd(uint32_t L, uint32_t a, uint32_t b, uint32_t r)
{
    return pka_exec(PKA_MODADD, L, a, b, LAY_P, r);
}

#if RSA_STRICT
/* Region a if borrow = 1, b if borrow = 0: arithmetic, no branch. The mask goes
 * through an empty asm: otherwise clang sees a 0-or-1 borrow and branches on it. */
static inline uint32_t pick(uint32_t borrow, uint32_t a, uint32_t b)
{
    uint32_t mask = 0u - borrow;

    __asm__ volatile("" : "+r"(mask));
    return b ^ ((a ^ b) & mask);
}

/* x mod p for x < 2p at region x: x itself or x - p (into RED), by the borrow of x - p. */
static int reduce_once(uint32_t L, uint32_t x, uint32_t *out)
{
    TRY(pka_exec(PKA_SUB, L, x, LAY_P, 0, LAY_RED));
    *out = pick(pka_carry(), x, LAY_RED);
    return RSA_OK;
}
#endif

/* Words per prime (the exponentiation's LEN), or 0 for an unsupported size. */
static uint32_t prime_words(uint16_t nbits)
{
    if (nbits == 2048)
        return 32;
    if (nbits == 4096)
        return 64;
    return 0;
}

/*
 * Algorithm 2: R^2 mod p into RR (p in P, 1 in ONE).
 *   1: s = (R-1) (+) 1        = R mod p
 *   2: s_1 = s (+) s          = 2R mod p
 *   3-5: s_i = s_(i-1) (x) s_1, i = 2..n   = 2^i R mod p      (n - 1 MONTMULs)
 * As printed (s_(i-1) (x) s_(i-1)) the loop would square and give 2^(2^(n-1)) R;
 * multiplying by s_1 each time adds one to the exponent of 2, as the paper's own
 * correctness argument (s_i = 2^i 2^n mod p) says.
 * The optimized variant squares instead: (2^k R) (x) (2^k R) = 2^(2k) R, so from
 * s_1 = 2^1 R it reaches 2^n R = R^2 after log2(n) squarings (11 for n = 2048);
 * it also leaves s = R mod p (the Montgomery form of 1, Algorithm 3's initial y)
 * in Y.
 * Step 1 on a strict PKA: R - 1 >= p is no operand for MODADD there. As p > R/2,
 * R mod p = R - p, which SUB makes from 0 - p (wrapping modulo R).
 */
#if RSA_STRICT
#define R_MOD_P(dst) TRY(pka_exec(PKA_SUB, L, LAY_T, LAY_P, 0, (dst)))
#else
#define R_MOD_P(dst) TRY(modadd(L, LAY_T, LAY_ONE, (dst)))
#endif

static int mont_r2(uint32_t L)
{
    uint32_t n = 32u * L;

#if RSA_STRICT
    pka_fill(LAY_T, 0, L);                              /* 0 */
#else
    pka_fill(LAY_T, 0xFFFFFFFFu, L);                    /* R - 1 */
#endif
#if !RSA_OPTIMIZED
    R_MOD_P(LAY_RR);                                    /* s = R mod p */
    TRY(modadd(L, LAY_RR, LAY_RR, LAY_T));              /* s_1 = 2R mod p */
    TRY(mont(L, LAY_T, LAY_T, LAY_P, LAY_RR));          /* s_2 */
    for (uint32_t i = 3; i <= n; i++)                   /* (LEN and N set by mont) */
        TRY(pka_run(PKA_MONTMUL, LAY_RR, LAY_T, LAY_RR)); /* s_i = s_(i-1) (x) s_1 */
#else
    R_MOD_P(LAY_Y);                                     /* R mod p, kept as y */
    TRY(modadd(L, LAY_Y, LAY_Y, LAY_RR));               /* 2R mod p */
    for (uint32_t k = 1; k < n; k <<= 1)
        TRY(mont(L, LAY_RR, LAY_RR, LAY_P, LAY_RR));    /* 2^k R -> 2^(2k) R */
#endif
    return RSA_OK;
}

/*
 * S = m^d mod prime (Algorithm 1 steps 1 and 2): R^2 (Algorithm 2), m mod prime
 * (equation 2), then Algorithm 3. The result y ends in Y in Montgomery form;
 * `to` != 0 converts it (y (x) 1) into region `to`.
 */
static int crt_exp(uint32_t L, const uint8_t *prime, const uint8_t *d, const uint8_t *m, uint32_t to)
{
    uint32_t bytes = 4u * L;
    uint32_t bits = 32u * L;

    pka_load_be(LAY_P, prime, L);
    TRY(mont_r2(L));

    /* Equation (2): m = m1 R + m2; m mod p = (m1 (x) R^2) (+) m2 (m2 may exceed p). */
    pka_load_be(LAY_T, m, L);                           /* m1: the high half */
    pka_load_be(LAY_DUM, m + bytes, L);                 /* m2: the low half */
    TRY(mont(L, LAY_T, LAY_RR, LAY_P, LAY_T));
#if RSA_STRICT
    uint32_t m2;
    TRY(reduce_once(L, LAY_DUM, &m2));                  /* m2 < R < 2p */
    TRY(modadd(L, LAY_T, m2, LAY_T));
#else
    TRY(modadd(L, LAY_T, LAY_DUM, LAY_T));
#endif

    /* Algorithm 3. */
#if !RSA_OPTIMIZED
    TRY(mont(L, LAY_ONE, LAY_RR, LAY_P, LAY_Y));        /* 1: y = 1 (x) R^2 */
#endif                                                  /*    (optimized: R mod p from mont_r2) */
    TRY(mont(L, LAY_T, LAY_RR, LAY_P, LAY_T));          /* 2: t = m (x) R^2 */
    pka_config(L, LAY_P);                               /* LEN and N stay for the loop */
    for (uint32_t i = 0; i < bits; i++) {               /* 3: all bits of d, LSB first */
        uint32_t bit = (d[bytes - 1u - (i >> 3)] >> (i & 7u)) & 1u;
        uint32_t keep = bit - 1u;                       /* 0 if the bit is 1, all ones if 0 */
        uint32_t dst = LAY_Y ^ ((LAY_Y ^ LAY_DUM) & keep);
        TRY(pka_run(PKA_MONTMUL, LAY_Y, LAY_T, dst));   /* 5: y = y (x) t, 7: dummy = y (x) t */
#if RSA_OPTIMIZED
        if (i == bits - 1u)                             /* the last square is never used */
            break;
#endif
        TRY(pka_run(PKA_MONTMUL, LAY_T, LAY_T, LAY_T)); /* 9: t = t (x) t */
    }
    if (to)
        TRY(mont(L, LAY_Y, LAY_ONE, LAY_P, to));        /* 12: y (x) 1 */
    return RSA_OK;
}

/* [LO(x), 0, HI(x), 0] (RSA-4096) or [x, 0] (RSA-2048) at dst, x from PKA RAM. */
static void split_copy(uint32_t L, uint32_t dst, uint32_t src)
{
    if (L == 64u) {
        pka_copy(dst, src, HALF);
        pka_fill(dst + HALF, 0, HALF);
        pka_copy(dst + 2u * HALF, src + HALF, HALF);
        pka_fill(dst + 3u * HALF, 0, HALF);
    } else {
        pka_copy(dst, src, HALF);
        pka_fill(dst + HALF, 0, HALF);
    }
}

/* The same from a big-endian key field of 4L bytes. */
static void split_load(uint32_t L, uint32_t dst, const uint8_t *be)
{
    if (L == 64u) {
        pka_load_be(dst, be + 4u * HALF, HALF);         /* LO: the last 128 bytes */
        pka_fill(dst + HALF, 0, HALF);
        pka_load_be(dst + 2u * HALF, be, HALF);         /* HI: the first 128 bytes */
        pka_fill(dst + 3u * HALF, 0, HALF);
    } else {
        pka_load_be(dst, be, HALF);
        pka_fill(dst + HALF, 0, HALF);
    }
}

/* MOD1 = 2^2048 - 1 and a zero carry word. */
static void wide_setup(void)
{
    pka_fill(LAY_MOD1, 0xFFFFFFFFu, WIDE);
    pka_fill(LAY_CW, 0, WIDE);
}

/*
 * acc = x * y, x and y split in XH and YQ. With N = 2^2048 - 1, R = 2^2048 = 1 mod N,
 * so a (x) b = a*b mod N = a*b for a, b < 2^1024 (a*b < N): the multiplier makes
 * plain 1024x1024-bit products (Table II). RSA-4096: four products and three
 * additions with carries; RSA-2048: one product (x, y < 2^1024).
 */
static int wide_mul(uint32_t L, uint32_t acc)
{
    const uint32_t x2 = LAY_XH, x1 = LAY_XH + 2u * HALF;
    const uint32_t y2 = LAY_YQ, y1 = LAY_YQ + 2u * HALF;

    TRY(mont(WIDE, x2, y2, LAY_MOD1, acc));                 /* bits 0..2047 */
    if (L != 64u)
        return RSA_OK;
    TRY(mont(WIDE, x1, y1, LAY_MOD1, acc + WIDE));          /* bits 2048..4095 */
    TRY(mont(WIDE, x1, y2, LAY_MOD1, LAY_T2));
    TRY(mont(WIDE, x2, y1, LAY_MOD1, LAY_T3));
    TRY(pka_exec(PKA_ADD, WIDE, LAY_T2, LAY_T3, 0, LAY_T2));   /* x1 y2 + x2 y1 */
    uint32_t c = pka_carry();                                  /* weight 2^3072 */
    TRY(pka_exec(PKA_ADD, WIDE, acc + HALF, LAY_T2, 0, acc + HALF)); /* bits 1024..3071 */
    c += pka_carry();
    pka_write(LAY_CW, c);
    TRY(pka_exec(PKA_ADD, HALF, acc + 3u * HALF, LAY_CW, 0, acc + 3u * HALF));
    pka_write(LAY_CW, 0);
    return pka_carry() ? RSA_ERR_CARRY : RSA_OK;
}

/* acc (2L words) += the L-word value at src, with the carry through the top half. */
static int add_low(uint32_t L, uint32_t acc, uint32_t src)
{
    TRY(pka_exec(PKA_ADD, L, acc, src, 0, acc));
    pka_write(LAY_CW, pka_carry());
    TRY(pka_exec(PKA_ADD, L, acc + L, LAY_CW, 0, acc + L));
    pka_write(LAY_CW, 0);
    return pka_carry() ? RSA_ERR_CARRY : RSA_OK;
}

/*
 * Whether RSA-4096 can use the multiplier natively: it takes LEN 128 (MAXLEN) and
 * PKA RAM holds the native layout (RAMSIZE). Depends on the chip only, never on the key.
 */
static int native4096(void)
{
    return pka_max_words() >= NATIVE && pka_ram_words() >= LAY_NAT_RAM_WORDS;
}

/* A 2048-bit key field (big-endian, 256 bytes) zero-extended to 128 words at dst. */
static void native_load(uint32_t dst, const uint8_t *be)
{
    pka_load_be(dst, be, WIDE);
    pka_fill(dst + WIDE, 0, WIDE);
}

/* NAT_MOD = 2^4096 - 1 and q in NAT_Y, for x (x) q with any x < 2^2048 in NAT_X. */
static void native_setup(const uint8_t *q)
{
    pka_fill(LAY_NAT_MOD, 0xFFFFFFFFu, NATIVE);
    native_load(LAY_NAT_Y, q);
}

/*
 * dst = x * q, x in NAT_X and q in NAT_Y (both < 2^2048), as ONE MONTMUL at LEN 128:
 * with N = 2^4096 - 1, R = 2^4096 = 1 mod N, so a (x) b = a*b mod N = a*b, as
 * a*b <= (2^2048 - 1)^2 < N. The same trick as Table II's, without the split.
 */
static int native_mul(uint32_t dst)
{
    return mont(NATIVE, LAY_NAT_X, LAY_NAT_Y, LAY_NAT_MOD, dst);
}

#if !RSA_OPTIMIZED
/* Equation (3)'s result to out (big-endian): M at m if borrow (M < N), else D at d.
 * Constant time: the borrow becomes a mask, both words are read every time. */
static inline __attribute__((always_inline)) void fetch_select(uint32_t m, uint32_t d, uint32_t borrow, uint8_t *out, uint32_t words)
{
    uint32_t take_m = 0u - borrow;              /* all ones: M < N, keep M */

    for (uint32_t i = 0; i < words; i++) {
        uint32_t w = (pka_read(m + i) & take_m) | (pka_read(d + i) & ~take_m);
        uint8_t *o = out + 4u * (words - 1u - i);
        o[0] = (uint8_t)(w >> 24);
        o[1] = (uint8_t)(w >> 16);
        o[2] = (uint8_t)(w >> 8);
        o[3] = (uint8_t)w;
    }
}
#endif

/*
 * Step 4 and equation (3) of RSA-4096 on a 4096-bit multiplier, from h in Y and S_q
 * in SQ: M = h*q + S_q is one LEN-128 MONTMUL and one LEN-128 ADD (no carries to
 * propagate: h*q + S_q < N < 2^4096). The paper variant computes N = p*q the same
 * way (one MONTMUL) and D = M - N with one LEN-128 SUB, whose borrow picks M or D.
 */
static int native_recombine(const rsa_key_t *key, uint8_t *out)
{
    pka_copy(LAY_NAT_X, LAY_Y, WIDE);                           /* h, zero-extended */
    pka_fill(LAY_NAT_X + WIDE, 0, WIDE);
    native_setup(key->q);
    TRY(native_mul(LAY_NAT_ACC));                               /* h*q */
    pka_fill(LAY_NAT_SQ + WIDE, 0, WIDE);                       /* S_q, zero-extended */
    TRY(pka_exec(PKA_ADD, NATIVE, LAY_NAT_ACC, LAY_NAT_SQ, 0, LAY_NAT_ACC));
    if (pka_carry())
        return RSA_ERR_CARRY;
#if !RSA_OPTIMIZED
    native_load(LAY_NAT_X, key->p);
    TRY(native_mul(LAY_NAT_N));                                 /* N = p*q */
    TRY(pka_exec(PKA_SUB, NATIVE, LAY_NAT_ACC, LAY_NAT_N, 0, LAY_NAT_X));  /* D = M - N */
    fetch_select(LAY_NAT_ACC, LAY_NAT_X, pka_carry(), out, NATIVE);
#else
    pka_fetch_be(LAY_NAT_ACC, out, NATIVE);                     /* M < N always */
#endif
    return RSA_OK;
}

#if !RSA_STRICT
int rsa_get_public_key(rsa_key_t *key, uint8_t *n)
{
    uint32_t L = prime_words(key->nbits);

    if (!L)
        return RSA_ERR_NBITS;
    pka_init();
    if (L == 64u && native4096()) {                             /* one LEN-128 product */
        native_load(LAY_NAT_X, key->p);
        native_setup(key->q);
        TRY(native_mul(LAY_NAT_N));
        pka_fetch_be(LAY_NAT_N, n, NATIVE);
        return RSA_OK;
    }
    wide_setup();
    split_load(L, LAY_XH, key->p);
    split_load(L, LAY_YQ, key->q);
    TRY(wide_mul(L, LAY_NACC));
    pka_fetch_be(LAY_NACC, n, 2u * L);
    return RSA_OK;
}
#endif

#if RSA_STRICT
int rsa_private_strict(const rsa_key_t *key, const uint8_t *in, uint8_t *out)
#else
int rsa_private(const rsa_key_t *key, const uint8_t *in, uint8_t *out)
#endif
{
    uint32_t L = prime_words(key->nbits);

    if (!L)
        return RSA_ERR_NBITS;
    pka_init();
    pka_fill(LAY_ONE, 0, L);
    pka_write(LAY_ONE, 1);

    /* Algorithm 1, step 2 first (section III-D: step 3 shares step 1's modulus). */
#if RSA_STRICT
    TRY(crt_exp(L, key->q, key->dq, in, LAY_SQ));              /* S_q, integer, in SQ */
#else
    int rc = crt_exp(L, key->q, key->dq, in, LAY_SQ);          /* S_q, integer, in SQ */
    if (rc < 0) {
        if (rc == PKA_ERR_OP)                                  /* a strict PKA? start over */
            return rsa_private_strict(key, in, out);
        return rc;
    }
#endif
#if !RSA_OPTIMIZED
    TRY(crt_exp(L, key->p, key->dp, in, LAY_Y));               /* S_p, integer, in Y */

    /* Step 3: h = qinv * (S_p - S_q) mod p: one MODSUB, four MONTMULs. */
#if RSA_STRICT
    uint32_t sq;
    TRY(reduce_once(L, LAY_SQ, &sq));                          /* S_q < q < 2p */
    TRY(pka_exec(PKA_MODSUB, L, LAY_Y, sq, LAY_P, LAY_DUM));
#else
    TRY(pka_exec(PKA_MODSUB, L, LAY_Y, LAY_SQ, LAY_P, LAY_DUM)); /* S_p (-) S_q */
#endif
    pka_load_be(LAY_T, key->qinv, L);
    TRY(mont(L, LAY_T, LAY_RR, LAY_P, LAY_T));                  /* qinv R */
    TRY(mont(L, LAY_DUM, LAY_RR, LAY_P, LAY_DUM));              /* (S_p - S_q) R */
    TRY(mont(L, LAY_T, LAY_DUM, LAY_P, LAY_Y));                 /* h R */
    TRY(mont(L, LAY_Y, LAY_ONE, LAY_P, LAY_Y));                 /* h */
#else
    TRY(crt_exp(L, key->p, key->dp, in, 0));                   /* S_p R mod p, in Y */

    /* Step 3 in the Montgomery domain: qinv (x) (S_p R - S_q R) = qinv (S_p - S_q). */
#if RSA_STRICT
    uint32_t sq;
    TRY(reduce_once(L, LAY_SQ, &sq));                          /* S_q < q < 2p */
    TRY(mont(L, sq, LAY_RR, LAY_P, LAY_DUM));                   /* S_q R mod p */
#else
    TRY(mont(L, LAY_SQ, LAY_RR, LAY_P, LAY_DUM));               /* S_q R mod p */
#endif
    TRY(pka_exec(PKA_MODSUB, L, LAY_Y, LAY_DUM, LAY_P, LAY_DUM));
    pka_load_be(LAY_T, key->qinv, L);
    TRY(mont(L, LAY_T, LAY_DUM, LAY_P, LAY_Y));                 /* h */
#endif

    /* Step 4 (and equation 3) natively on a 4096-bit multiplier, if the chip has one. */
    if (L == 64u && native4096())
        return native_recombine(key, out);

    /* Step 4: M = S_q + h*q, 2L words in ACC. */
    split_copy(L, LAY_XH, LAY_Y);
    wide_setup();
    split_load(L, LAY_YQ, key->q);
    TRY(wide_mul(L, LAY_ACC));
    TRY(add_low(L, LAY_ACC, LAY_SQ));

#if !RSA_OPTIMIZED
    /*
     * Equation (3): S = M - N if M >= N, else M. N = p*q is not part of the key, so it
     * is computed here as in rsa_get_public_key. D = M - N goes into XH; the final
     * borrow (M < N) picks M or D with a mask while the result is fetched.
     */
    split_load(L, LAY_XH, key->p);
    TRY(wide_mul(L, LAY_NACC));
    uint32_t borrow;
    if (L == 64u) {
        TRY(pka_exec(PKA_SUB, WIDE, LAY_ACC, LAY_NACC, 0, LAY_XH));
        pka_write(LAY_CW, pka_carry());
        TRY(pka_exec(PKA_SUB, WIDE, LAY_ACC + WIDE, LAY_NACC + WIDE, 0, LAY_XH + WIDE));
        borrow = pka_carry();
        TRY(pka_exec(PKA_SUB, WIDE, LAY_XH + WIDE, LAY_CW, 0, LAY_XH + WIDE));
        borrow |= pka_carry();
    } else {
        TRY(pka_exec(PKA_SUB, WIDE, LAY_ACC, LAY_NACC, 0, LAY_XH));
        borrow = pka_carry();
    }
    fetch_select(LAY_ACC, LAY_XH, borrow, out, 2u * L);
#else
    /*
     * No equation (3): S_q < q and h < p (the PKA's modular results are fully
     * reduced), so M = S_q + h q <= (q - 1) + (p - 1) q = N - 1 < N always.
     */
    pka_fetch_be(LAY_ACC, out, 2u * L);
#endif
    return RSA_OK;
}
