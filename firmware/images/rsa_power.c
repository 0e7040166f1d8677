/*
 * rsa_power: an RSA-1024 CRT signer on the PKA, with and without exponent and message
 * blinding, the target of docs/power.md's fixed-versus-random exponent test.
 *
 * s_p = m^dp mod p and s_q = m^dq mod q by a Montgomery ladder on the PKA (two
 * MONTMULs and an ADD per exponent bit, whatever the bit: the bit only chooses the
 * pointers, by arithmetic), then Garner's recombination s = s_q + q (qinv (s_p - s_q)
 * mod p). Constant time (pkasim ct-check agrees), and still leaky: the exponent's bits
 * decide which PKA RAM slots are squared and overwritten, so the PKA's operands, the
 * pointers the CPU writes and the exponent words it reads all depend on them.
 *
 * rsa_blind is a set of countermeasures, their randomness drawn from the TRNG
 * (src/trng.c; pkasim power and tvla reseed it for every trace) into rsa_rand:
 *   bit 0, exponent blinding: each half exponent is blinded first, dp' = dp + r (p - 1)
 *     for a 32-bit r (rsa_rand[0] for p, rsa_rand[1] for q): the same signature,
 *     through a different exponent every time. The blinding itself reads dp in the
 *     clear (a real device would keep dp blinded between uses); the ladder never does.
 *   bit 1, message blinding (Kocher 1996): a 1024-bit r (rsa_rand[2..33]); each half
 *     exponentiates m r^e (e = 65537) instead of m, whose result is s r, and multiplies
 *     by r^-1 = r^(q-2) mod q (Fermat) after the exponentiation: the ladder's operands
 *     are random in every trace.
 *
 * Inputs and outputs (ELF symbols in .data; numbers as 32-bit words, least
 * significant first, the layout `--fixed SYM=HEX` takes in memory order):
 *   rsa_p, rsa_q, rsa_dp, rsa_dq, rsa_qinv   the CRT key (16 words each, p > q)
 *   rsa_r2p, rsa_r2q                         R^2 mod p, R^2 mod q (R = 2^512)
 *   rsa_msg                                  the message representative (32 words)
 *   rsa_blind                                the countermeasures (bits above)
 *   rsa_rand                                 what was drawn from the TRNG (an output)
 *   rsa_sig                                  the signature (32 words)
 * Defaults: the demo key of rsa_power_key.h. With rsa_check = 1 (default) it compares
 * the signature with that key's and exits 1 if they differ (a changed dp gives
 * another signature: exit 1, which a power campaign ignores); 3 if the TRNG failed.
 */
#include <stdint.h>
#include "pka_poll.h"
#include "rsa_power_key.h"
#include "semihost.h"
#include "trng.h"

#define DATA(name) __attribute__((section(".data." #name), used, aligned(4)))
#define L 16u                  /* words of p and q */
#define EBITS 512u             /* bits of dp, dq */
#define EBITS_BLIND (EBITS + 33u) /* dp + r (p - 1) < 2^545 */
#define EWORDS 18u
#define BLIND_EXPONENT 1u
#define BLIND_MESSAGE 2u
#define MSG_RAND 2u            /* rsa_rand[2..33]: the message blinding's r */

DATA(rsa_p) uint32_t rsa_p[L] = KEY_P;
DATA(rsa_q) uint32_t rsa_q[L] = KEY_Q;
DATA(rsa_dp) uint32_t rsa_dp[L] = KEY_DP;
DATA(rsa_dq) uint32_t rsa_dq[L] = KEY_DQ;
DATA(rsa_qinv) uint32_t rsa_qinv[L] = KEY_QINV;
DATA(rsa_r2p) uint32_t rsa_r2p[L] = KEY_R2P;
DATA(rsa_r2q) uint32_t rsa_r2q[L] = KEY_R2Q;
DATA(rsa_msg) uint32_t rsa_msg[2 * L] = KEY_MSG;
DATA(rsa_expected) uint32_t rsa_expected[2 * L] = KEY_SIG;
DATA(rsa_sig) uint32_t rsa_sig[2 * L] = {0};
DATA(rsa_blind) uint32_t rsa_blind = 0;
DATA(rsa_rand) uint32_t rsa_rand[MSG_RAND + 2 * L] = {0};
DATA(rsa_check) uint32_t rsa_check = 1;

/* PKA RAM slots (word offsets), L words each. */
enum { S_N = 0, S_X0 = 16, S_X1 = 32, S_T = 48, S_Z = 64, S_R2 = 80, S_M = 96, S_ONE = 112, S_A = 128,
       S_MH = 144, S_ML = 160, S_B = 176, S_RB = 192, S_V = 208 };

