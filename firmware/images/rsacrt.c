/*
 * rsacrt: an RSA-2048 signature by the Chinese remainder theorem on the PKA, the RSA
 * example of `pkasim faults` (docs/faults.md). Built twice from this file:
 *
 *   rsacrt.elf          S = CRT(m^dp mod p, m^dq mod q), written out as it is: one
 *                       faulty half gives a signature S' with gcd(S'^e - m, N) = p or q
 *                       (the Bellcore attack: Boneh, DeMillo, Lipton 1997);
 *   rsacrt_checked.elf  (-DVERIFY_AFTER_SIGN=1) the classic countermeasure: S^e mod N is
 *                       computed on the PKA and compared with m before S leaves PKA RAM;
 *                       on a mismatch the output stays zero, "fault detected", exit 3.
 *
 * Output: "signature " + the 256 bytes in hex, exit 0 (2 if the PKA reported an error).
 * Symbols (all .data, pkasim run --load/--dump): rsa_input_key (rsa_key_t, src/rsa.h;
 * default the bench's RSA-2048 demo key, images/rsacrt_key.h), rsa_input_msg (256
 * bytes big-endian), rsa_output (the signature, 256 bytes).
 *
 * The steps, each its own function so that a fault window can name it:
 *   crt_half(p, dp)   S_p = m^dp mod p: R^2 by doubling and squaring, m mod p as
 *                     m1 R + m2 (m1 (x) R^2 (+) m2), then a square-and-multiply-always
 *                     exponentiation over every bit of dp (a dummy product for a 0 bit)
 *   crt_recombine()   Garner: h = qinv (S_p - S_q) mod p, S = S_q + h q (h q as one
 *                     MONTMUL modulo 2^2048 - 1, the xRSA paper's Table II trick)
 *   verify_signature() (checked build) N = p q, R^2 mod N, S^65537 mod N, compare with m
 * (x) is MONTMUL, a (x) b = a b R^-1 mod n with R = 2^(32 LEN); the PKA's modular
 * operations accept operands up to 2^(32 LEN) (the default chip, docs/pka.md).
 */
#include <stdint.h>
#include "pka.h"
#include "rsa.h"
#include "semihost.h"
#include "rsacrt_key.h"

#ifndef VERIFY_AFTER_SIGN
#define VERIFY_AFTER_SIGN 0
#endif

#define DATA(name) __attribute__((section(".data." #name), used, aligned(4)))
#define HALF 32u        /* words of p, q: LEN of the half exponentiations */
#define FULL 64u        /* words of N */
#define NBYTES 256u

DATA(rsa_input_key) rsa_key_t rsa_input_key = {
    .nbits = CRT_NBITS, .e = CRT_E, .p = CRT_P, .q = CRT_Q, .dp = CRT_DP, .dq = CRT_DQ, .qinv = CRT_QINV,
};
DATA(rsa_input_msg) uint8_t rsa_input_msg[NBYTES] = CRT_MSG;
DATA(rsa_output) uint8_t rsa_output[NBYTES];

/* PKA RAM, in words (768 in all). LEN 32: the halves; LEN 64: recombination, check. */
enum {
    P = 0, RR = 32, T = 64, Y = 96, DUM = 128, ONE = 160, SQ = 192, SP = 224,
    MOD1 = 256, X = 320, YQ = 384, ACC = 448,           /* recombination */
    NN = 512, R2 = 576, V = 640, W = 704,               /* verification */
};

#define TRY(call) do { int rc_ = (call); if (rc_ != PKA_OK) return rc_; } while (0)

/* S = m^d mod prime, an integer below the prime, into region `to`. */
__attribute__((noinline)) static int crt_half(const uint8_t *prime, const uint8_t *d, uint32_t to)
{
    pka_load_be(P, prime, HALF);
    pka_fill(T, 0, HALF);
    TRY(pka_exec(PKA_SUB, HALF, T, P, 0, RR));              /* R - p = R mod p (p > R/2) */
    TRY(pka_exec(PKA_MODADD, HALF, RR, RR, P, RR));         /* 2R mod p */
    for (uint32_t k = 1; k < 32u * HALF; k <<= 1)
        TRY(pka_exec(PKA_MONTMUL, HALF, RR, RR, P, RR));    /* 2^k R -> 2^(2k) R: R^2 at the end */

    pka_load_be(T, rsa_input_msg, HALF);                    /* m1: the high half of m */
    pka_load_be(DUM, rsa_input_msg + 4u * HALF, HALF);      /* m2: the low half */
    TRY(pka_exec(PKA_MONTMUL, HALF, T, RR, P, T));          /* m1 R mod p */
    TRY(pka_exec(PKA_MODADD, HALF, T, DUM, P, T));          /* m mod p */
    TRY(pka_exec(PKA_MONTMUL, HALF, T, RR, P, T));          /* t = m R */
    TRY(pka_exec(PKA_MONTMUL, HALF, ONE, RR, P, Y));        /* y = R (1 in Montgomery form) */

    pka_config(HALF, P);
    for (uint32_t i = 0; i < 32u * HALF; i++) {             /* every bit of d, LSB first */
        uint32_t bit = (d[4u * HALF - 1u - (i >> 3)] >> (i & 7u)) & 1u;
        uint32_t dst = Y ^ ((Y ^ DUM) & (bit - 1u));        /* y, or the dummy for a 0 bit */
        TRY(pka_run(PKA_MONTMUL, Y, T, dst));
        TRY(pka_run(PKA_MONTMUL, T, T, T));
    }
    return pka_exec(PKA_MONTMUL, HALF, Y, ONE, P, to);      /* out of Montgomery form */
}

