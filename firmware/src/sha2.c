/*
 * SHA-256, HMAC-SHA-256, SHA-512 (FIPS 180-4 sections 6.2 and 6.4; RFC 2104), see sha2.h.
 * Rolled loops with a 16-word message schedule kept in place, small on flash and RAM.
 */
#include "libc_min.h"
#include "sha2.h"

/* ---- SHA-256 ---------------------------------------------------------------------- */

static const uint32_t K256[64] = {
    0x428a2f98u, 0x71374491u, 0xb5c0fbcfu, 0xe9b5dba5u, 0x3956c25bu, 0x59f111f1u, 0x923f82a4u, 0xab1c5ed5u,
    0xd807aa98u, 0x12835b01u, 0x243185beu, 0x550c7dc3u, 0x72be5d74u, 0x80deb1feu, 0x9bdc06a7u, 0xc19bf174u,
    0xe49b69c1u, 0xefbe4786u, 0x0fc19dc6u, 0x240ca1ccu, 0x2de92c6fu, 0x4a7484aau, 0x5cb0a9dcu, 0x76f988dau,
    0x983e5152u, 0xa831c66du, 0xb00327c8u, 0xbf597fc7u, 0xc6e00bf3u, 0xd5a79147u, 0x06ca6351u, 0x14292967u,
    0x27b70a85u, 0x2e1b2138u, 0x4d2c6dfcu, 0x53380d13u, 0x650a7354u, 0x766a0abbu, 0x81c2c92eu, 0x92722c85u,
    0xa2bfe8a1u, 0xa81a664bu, 0xc24b8b70u, 0xc76c51a3u, 0xd192e819u, 0xd6990624u, 0xf40e3585u, 0x106aa070u,
    0x19a4c116u, 0x1e376c08u, 0x2748774cu, 0x34b0bcb5u, 0x391c0cb3u, 0x4ed8aa4au, 0x5b9cca4fu, 0x682e6ff3u,
    0x748f82eeu, 0x78a5636fu, 0x84c87814u, 0x8cc70208u, 0x90befffau, 0xa4506cebu, 0xbef9a3f7u, 0xc67178f2u,
};

static inline uint32_t ror32(uint32_t x, unsigned n) { return (x >> n) | (x << (32u - n)); }

/*
 * Eight rounds at a time with the working variables renamed instead of moved (the
 * usual unrolled form); the message schedule is computed in place in w[16].
 */
#define S256_ROUND(a, b, c, d, e, f, g, h, k, x)                                          \
    do {                                                                                  \
        uint32_t t1_ = h + (ror32(e, 6) ^ ror32(e, 11) ^ ror32(e, 25)) + (g ^ (e & (f ^ g))) + (k) + (x); \
        d += t1_;                                                                         \
        h = t1_ + (ror32(a, 2) ^ ror32(a, 13) ^ ror32(a, 22)) + ((a & b) | (c & (a | b)));\
    } while (0)

#define S256_SCHED(i)                                                                     \
    (w[(i) & 15] += (ror32(w[((i) - 15) & 15], 7) ^ ror32(w[((i) - 15) & 15], 18) ^ (w[((i) - 15) & 15] >> 3)) \
                    + w[((i) - 7) & 15]                                                   \
                    + (ror32(w[((i) - 2) & 15], 17) ^ ror32(w[((i) - 2) & 15], 19) ^ (w[((i) - 2) & 15] >> 10)))

void sha256_block(uint32_t h[8], const uint8_t block[64])
{
    uint32_t w[16];
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];

    for (unsigned i = 0; i < 16; i++)
        w[i] = (uint32_t)block[4 * i] << 24 | (uint32_t)block[4 * i + 1] << 16 |
               (uint32_t)block[4 * i + 2] << 8 | block[4 * i + 3];
    for (unsigned i = 0; i < 16; i += 8) {
        S256_ROUND(a, b, c, d, e, f, g, k, K256[i], w[i]);
        S256_ROUND(k, a, b, c, d, e, f, g, K256[i + 1], w[i + 1]);
        S256_ROUND(g, k, a, b, c, d, e, f, K256[i + 2], w[i + 2]);
        S256_ROUND(f, g, k, a, b, c, d, e, K256[i + 3], w[i + 3]);
        S256_ROUND(e, f, g, k, a, b, c, d, K256[i + 4], w[i + 4]);
        S256_ROUND(d, e, f, g, k, a, b, c, K256[i + 5], w[i + 5]);
        S256_ROUND(c, d, e, f, g, k, a, b, K256[i + 6], w[i + 6]);
        S256_ROUND(b, c, d, e, f, g, k, a, K256[i + 7], w[i + 7]);
    }
    for (unsigned i = 16; i < 64; i += 8) {
        S256_ROUND(a, b, c, d, e, f, g, k, K256[i], S256_SCHED(i));
        S256_ROUND(k, a, b, c, d, e, f, g, K256[i + 1], S256_SCHED(i + 1));
        S256_ROUND(g, k, a, b, c, d, e, f, K256[i + 2], S256_SCHED(i + 2));
        S256_ROUND(f, g, k, a, b, c, d, e, K256[i + 3], S256_SCHED(i + 3));
        S256_ROUND(e, f, g, k, a, b, c, d, K256[i + 4], S256_SCHED(i + 4));
        S256_ROUND(d, e, f, g, k, a, b, c, K256[i + 5], S256_SCHED(i + 5));
        S256_ROUND(c, d, e, f, g, k, a, b, K256[i + 6], S256_SCHED(i + 6));
        S256_ROUND(b, c, d, e, f, g, k, a, K256[i + 7], S256_SCHED(i + 7));
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += k;
}