static void load(uint32_t slot, const uint32_t *src)
{
    for (uint32_t i = 0; i < L; i++)
        PKA_RAM[slot + i] = src[i];
}

static void fill(uint32_t slot, uint32_t first)
{
    PKA_RAM[slot] = first;
    for (uint32_t i = 1; i < L; i++)
        PKA_RAM[slot + i] = 0;
}

/* a + b + c (c <= 1) and its carry, without a branch (a compare would become one). */
static inline uint32_t adc(uint32_t a, uint32_t b, uint32_t c, uint32_t *carry)
{
    uint32_t s = a + b;
    uint32_t c1 = ((a & b) | ((a | b) & ~s)) >> 31;
    uint32_t t = s + c;
    uint32_t c2 = (s & ~t) >> 31 & c;
    *carry = c1 | c2;
    return t;
}

/* The 64-bit product of two words from four 16-bit products (ARMv6-M's MULS keeps 32 bits). */
static void mul32(uint32_t a, uint32_t b, uint32_t *lo, uint32_t *hi)
{
    uint32_t al = a & 0xFFFF, ah = a >> 16, bl = b & 0xFFFF, bh = b >> 16;
    uint32_t ll = al * bl, lh = al * bh, hl = ah * bl, hh = ah * bh;
    uint32_t mid = (ll >> 16) + (lh & 0xFFFF) + (hl & 0xFFFF);
    *lo = (ll & 0xFFFF) | (mid << 16);
    *hi = hh + (lh >> 16) + (hl >> 16) + (mid >> 16);
}

/* e = d + r (m - 1): the blinded exponent, EWORDS words. */
__attribute__((noinline)) void rsa_blind_exponent(uint32_t *e, const uint32_t *d, const uint32_t *m, uint32_t r)
{
    uint32_t carry = 0, c2 = 0, c;
    for (uint32_t i = 0; i < L; i++) {
        uint32_t w = m[i] - (i == 0); /* m - 1: m is odd, so no borrow leaves word 0 */
        uint32_t lo, hi;
        mul32(w, r, &lo, &hi);
        lo = adc(lo, carry, 0, &c);
        carry = hi + c;                 /* hi < 2^32 - 1: no overflow */
        e[i] = adc(lo, d[i], c2, &c2);
    }
    e[L] = adc(carry, 0, c2, &c);
    e[L + 1] = c;
}

/* X0 = X1^e in Montgomery form: X1 holds the base (times R), X0 is set to R. The
 * ladder: two MONTMULs and an ADD per bit, the bit choosing only the slots. */
static void ladder(const uint32_t *e, uint32_t ebits)
{
    pkp_run(PKA_MONTMUL, S_ONE, S_R2, S_X0); /* X0 = R: one, in Montgomery form */
    for (uint32_t i = ebits; i-- > 0;) {
        uint32_t b = (e[i >> 5] >> (i & 31u)) & 1u;
        uint32_t xb = S_X0 + (b << 4), xn = S_X1 - (b << 4);
        pkp_run(PKA_MONTMUL, S_X0, S_X1, S_T); /* X0 X1 */
        pkp_run(PKA_MONTMUL, xb, xb, xb);      /* X_b^2 */
        pkp_run(PKA_ADD, S_T, S_Z, xn);        /* X_(1-b) = X0 X1 */
    }
}

/* The secret exponentiation: out = b^e mod N (L words, out of Montgomery form), the
 * base b R mod N in slot S_B. */
__attribute__((noinline)) void rsa_exp(const uint32_t *e, uint32_t ebits, uint32_t *out)
{
    pkp_run(PKA_ADD, S_B, S_Z, S_X1);
    ladder(e, ebits);
    pkp_run(PKA_MONTMUL, S_X0, S_ONE, S_A); /* out of Montgomery form */
    pkp_wait();
    for (uint32_t i = 0; i < L; i++)
        out[i] = PKA_RAM[S_A + i];
}

/* x R mod N into slot dst for x of 2L words (x = xh 2^512 + xl). */
static void to_mont(const uint32_t *x, uint32_t dst)
{
    pkp_wait();
    load(S_MH, x + L);
    load(S_ML, x);
    pkp_run(PKA_MONTMUL, S_MH, S_R2, S_A);  /* xh R mod N */
    pkp_run(PKA_MODADD, S_A, S_ML, S_M);    /* x mod N = xh 2^512 + xl */
    pkp_run(PKA_MONTMUL, S_M, S_R2, dst);   /* x R */
}

