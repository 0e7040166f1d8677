/*
 * RSA private-key operations on the PKA: RSA-2048 with CRT on the 2048-bit
 * Montgomery multiplier, and RSA-4096 by the xRSA method (Dang, Li, Chen, "xRSA:
 * Construct Larger Bits RSA on Low-Cost Devices"). See docs/xrsa.md.
 *
 * The key follows CanoKey's rsa_key_t (canokey-crypto, include/rsa.h): big-endian
 * byte strings, each "right-aligned to nbits/16 bytes" exactly as CanoKey fills them
 * (mbedtls_rsa_export_raw with a length of nbits/16): the value occupies the FIRST
 * nbits/16 bytes of its 256-byte array, big-endian, padded on the left with zeros
 * to that length; the rest of the array is ignored. So for nbits = 2048, p is in
 * p[0..127] (p[0] the most significant byte); for 4096 it fills p[0..255].
 * e is 4 bytes big-endian (not used by the private operation).
 *
 * Layout (alignas(4) as in CanoKey): nbits at 0, e at 4, p at 8, q at 264, dp at
 * 520, dq at 776, qinv at 1032; sizeof = 1288. Tests write keys with these offsets.
 */
#ifndef PKASIM_RSA_H
#define PKASIM_RSA_H

#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>

#define RSA_N_BIT_MAX  4096
#define E_LENGTH       4
#define PQ_LENGTH_MAX  (RSA_N_BIT_MAX / 16)

typedef struct {
    uint16_t nbits;                     /* 2048 or 4096 */
    alignas(4) uint8_t e[E_LENGTH];
    alignas(4) uint8_t p[PQ_LENGTH_MAX];
    alignas(4) uint8_t q[PQ_LENGTH_MAX];
    alignas(4) uint8_t dp[PQ_LENGTH_MAX];   /* d mod (p - 1) */
    alignas(4) uint8_t dq[PQ_LENGTH_MAX];   /* d mod (q - 1) */
    alignas(4) uint8_t qinv[PQ_LENGTH_MAX]; /* q^-1 mod p */
} rsa_key_t;

_Static_assert(offsetof(rsa_key_t, e) == 4 && offsetof(rsa_key_t, p) == 8 &&
               offsetof(rsa_key_t, q) == 264 && offsetof(rsa_key_t, dp) == 520 &&
               offsetof(rsa_key_t, dq) == 776 && offsetof(rsa_key_t, qinv) == 1032 &&
               sizeof(rsa_key_t) == 1288, "rsa_key_t layout (tests rely on it)");

/* Return values: 0 or one of these (PKA errors come from pka.h). */
#define RSA_OK          0
#define RSA_ERR_NBITS   (-1)    /* nbits is neither 2048 nor 4096 */
/*      PKA_ERR_OP      (-2)       the PKA refused an operation (OPERRF) */
/*      PKA_ERR_ADDR    (-3)       an operand outside PKA RAM (ADDRERRF) */
/*      PKA_ERR_RAM     (-4)       PKA RAM touched while busy (RAMERRF) */
#define RSA_ERR_CARRY   (-5)    /* a carry out of a 4096-bit result: a bad key (p, q too long) */
#define RSA_ERR_INPUT   (-6)    /* the input is not below n: "message representative out of
                                   range" (RSASP1, RSADP); fixed-window images only */

/*
 * n = p * q, nbits/8 bytes big-endian. Computed on the multiplier with the modulus
 * 2^2048 - 1 (Table II of the paper: four 1024x1024-bit products for RSA-4096, one
 * for RSA-2048); for RSA-4096 on a PKA with MAXLEN >= 128, one LEN-128 product
 * modulo 2^4096 - 1.
 */
int rsa_get_public_key(rsa_key_t *key, uint8_t *n);

/*
 * out = in^d mod n (sign or decrypt), in and out nbits/8 bytes big-endian; in may
 * equal out. The fixed-window build (rsa_win.c) requires in < n and returns
 * RSA_ERR_INPUT otherwise, leaving out untouched; the xRSA builds (rsa.c) accept any
 * input below 2^nbits (an input >= n gives (in mod n)^d mod n; docs/xrsa.md, "Input
 * range"). Runs in a time that depends on nbits (and the chip) only.
 * RSA-4096 uses a 4096-bit multiplier natively for step 4 and equation 3 when the
 * PKA reports one (MAXLEN >= 128, docs/xrsa.md).
 */
int rsa_private(const rsa_key_t *key, const uint8_t *in, uint8_t *out);

/* Which build this is: "paper" (xrsa.elf), "optimized" (xrsa_opt.elf) or
 * "fixed-window" (xrsa_win.elf). */
extern const char rsa_variant[];

#endif
