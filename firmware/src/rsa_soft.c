/*
 * RSA private-key operation in software: the xRSA paper's "naive method" (Mbed TLS
 * bignum, no PKA), as mbedtls_rsa_private computes it with CRT (docs/software-rsa.md):
 *
 *   S_q = m^dq mod q,  S_p = m^dp mod p        (bn_exp_mod: fixed window, montmul)
 *   h   = qinv (S_p - S_q) mod p
 *   S   = S_q + h q
 *
 * The q half runs first (as the PKA firmware's rsa.c does), so that p's R^2 mod p is
 * still at hand for h. Mbed TLS also blinds the message and the exponents (which
 * needs a random generator) and checks the result with the public key; neither is
 * done here, nor by the PKA firmware: both compute the bare operation.
 *
 * Key layout as rsa.h: each big-endian value in the first nbits/16 bytes of its
 * 256-byte array. Primes are nl = nbits/64 limbs: 32 for RSA-2048, 64 for RSA-4096.
 *
 * Every step is constant time in the key and the message (Mbed TLS 3.6's bignum
 * core; the CRT recombination's reductions are masked too): `pkasim ct-check`
 * passes it.
 *
 * RAM (all static, sized for RSA-4096): the exponentiation workspace (window table
 * of 2^BN_WINDOW_SIZE 2048-bit numbers, the selected entry, the montmul scratch)
 * 8968 bytes with BN_WINDOW_SIZE 5, shared with the CRT step and rsa_get_public_key, plus five
 * 2048-bit numbers (1280 bytes). docs/software-rsa.md has the whole budget.
 */
#include "bn.h"


#define NL_MAX BN_MAX_LIMBS

static union {
    bn_exp_ws exp;                          /* the two exponentiations */
    struct {
        bn_uint q[NL_MAX];
        bn_uint qinv[NL_MAX];
        bn_uint t[BN_MONT_SCRATCH(NL_MAX)];
        bn_uint s[2u * NL_MAX];             /* h q, then S */
    } crt;
    struct {
        bn_uint p[NL_MAX];
        bn_uint q[NL_MAX];
        bn_uint n[2u * NL_MAX];
    } pub;
} ws;

static bn_uint prime[NL_MAX];               /* q, then p */
static bn_uint rr[NL_MAX];                  /* R^2 mod prime */
static bn_uint base[NL_MAX];                /* m mod prime */
static bn_uint s_q[NL_MAX];                 /* m^dq mod q */
static bn_uint s_p[NL_MAX];                 /* m^dp mod p, then h */

/* Limbs per prime for nbits, or 0 if this code does not take that size. */
static size_t prime_limbs(uint16_t nbits)
{
    if (nbits % 64u != 0 || nbits < 128u || nbits > 64u * NL_MAX)
        return 0;
    return nbits / 64u;
}

/* prime = the prime in be[0..4nl), checked odd and exactly 32 nl bits long. */
static int load_prime(bn_uint *x, const uint8_t *be, size_t nl)
{
    bn_from_be(x, nl, be, 4u * nl);
    if (!(x[0] & 1u) || !(x[nl - 1u] & 0x80000000u))
        return SOFT_RSA_ERR_KEY;
    return RSA_OK;
}

/* s = in^d mod prime for the prime in pbe and the exponent in dbe (one CRT half). */
static int crt_half(const uint8_t *pbe, const uint8_t *dbe, const uint8_t *in, size_t nl, bn_uint *s)
{
    int rc = load_prime(prime, pbe, nl);
    if (rc != RSA_OK)
        return rc;
    bn_rr(rr, prime, nl);

    /* m mod prime (Mbed TLS: mbedtls_mpi_mod_mpi inside mbedtls_mpi_exp_mod). */
    bn_from_be(ws.exp.t, 2u * nl, in, 8u * nl);
    bn_mod_wide(base, ws.exp.t, prime, nl, bn_mont_init(prime[0]), rr);

    bn_exp_mod(s, base, dbe, 4u * nl, prime, nl, rr, &ws.exp);
    return RSA_OK;
}