static void setup_mod(const uint32_t *n, const uint32_t *r2)
{
    pkp_wait();
    load(S_N, n);
    load(S_R2, r2);
    fill(S_Z, 0);
    fill(S_ONE, 1);
    pkp_config(L, S_N);
}

static const uint32_t public_e[1] = {65537u};

/* One half of the CRT: out = m^d mod n (n, R^2 mod n), with message blinding if asked. */
static void half(const uint32_t *n, const uint32_t *r2, const uint32_t *d, uint32_t bits, uint32_t *out)
{
    uint32_t blind = rsa_blind & BLIND_MESSAGE;
    setup_mod(n, r2);
    to_mont(rsa_msg, S_B);                       /* m R */
    if (blind) {
        to_mont(rsa_rand + MSG_RAND, S_RB);      /* r R */
        pkp_run(PKA_ADD, S_RB, S_Z, S_X1);
        ladder(public_e, 17);                    /* X0 = r^e R */
        pkp_run(PKA_MONTMUL, S_B, S_X0, S_T);    /* m r^e R */
        pkp_run(PKA_ADD, S_T, S_Z, S_B);
    }
    rsa_exp(d, bits, out);                       /* s r (or s) */
    if (blind) {
        uint32_t nm2[L], borrow = 2;             /* n - 2: the exponent of r^-1 (Fermat) */
        for (uint32_t i = 0; i < L; i++) {
            nm2[i] = n[i] - borrow;
            borrow = n[i] < borrow;
        }
        pkp_run(PKA_ADD, S_RB, S_Z, S_X1);
        ladder(nm2, EBITS);                      /* X0 = r^-1 R */
        pkp_wait();
        load(S_V, out);
        pkp_run(PKA_MONTMUL, S_V, S_X0, S_A);    /* s r r^-1 R R^-1 = s */
        pkp_wait();
        for (uint32_t i = 0; i < L; i++)
            out[i] = PKA_RAM[S_A + i];
    }
}

int main(void)
{
    uint32_t ep[EWORDS] = {0}, eq[EWORDS] = {0}, sp[L], sq[L], h[L];
    uint32_t bits = (rsa_blind & BLIND_EXPONENT) ? EBITS_BLIND : EBITS;
    if (rsa_blind) {
        trng_init();
        if (trng_read(rsa_rand, sizeof rsa_rand) != TRNG_OK)
            return 3;
    }
    if (rsa_blind & BLIND_EXPONENT) {
        rsa_blind_exponent(ep, rsa_dp, rsa_p, rsa_rand[0]);
        rsa_blind_exponent(eq, rsa_dq, rsa_q, rsa_rand[1]);
    } else {
        for (uint32_t i = 0; i < L; i++) {
            ep[i] = rsa_dp[i];
            eq[i] = rsa_dq[i];
        }
    }
    pkp_init();
    half(rsa_q, rsa_r2q, eq, bits, sq);
    half(rsa_p, rsa_r2p, ep, bits, sp);
    /* h = qinv (s_p - s_q) mod p (s_q < q < p) */
    pkp_wait();
    load(S_X0, sp);
    load(S_X1, sq);
    load(S_A, rsa_qinv);
    pkp_run(PKA_MODSUB, S_X0, S_X1, S_T);
    pkp_run(PKA_MONTMUL, S_A, S_R2, S_M); /* qinv R */
    pkp_run(PKA_MONTMUL, S_T, S_M, S_A);  /* (s_p - s_q) qinv */
    pkp_wait();
    for (uint32_t i = 0; i < L; i++)
        h[i] = PKA_RAM[S_A + i];
    /* s = s_q + q h, schoolbook on the CPU */
    for (uint32_t i = 0; i < 2 * L; i++)
        rsa_sig[i] = i < L ? sq[i] : 0;
    for (uint32_t i = 0; i < L; i++) {
        uint32_t carry = 0, c;
        for (uint32_t j = 0; j < L; j++) {
            uint32_t lo, hi;
            mul32(rsa_q[j], h[i], &lo, &hi);
            lo = adc(lo, carry, 0, &c);
            hi += c;
            rsa_sig[i + j] = adc(rsa_sig[i + j], lo, 0, &c);
            carry = hi + c;
        }
        for (uint32_t k = i + L; k < 2 * L; k++) {
            rsa_sig[k] = adc(rsa_sig[k], carry, 0, &c);
            carry = c;
        }
    }
    if (PKA_SR & PKA_SR_ERRORS)
        return 2;
    if (!rsa_check)
        return 0;
    uint32_t diff = 0;
    for (uint32_t i = 0; i < 2 * L; i++)
        diff |= rsa_sig[i] ^ rsa_expected[i];
    return diff != 0;
}