void sha256_init(sha256_ctx *c)
{
    static const uint32_t iv[8] = {0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au,
                                   0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u};
    memcpy(c->h, iv, sizeof iv);
    c->fill = 0;
    c->total = 0;
}

void sha256_update(sha256_ctx *c, const void *data, uint32_t len)
{
    const uint8_t *p = data;

    c->total += len;
    while (len > 0) {
        uint32_t n = 64u - c->fill;
        if (n > len)
            n = len;
        memcpy(c->buf + c->fill, p, n);
        c->fill += n;
        p += n;
        len -= n;
        if (c->fill == 64u) {
            sha256_block(c->h, c->buf);
            c->fill = 0;
        }
    }
}

void sha256_final(sha256_ctx *c, uint8_t out[32])
{
    uint32_t bits = c->total * 8u, hi = c->total >> 29;

    c->buf[c->fill++] = 0x80;
    if (c->fill > 56u) {
        memset(c->buf + c->fill, 0, 64u - c->fill);
        sha256_block(c->h, c->buf);
        c->fill = 0;
    }
    memset(c->buf + c->fill, 0, 56u - c->fill);
    for (unsigned i = 0; i < 4; i++) {
        c->buf[56 + i] = (uint8_t)(hi >> (24 - 8 * i));
        c->buf[60 + i] = (uint8_t)(bits >> (24 - 8 * i));
    }
    sha256_block(c->h, c->buf);
    for (unsigned i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(c->h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(c->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(c->h[i] >> 8);
        out[4 * i + 3] = (uint8_t)c->h[i];
    }
}

/* ---- HMAC-SHA-256 ------------------------------------------------------------------- */

void hmac256_init(hmac256_ctx *c, const uint8_t *key, uint32_t keylen)
{
    uint8_t pad[64];

    for (unsigned i = 0; i < 64; i++)
        pad[i] = (uint8_t)((i < keylen ? key[i] : 0) ^ 0x36);
    sha256_init(&c->inner);
    sha256_update(&c->inner, pad, 64);
    for (unsigned i = 0; i < 64; i++)
        pad[i] ^= 0x36 ^ 0x5c;
    sha256_init(&c->outer);
    sha256_update(&c->outer, pad, 64);
}

void hmac256_update(hmac256_ctx *c, const void *data, uint32_t len)
{
    sha256_update(&c->inner, data, len);
}

void hmac256_final(hmac256_ctx *c, uint8_t out[32])
{
    uint8_t inner[32];

    sha256_final(&c->inner, inner);
    sha256_update(&c->outer, inner, 32);
    sha256_final(&c->outer, out);
}

/* ---- SHA-512 ------------------------------------------------------------------------ */

static const uint64_t K512[80] = {
    0x428a2f98d728ae22ull, 0x7137449123ef65cdull, 0xb5c0fbcfec4d3b2full, 0xe9b5dba58189dbbcull,
    0x3956c25bf348b538ull, 0x59f111f1b605d019ull, 0x923f82a4af194f9bull, 0xab1c5ed5da6d8118ull,
    0xd807aa98a3030242ull, 0x12835b0145706fbeull, 0x243185be4ee4b28cull, 0x550c7dc3d5ffb4e2ull,
    0x72be5d74f27b896full, 0x80deb1fe3b1696b1ull, 0x9bdc06a725c71235ull, 0xc19bf174cf692694ull,
    0xe49b69c19ef14ad2ull, 0xefbe4786384f25e3ull, 0x0fc19dc68b8cd5b5ull, 0x240ca1cc77ac9c65ull,
    0x2de92c6f592b0275ull, 0x4a7484aa6ea6e483ull, 0x5cb0a9dcbd41fbd4ull, 0x76f988da831153b5ull,
    0x983e5152ee66dfabull, 0xa831c66d2db43210ull, 0xb00327c898fb213full, 0xbf597fc7beef0ee4ull,
    0xc6e00bf33da88fc2ull, 0xd5a79147930aa725ull, 0x06ca6351e003826full, 0x142929670a0e6e70ull,
    0x27b70a8546d22ffcull, 0x2e1b21385c26c926ull, 0x4d2c6dfc5ac42aedull, 0x53380d139d95b3dfull,
    0x650a73548baf63deull, 0x766a0abb3c77b2a8ull, 0x81c2c92e47edaee6ull, 0x92722c851482353bull,
    0xa2bfe8a14cf10364ull, 0xa81a664bbc423001ull, 0xc24b8b70d0f89791ull, 0xc76c51a30654be30ull,
    0xd192e819d6ef5218ull, 0xd69906245565a910ull, 0xf40e35855771202aull, 0x106aa07032bbd1b8ull,
    0x19a4c116b8d2d0c8ull, 0x1e376c085141ab53ull, 0x2748774cdf8eeb99ull, 0x34b0bcb5e19b48a8ull,
    0x391c0cb3c5c95a63ull, 0x4ed8aa4ae3418acbull, 0x5b9cca4f7763e373ull, 0x682e6ff3d6b2b8a3ull,
    0x748f82ee5defb2fcull, 0x78a5636f43172f60ull, 0x84c87814a1f0ab72ull, 0x8cc702081a6439ecull,
    0x90befffa23631e28ull, 0xa4506cebde82bde9ull, 0xbef9a3f7b2c67915ull, 0xc67178f2e372532bull,
    0xca273eceea26619cull, 0xd186b8c721c0c207ull, 0xeada7dd6cde0eb1eull, 0xf57d4f7fee6ed178ull,
    0x06f067aa72176fbaull, 0x0a637dc5a2c898a6ull, 0x113f9804bef90daeull, 0x1b710b35131c471bull,
    0x28db77f523047d84ull, 0x32caab7b40c72493ull, 0x3c9ebe0a15c9bebcull, 0x431d67c49c100d4cull,
    0x4cc5d4becb3e42b6ull, 0x597f299cfc657e2aull, 0x5fcb6fab3ad6faecull, 0x6c44198c4a475817ull,
};

static inline uint64_t ror64(uint64_t x, unsigned n) { return (x >> n) | (x << (64u - n)); }

void sha512_block(uint64_t h[8], const uint8_t block[128])
{
    uint64_t w[16];
    uint64_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];

    for (unsigned i = 0; i < 16; i++) {
        const uint8_t *p = block + 8 * i;
        uint32_t hi = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        uint32_t lo = (uint32_t)p[4] << 24 | (uint32_t)p[5] << 16 | (uint32_t)p[6] << 8 | p[7];
        w[i] = (uint64_t)hi << 32 | lo;
    }
    for (unsigned i = 0; i < 80; i++) {
        uint64_t wi;
        if (i < 16) {
            wi = w[i];
        } else {
            uint64_t w15 = w[(i - 15) & 15], w2 = w[(i - 2) & 15];
            uint64_t s0 = ror64(w15, 1) ^ ror64(w15, 8) ^ (w15 >> 7);
            uint64_t s1 = ror64(w2, 19) ^ ror64(w2, 61) ^ (w2 >> 6);
            wi = w[i & 15] += s0 + w[(i - 7) & 15] + s1;
        }
        uint64_t t1 = k + (ror64(e, 14) ^ ror64(e, 18) ^ ror64(e, 41)) + (g ^ (e & (f ^ g))) + K512[i] + wi;
        uint64_t t2 = (ror64(a, 28) ^ ror64(a, 34) ^ ror64(a, 39)) + ((a & b) | (c & (a | b)));
        k = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += k;
}

void sha512_init(sha512_ctx *c)
{
    static const uint64_t iv[8] = {0x6a09e667f3bcc908ull, 0xbb67ae8584caa73bull, 0x3c6ef372fe94f82bull,
                                   0xa54ff53a5f1d36f1ull, 0x510e527fade682d1ull, 0x9b05688c2b3e6c1full,
                                   0x1f83d9abfb41bd6bull, 0x5be0cd19137e2179ull};
    memcpy(c->h, iv, sizeof iv);
    c->fill = 0;
    c->total = 0;
}

void sha512_update(sha512_ctx *c, const void *data, uint32_t len)
{
    const uint8_t *p = data;

    c->total += len;
    while (len > 0) {
        uint32_t n = 128u - c->fill;
        if (n > len)
            n = len;
        memcpy(c->buf + c->fill, p, n);
        c->fill += n;
        p += n;
        len -= n;
        if (c->fill == 128u) {
            sha512_block(c->h, c->buf);
            c->fill = 0;
        }
    }
}

void sha512_final(sha512_ctx *c, uint8_t out[64])
{
    uint32_t bits = c->total * 8u, hi = c->total >> 29;

    /* the 128-bit length field at bytes 112..127 (its top 12 bytes zero here): a
     * block with no room for it after the 0x80 is padded and hashed first */
    c->buf[c->fill++] = 0x80;
    if (c->fill > 112u) {
        memset(c->buf + c->fill, 0, 128u - c->fill);
        sha512_block(c->h, c->buf);
        c->fill = 0;
    }
    memset(c->buf + c->fill, 0, 120u - c->fill);
    for (unsigned i = 0; i < 4; i++) {
        c->buf[120 + i] = (uint8_t)(hi >> (24 - 8 * i));
        c->buf[124 + i] = (uint8_t)(bits >> (24 - 8 * i));
    }
    sha512_block(c->h, c->buf);
    for (unsigned i = 0; i < 8; i++)
        for (unsigned j = 0; j < 8; j++)
            out[8 * i + j] = (uint8_t)(c->h[i] >> (56 - 8 * j));
}
