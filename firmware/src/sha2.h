/*
 * SHA-256, HMAC-SHA-256 and SHA-512 (FIPS 180-4, RFC 2104) in plain C for the ECC code:
 * SHA-256 for the RFC 6979 nonce of ECDSA, SHA-512 for Ed25519 (RFC 8032). Every
 * branch depends on lengths only, never on the data.
 */
#ifndef PKASIM_SHA2_H
#define PKASIM_SHA2_H

#include <stdint.h>

typedef struct {
    uint32_t h[8];
    uint8_t buf[64];
    uint32_t fill;          /* bytes in buf */
    uint32_t total;         /* bytes hashed so far (messages below 512 MiB) */
} sha256_ctx;

void sha256_init(sha256_ctx *c);
void sha256_update(sha256_ctx *c, const void *data, uint32_t len);
void sha256_final(sha256_ctx *c, uint8_t out[32]);

/* HMAC-SHA-256 with a key of at most 64 bytes. */
typedef struct {
    sha256_ctx inner, outer;
} hmac256_ctx;

void hmac256_init(hmac256_ctx *c, const uint8_t *key, uint32_t keylen);
void hmac256_update(hmac256_ctx *c, const void *data, uint32_t len);
void hmac256_final(hmac256_ctx *c, uint8_t out[32]);

typedef struct {
    uint64_t h[8];
    uint8_t buf[128];
    uint32_t fill;
    uint32_t total;
} sha512_ctx;

void sha512_init(sha512_ctx *c);
void sha512_update(sha512_ctx *c, const void *data, uint32_t len);
void sha512_final(sha512_ctx *c, uint8_t out[64]);

/* The block functions (where the hashes spend their time; pkasim bench counts the
 * cycles spent in sha512_block apart). */
void sha256_block(uint32_t h[8], const uint8_t block[64]);
void sha512_block(uint64_t h[8], const uint8_t block[128]);

#endif