/* S = S_q + q * (qinv (S_p - S_q) mod p), into ACC (64 words). */
__attribute__((noinline)) static int crt_recombine(void)
{
    const rsa_key_t *key = &rsa_input_key;

    /* P and RR still hold p and R^2 mod p: the p half ran last. */
    TRY(pka_exec(PKA_MODSUB, HALF, SP, SQ, P, DUM));        /* S_p - S_q mod p */
    pka_load_be(T, key->qinv, HALF);
    TRY(pka_exec(PKA_MONTMUL, HALF, T, RR, P, T));          /* qinv R */
    TRY(pka_exec(PKA_MONTMUL, HALF, T, DUM, P, Y));         /* h = qinv (S_p - S_q) mod p */

    pka_fill(MOD1, 0xFFFFFFFFu, FULL);                      /* 2^2048 - 1: (x) is a plain product */
    pka_copy(X, Y, HALF);                                   /* [h, 0] */
    pka_fill(X + HALF, 0, HALF);
    pka_load_be(YQ, key->q, HALF);                          /* [q, 0] */
    pka_fill(YQ + HALF, 0, HALF);
    TRY(pka_exec(PKA_MONTMUL, FULL, X, YQ, MOD1, ACC));     /* h q < 2^2048 - 1 */
    pka_copy(X, SQ, HALF);                                  /* [S_q, 0] */
    return pka_exec(PKA_ADD, FULL, ACC, X, 0, ACC);         /* S = S_q + h q < N */
}

#if VERIFY_AFTER_SIGN
/* S^e mod N == m, for S in ACC (e = 65537, the demo key's). 1 if it holds. */
__attribute__((noinline)) static int verify_signature(void)
{
    const rsa_key_t *key = &rsa_input_key;

    pka_load_be(X, key->p, HALF);                           /* N = p q, by the same product */
    pka_fill(X + HALF, 0, HALF);
    pka_load_be(YQ, key->q, HALF);
    pka_fill(YQ + HALF, 0, HALF);
    if (pka_exec(PKA_MONTMUL, FULL, X, YQ, MOD1, NN) != PKA_OK)
        return 0;
    pka_fill(W, 0, FULL);
    if (pka_exec(PKA_SUB, FULL, W, NN, 0, R2) != PKA_OK ||  /* R mod N = 2^2048 - N */
        pka_exec(PKA_MODADD, FULL, R2, R2, NN, R2) != PKA_OK)
        return 0;
    for (uint32_t k = 1; k < 32u * FULL; k <<= 1)
        if (pka_exec(PKA_MONTMUL, FULL, R2, R2, NN, R2) != PKA_OK)
            return 0;
    if (pka_exec(PKA_MONTMUL, FULL, ACC, R2, NN, V) != PKA_OK)     /* S R */
        return 0;
    pka_copy(W, V, FULL);
    pka_config(FULL, NN);
    for (uint32_t i = 0; i < 16u; i++)                      /* S^(2^16) R */
        if (pka_run(PKA_MONTMUL, W, W, W) != PKA_OK)
            return 0;
    pka_fill(X, 0, FULL);
    pka_write(X, 1);
    if (pka_run(PKA_MONTMUL, W, V, W) != PKA_OK ||          /* S^65537 R */
        pka_run(PKA_MONTMUL, W, X, W) != PKA_OK)            /* S^65537 mod N */
        return 0;
    uint32_t diff = 0;
    for (uint32_t i = 0; i < FULL; i++) {                   /* compare with m, every word */
        const uint8_t *b = rsa_input_msg + 4u * (FULL - 1u - i);
        uint32_t m = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
        diff |= pka_read(W + i) ^ m;
    }
    return diff == 0;
}
#endif

static int rsa_crt_sign(void)
{
    const rsa_key_t *key = &rsa_input_key;

    pka_init();
    pka_fill(ONE, 0, HALF);
    pka_write(ONE, 1);
    TRY(crt_half(key->q, key->dq, SQ));
    TRY(crt_half(key->p, key->dp, SP));
    return crt_recombine();
}

static void print_hex(const uint8_t *data, uint32_t n)
{
    static const char digits[] = "0123456789abcdef";
    char line[2 * NBYTES + 2];

    for (uint32_t i = 0; i < n; i++) {
        line[2 * i] = digits[data[i] >> 4];
        line[2 * i + 1] = digits[data[i] & 15u];
    }
    line[2 * n] = '\n';
    line[2 * n + 1] = '\0';
    sh_puts(line);
}

int main(void)
{
    if (rsa_crt_sign() != PKA_OK) {
        sh_puts("PKA error\n");
        return 2;
    }
#if VERIFY_AFTER_SIGN
    if (!verify_signature()) {
        sh_puts("fault detected\n");                        /* the signature never leaves PKA RAM */
        return 3;
    }
#endif
    pka_fetch_be(ACC, rsa_output, FULL);
    sh_puts("signature ");
    print_hex(rsa_output, NBYTES);
    return 0;
}
