/*
 * Elliptic-curve cryptography on the PKA (docs/ecc.md): P-256 ECDSA (RFC 6979
 * deterministic nonce) and ECDH, X25519 (RFC 7748), Ed25519 (RFC 8032). Built on the
 * field layer ecc_fe.h, so the same code runs on the PKA (ecc.elf) or in software
 * (ecc_soft.elf, ECC_SOFT=1).
 *
 * Byte strings follow each standard: P-256 numbers are 32 bytes big-endian (SEC 1),
 * points 65 bytes uncompressed (0x04 || x || y), signatures r || s; X25519 scalars
 * and u-coordinates and every Ed25519 string are little-endian as in RFC 7748/8032.
 *
 * Constant time: the private scalar (d, k, the X25519 scalar, the Ed25519 seed and the
 * nonce r) only goes through code whose instructions, memory addresses and PKA
 * operations do not depend on it (`pkasim ct-check`, docs/ecc.md). Public inputs
 * (points, signatures, messages) are checked with ordinary branches.
 */
#ifndef PKASIM_ECC_H
#define PKASIM_ECC_H

#include <stdint.h>

/* Return values: 0 or one of these (PKA errors, -2 to -4, come from pka.h). */
#define ECC_OK              0
#define ECC_ERR_KEY         (-10)   /* private key out of range (P-256 d not in [1, n-1]) */
#define ECC_ERR_POINT       (-11)   /* public point: bad encoding, coordinate >= p, or not on the curve */
#define ECC_ERR_INFINITY    (-12)   /* the point at infinity (as input, or as a result) */
#define ECC_ERR_RANGE       (-13)   /* ECDSA r or s not in [1, n-1]; Ed25519 S >= L */
#define ECC_ERR_SIGNATURE   (-14)   /* a well-formed signature that does not verify */
#define ECC_ERR_ENCODING    (-15)   /* Ed25519: non-canonical point encoding */
#define ECC_ERR_ZERO        (-16)   /* X25519: all-zero shared secret (RFC 7748 section 6.1) */
#define ECC_ERR_LENGTH      (-17)   /* message longer than the image accepts */

/* ---- P-256 ------------------------------------------------------------------------ */

/* pub (65 bytes, 0x04 || x || y) = d G. */
int p256_public_key(const uint8_t d[32], uint8_t pub[65]);
/* ECDSA signature (r || s, 64 bytes) of the hash h (32 bytes) with the nonce of RFC 6979
 * (HMAC-SHA-256). */
int p256_sign(const uint8_t d[32], const uint8_t h[32], uint8_t sig[64]);
/* 0 when sig (r || s) is a valid signature of h by pub; ECC_ERR_* otherwise. */
int p256_verify(const uint8_t pub[65], const uint8_t h[32], const uint8_t sig[64]);
/* ECDH: the x-coordinate of d Q (32 bytes), Q = peer (65 bytes) checked first. */
int p256_ecdh(const uint8_t d[32], const uint8_t peer[65], uint8_t secret[32]);

/* A new key pair from the TRNG (FIPS 186-4 B.4.2, testing candidates): d (32 bytes) and
 * its public point (65 bytes). */
int p256_keygen(uint8_t d[32], uint8_t pub[65]);

/* ---- Curve25519 -------------------------------------------------------------------- */

/* X25519(k, u) (RFC 7748 section 5): out = 32 bytes; ECC_ERR_ZERO for an all-zero result. */
int x25519(const uint8_t k[32], const uint8_t u[32], uint8_t out[32]);

/* Ed25519 (RFC 8032 section 5.1): the public key of a 32-byte secret key (seed). */
int ed25519_public_key(const uint8_t seed[32], uint8_t pub[32]);
/* sig (R || S, 64 bytes) of msg[0..len) by seed (the public key derived from it). */
int ed25519_sign(const uint8_t seed[32], const uint8_t *msg, uint32_t len, uint8_t sig[64]);
/* A new Ed25519 key from the TRNG: the 32-byte secret key (seed) and its public key. */
int ed25519_keygen(uint8_t seed[32], uint8_t pub[32]);
/* 0 when sig is valid for msg under pub; ECC_ERR_* otherwise. */
int ed25519_verify(const uint8_t pub[32], const uint8_t *msg, uint32_t len, const uint8_t sig[64]);

#endif