int soft_rsa_private(const rsa_key_t *key, const uint8_t *in, uint8_t *out)
{
    const size_t nl = prime_limbs(key->nbits);
    int rc;

    if (!nl)
        return RSA_ERR_NBITS;
    if ((rc = crt_half(key->q, key->dq, in, nl, s_q)) != RSA_OK)
        return rc;
    if ((rc = crt_half(key->p, key->dp, in, nl, s_p)) != RSA_OK)
        return rc;
    /* prime = p and rr = R^2 mod p from here on. */
    const bn_uint mm = bn_mont_init(prime[0]);

    /* h = qinv (S_p - S_q) mod p. S_q < q < 2p (same length), so S_q mod p is S_q
     * or S_q - p. */
    bn_uint *sq_p = ws.crt.t;               /* (borrows the scratch for a moment) */
    bn_copy(sq_p, s_q, nl);
    bn_csub(sq_p, 0, prime, nl);
    bn_uint borrow = bn_sub(s_p, s_p, sq_p, nl);
    bn_add_masked(s_p, s_p, prime, nl, 0u - borrow);
    bn_from_be(ws.crt.qinv, nl, key->qinv, 4u * nl);
    bn_montmul(s_p, ws.crt.qinv, prime, nl, mm, ws.crt.t);     /* (S_p - S_q) qinv / R */
    bn_montmul(s_p, rr, prime, nl, mm, ws.crt.t);              /* h */

    /* S = S_q + h q < q + (p - 1) q = n. */
    bn_from_be(ws.crt.q, nl, key->q, 4u * nl);
    bn_mul(ws.crt.s, s_p, nl, ws.crt.q, nl);
    bn_carry(ws.crt.s + nl, nl, bn_add(ws.crt.s, ws.crt.s, s_q, nl));
    bn_to_be(out, 8u * nl, ws.crt.s, 2u * nl);
    return RSA_OK;
}

int soft_rsa_get_public_key(rsa_key_t *key, uint8_t *n)
{
    const size_t nl = prime_limbs(key->nbits);
    int rc;

    if (!nl)
        return RSA_ERR_NBITS;
    if ((rc = load_prime(ws.pub.p, key->p, nl)) != RSA_OK ||
        (rc = load_prime(ws.pub.q, key->q, nl)) != RSA_OK)
        return rc;
    bn_mul(ws.pub.n, ws.pub.p, nl, ws.pub.q, nl);
    bn_to_be(n, 8u * nl, ws.pub.n, 2u * nl);
    return RSA_OK;
}

/* ---- bignum probe for the tests ------------------------------------------------------ */

#define PROBE_MAX_LIMBS 16u

int soft_rsa_bn_call(const uint32_t *in, uint32_t *out)
{
    const uint32_t op = in[0], nl = in[1];
    const bn_uint *a = in + 2, *b = a + 2u * nl, *n = b + nl;
    const uint8_t *e = (const uint8_t *)(n + nl);
    bn_uint *t = ws.exp.t;

    if (nl == 0 || nl > PROBE_MAX_LIMBS)
        return -1;
    bn_zero(out, 2u * nl + 2u);
    switch (op) {
    case BN_PROBE_MONTMUL:
        bn_copy(out, a, nl);
        bn_montmul(out, b, n, nl, bn_mont_init(n[0]), t);
        return 0;
    case BN_PROBE_EXP_MOD:
        bn_rr(rr, n, nl);
        bn_exp_mod(out, a, e, 4u * nl, n, nl, rr, &ws.exp);
        return 0;
    case BN_PROBE_MOD_WIDE:
        bn_rr(rr, n, nl);
        bn_copy(t, a, 2u * nl);
        bn_mod_wide(out, t, n, nl, bn_mont_init(n[0]), rr);
        return 0;
    case BN_PROBE_RR:
        bn_rr(out, n, nl);
        return 0;
    case BN_PROBE_MUL:
        bn_mul(out, a, nl, b, nl);
        return 0;
    case BN_PROBE_MUL_HLP:
    case BN_PROBE_MUL_HLP_C:
    case BN_PROBE_MUL_HLP_LL:
        bn_copy(out, a, 2u * nl);
        if (op == BN_PROBE_MUL_HLP)
            bn_mla(out, 2u * nl + 2u, b, nl, n[0]);
        else
            bn_carry(out + nl, nl + 2u,
                     (op == BN_PROBE_MUL_HLP_C ? bn_muladdc_c : bn_muladdc_ll)(nl, b, out, n[0]));
        return 0;
    case BN_PROBE_MONT_INIT:
        out[0] = bn_mont_init(n[0]);
        return 0;
    default:
        return -1;
    }
}
