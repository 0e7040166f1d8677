/*
 * P-256 (secp256r1, SEC 2 2.4.2): ECDSA with the RFC 6979 nonce, ECDH and public keys,
 * on the field layer (ecc_fe.h; docs/ecc.md).
 *
 * Points are projective (X : Y : Z), x = X/Z, y = Y/Z, coordinates in Montgomery form,
 * with the complete addition and doubling formulas of Renes, Costello and Batina
 * ("Complete addition formulas for prime order elliptic curves", EUROCRYPT 2016,
 * Algorithms 4 and 6 for a = -3): one sequence of operations for every pair of points,
 * the point at infinity (0 : 1 : 0) and doubling included, so no branch is needed on
 * any value. Addition: 12 MONTMULs + 2 by b + 29 MODADD/MODSUB; doubling: 11 + 2 + 21.
 *
 * Scalar multiplication by a secret: for the base point G (d G, k G) a comb of 4 teeth
 * 64 bits apart (Lim and Lee, CRYPTO '94) over a table of the 16 sums of 2^(64 j) G in
 * flash (ecc_consts.h): 64 columns of one doubling and one addition; for another point
 * (d Q, ECDH) 4-bit fixed windows, left to right, table T[i] = i Q for i = 0..15 (T[0]
 * the point at infinity) built in SRAM, 4 doublings and one addition per window. Either
 * way every entry of the table is read under a mask for each column or window
 * (fe_table_select), whatever its value. Verification (public scalars u1, u2): Straus'
 * interleaving, one table for G and one for Q, entries fetched directly.
 */
#include "libc_min.h"
#include "ecc.h"
#include "ecc_fe.h"
#include "ecc_consts.h"
#include "sha2.h"
#include "trng.h"

/* Slots (ecc_fe.h): constants, then the working set. */
enum {
    S_P, S_N, S_ONE, S_RR, S_UNIT, S_ZERO, S_B, S_ONEN, S_RRN,
    S_T0, S_T1, S_T2, S_T3, S_T4,
    S_A, S_A_Y, S_A_Z,          /* accumulator A (x, y, z consecutive) */
    S_B_, S_B_Y, S_B_Z,         /* accumulator B */
    S_Q, S_Q_Y, S_Q_Z,          /* the table entry added */
    S_V0, S_V1, S_V2, S_V3, S_V4,
    S_TAB,                      /* 15 slots for fe_pow */
    S_END = S_TAB + 15
};
_Static_assert(S_END <= FE_SLOTS, "P-256 slots fit in PKA RAM");

#define SL(i) FE_SLOT(i)
#define PT_WORDS 24u            /* a table entry: X, Y, Z */

typedef struct {
    fe_t x, y, z;
} pt;

static pt pt_at(uint32_t slot) { return (pt){SL(slot), SL(slot + 1), SL(slot + 2)}; }

static const uint32_t WORD_ONE[8] = {1};
static const uint32_t WORD_ZERO[8] = {0};

/* The constants into PKA RAM, the field p as modulus. */
static void setup(void)
{
    fe_init();
    fe_set(SL(S_P), P256_P);
    fe_set(SL(S_N), P256_N);
    fe_set(SL(S_ONE), P256_ONE);
    fe_set(SL(S_RR), P256_RR);
    fe_set(SL(S_UNIT), WORD_ONE);
    fe_set(SL(S_ZERO), WORD_ZERO);
    fe_set(SL(S_B), P256_BM);
    fe_set(SL(S_ONEN), P256_ONEN);
    fe_set(SL(S_RRN), P256_RRN);
    fe_modulus(SL(S_P));
}

/* ---- point arithmetic (RCB 2016) ------------------------------------------------------ */

/* o = p + q (Algorithm 4, a = -3); o shares no slot with p or q. */
static void pt_add(pt o, pt p, pt q)
{
    const fe_t t0 = SL(S_T0), t1 = SL(S_T1), t2 = SL(S_T2), t3 = SL(S_T3), t4 = SL(S_T4), b = SL(S_B);
    const fe_t X1 = p.x, Y1 = p.y, Z1 = p.z, X2 = q.x, Y2 = q.y, Z2 = q.z, X3 = o.x, Y3 = o.y, Z3 = o.z;

    fe_mul(t0, X1, X2); fe_mul(t1, Y1, Y2); fe_mul(t2, Z1, Z2);
    fe_add(t3, X1, Y1); fe_add(t4, X2, Y2); fe_mul(t3, t3, t4);
    fe_add(t4, t0, t1); fe_sub(t3, t3, t4); fe_add(t4, Y1, Z1);
    fe_add(X3, Y2, Z2); fe_mul(t4, t4, X3); fe_add(X3, t1, t2);
    fe_sub(t4, t4, X3); fe_add(X3, X1, Z1); fe_add(Y3, X2, Z2);
    fe_mul(X3, X3, Y3); fe_add(Y3, t0, t2); fe_sub(Y3, X3, Y3);
    fe_mul(Z3, b, t2);  fe_sub(X3, Y3, Z3); fe_add(Z3, X3, X3);
    fe_add(X3, X3, Z3); fe_sub(Z3, t1, X3); fe_add(X3, t1, X3);
    fe_mul(Y3, b, Y3);  fe_add(t1, t2, t2); fe_add(t2, t1, t2);
    fe_sub(Y3, Y3, t2); fe_sub(Y3, Y3, t0); fe_add(t1, Y3, Y3);
    fe_add(Y3, t1, Y3); fe_add(t1, t0, t0); fe_add(t0, t1, t0);
    fe_sub(t0, t0, t2); fe_mul(t1, t4, Y3); fe_mul(t2, t0, Y3);
    fe_mul(Y3, X3, Z3); fe_add(Y3, Y3, t2); fe_mul(X3, t3, X3);
    fe_sub(X3, X3, t1); fe_mul(Z3, t4, Z3); fe_mul(t1, t3, t0);
    fe_add(Z3, Z3, t1);
}

/* o = 2 p (Algorithm 6, a = -3); o shares no slot with p. */
static void pt_dbl(pt o, pt p)
{
    const fe_t t0 = SL(S_T0), t1 = SL(S_T1), t2 = SL(S_T2), t3 = SL(S_T3), b = SL(S_B);
    const fe_t X = p.x, Y = p.y, Z = p.z, X3 = o.x, Y3 = o.y, Z3 = o.z;

    fe_mul(t0, X, X);   fe_mul(t1, Y, Y);   fe_mul(t2, Z, Z);
    fe_mul(t3, X, Y);   fe_add(t3, t3, t3); fe_mul(Z3, X, Z);
    fe_add(Z3, Z3, Z3); fe_mul(Y3, b, t2);  fe_sub(Y3, Y3, Z3);
    fe_add(X3, Y3, Y3); fe_add(Y3, X3, Y3); fe_sub(X3, t1, Y3);
    fe_add(Y3, t1, Y3); fe_mul(Y3, X3, Y3); fe_mul(X3, X3, t3);
    fe_add(t3, t2, t2); fe_add(t2, t2, t3); fe_mul(Z3, b, Z3);
    fe_sub(Z3, Z3, t2); fe_sub(Z3, Z3, t0); fe_add(t3, Z3, Z3);
    fe_add(Z3, Z3, t3); fe_add(t3, t0, t0); fe_add(t0, t3, t0);
    fe_sub(t0, t0, t2); fe_mul(t0, t0, Z3); fe_add(Y3, Y3, t0);
    fe_mul(t0, Y, Z);   fe_add(t0, t0, t0); fe_mul(Z3, t0, Z3);
    fe_sub(X3, X3, Z3); fe_mul(Z3, t0, t1); fe_add(Z3, Z3, Z3);
    fe_add(Z3, Z3, Z3);
}

/* The table T[i] = i P, i = 0..15, of the affine point (px, py) (Montgomery form) into
 * tab: T[0] = (0 : 1 : 0), T[1] = (px : py : 1), T[i] = T[i-1] + T[1]. */
static void build_table(uint32_t *tab, fe_t px, fe_t py)
{
    pt a = pt_at(S_A), b = pt_at(S_B_), q = pt_at(S_Q);

    fe_copy(q.x, SL(S_ZERO));
    fe_copy(q.y, SL(S_ONE));
    fe_copy(q.z, SL(S_ZERO));
    fe_table_store(tab, PT_WORDS, 0, q.x);
    fe_copy(q.x, px);
    fe_copy(q.y, py);
    fe_copy(q.z, SL(S_ONE));
    fe_table_store(tab, PT_WORDS, 1, q.x);
    pt_dbl(a, q);
    fe_table_store(tab, PT_WORDS, 2, a.x);
    for (uint32_t i = 3; i < 16; i++) {
        pt_add(b, a, q);
        fe_table_store(tab, PT_WORDS, i, b.x);
        pt t = a;
        a = b;
        b = t;
    }
}

static uint32_t window(const uint32_t k[8], uint32_t w) { return (k[w / 8u] >> (4u * (w % 8u))) & 15u; }

/*
 * k P (P the affine point (px, py), Montgomery form) for a secret k (8 words): the same
 * operations, SRAM addresses and PKA operations for every k. Returns the accumulator
 * holding the projective result.
 */
static pt mul_ct(const uint32_t k[8], fe_t px, fe_t py)
{
    pt cur = pt_at(S_A), nxt = pt_at(S_B_), q = pt_at(S_Q);

    build_table(fe_table, px, py);
    fe_table_select(fe_table, PT_WORDS, window(k, 63), cur.x);
    for (int w = 62; w >= 0; w--) {
        for (int i = 0; i < 4; i++) {
            pt_dbl(nxt, cur);
            pt t = cur;
            cur = nxt;
            nxt = t;
        }
        fe_table_select(fe_table, PT_WORDS, window(k, (uint32_t)w), q.x);
        pt_add(nxt, cur, q);
        pt t = cur;
        cur = nxt;
        nxt = t;
    }
    return cur;
}

/* The comb column col of k: bit 64 j + col of k as bit j, j = 0..3. */
static uint32_t comb_index(const uint32_t k[8], uint32_t col)
{
    uint32_t w = col / 32u, b = col % 32u;

    return ((k[w] >> b) & 1u) | ((k[2u + w] >> b) & 1u) << 1 | ((k[4u + w] >> b) & 1u) << 2 |
           ((k[6u + w] >> b) & 1u) << 3;
}

/* k G for a secret k (8 words), by the comb: the same operations, addresses and PKA
 * operations for every k. Returns the accumulator holding the projective result. */
static pt mul_base_ct(const uint32_t k[8])
{
    pt cur = pt_at(S_A), nxt = pt_at(S_B_), q = pt_at(S_Q);

    fe_table_select(&P256_COMB[0][0], PT_WORDS, comb_index(k, 63), cur.x);
    for (int col = 62; col >= 0; col--) {
        pt_dbl(nxt, cur);
        fe_table_select(&P256_COMB[0][0], PT_WORDS, comb_index(k, (uint32_t)col), q.x);
        pt_add(cur, nxt, q);
    }
    return cur;
}

#if !ECC_CARD
/* u1 G + u2 Q for public u1, u2 (Straus: shared doublings, windows of 4 bits), Q the
 * affine point (qx, qy). */
static pt mul2_public(const uint32_t u1[8], const uint32_t u2[8], fe_t qx, fe_t qy)
{
    uint32_t *tg = fe_table, *tq = fe_table + FE_TABLE_ENTRIES * PT_WORDS;
    pt cur = pt_at(S_A), nxt = pt_at(S_B_), q = pt_at(S_Q);

    build_table(tq, qx, qy);
    fe_set(SL(S_V0), P256_GXM);
    fe_set(SL(S_V1), P256_GYM);
    build_table(tg, SL(S_V0), SL(S_V1));
    fe_table_load(tg, PT_WORDS, 0, cur.x);
    for (int w = 63; w >= 0; w--) {
        if (w != 63) {
            for (int i = 0; i < 4; i++) {
                pt_dbl(nxt, cur);
                pt t = cur;
                cur = nxt;
                nxt = t;
            }
        }
        uint32_t d1 = window(u1, (uint32_t)w), d2 = window(u2, (uint32_t)w);
        if (d1) {
            fe_table_load(tg, PT_WORDS, d1, q.x);
            pt_add(nxt, cur, q);
            pt t = cur;
            cur = nxt;
            nxt = t;
        }
        if (d2) {
            fe_table_load(tq, PT_WORDS, d2, q.x);
            pt_add(nxt, cur, q);
            pt t = cur;
            cur = nxt;
            nxt = t;
        }
    }
    return cur;
}

#endif

/* The affine coordinates of p, in normal form, into x and y (8 words each); returns
 * the all-ones mask when p is the point at infinity (Z = 0), zero otherwise. */
static uint32_t to_affine(pt p, uint32_t x[8], uint32_t y[8])
{
    uint32_t z[8];

    fe_get(z, p.z);
    uint32_t inf = words_is_zero(z);
    fe_pow(SL(S_V0), p.z, P256_PM2, SL(S_ONE), SL(S_TAB));     /* Z^-1 R */
    fe_mul(SL(S_V0), SL(S_V0), SL(S_UNIT));                    /* Z^-1 */
    fe_mul(SL(S_V1), p.x, SL(S_V0));                           /* x */
    fe_mul(SL(S_V2), p.y, SL(S_V0));                           /* y */
    fe_get(x, SL(S_V1));
    fe_get(y, SL(S_V2));
    return inf;
}

/* A public point (0x04 || x || y) into slots (Montgomery form), checked: the
 * uncompressed form, x, y < p, y^2 = x^3 - 3x + b. 0 or ECC_ERR_POINT / _INFINITY. */
static int load_point(const uint8_t pub[65], fe_t mx, fe_t my)
{
    uint32_t x[8], y[8];

    if (pub[0] == 0x00)
        return ECC_ERR_INFINITY;        /* SEC 1 2.3.3: the single byte 00 is the point at infinity */
    if (pub[0] != 0x04)
        return ECC_ERR_POINT;
    words_from_be(x, pub + 1);
    words_from_be(y, pub + 33);
    if (!words_lt(x, P256_P) || !words_lt(y, P256_P))
        return ECC_ERR_POINT;
    fe_set(mx, x);
    fe_set(my, y);
    fe_mul(mx, mx, SL(S_RR));
    fe_mul(my, my, SL(S_RR));
    const fe_t t = SL(S_T0), u = SL(S_T1);
    fe_mul(t, mx, mx);                  /* x^2 */
    fe_mul(t, t, mx);                   /* x^3 */
    fe_sub(t, t, mx);
    fe_sub(t, t, mx);
    fe_sub(t, t, mx);                   /* x^3 - 3x */
    fe_add(t, t, SL(S_B));              /* + b */
    fe_mul(u, my, my);                  /* y^2 */
    if (!fe_equal(t, u))
        return ECC_ERR_POINT;
    return fe_errors();
}

/* 1 <= d <= n - 1, constant time; returns the all-ones mask when it holds. */
static uint32_t scalar_ok(const uint32_t d[8])
{
    return words_lt(d, P256_N) & ~words_is_zero(d);
}

static void encode_point(uint8_t pub[65], const uint32_t x[8], const uint32_t y[8])
{
    pub[0] = 0x04;
    words_to_be(pub + 1, x);
    words_to_be(pub + 33, y);
}

int p256_public_key(const uint8_t d_be[32], uint8_t pub[65])
{
    uint32_t d[8], x[8], y[8];

    words_from_be(d, d_be);
    if (!scalar_ok(d))
        return ECC_ERR_KEY;
    setup();
    to_affine(mul_base_ct(d), x, y);
    int err = fe_errors();
    if (err)
        return err;
    encode_point(pub, x, y);
    return ECC_OK;
}

int p256_keygen(uint8_t d_be[32], uint8_t pub[65])
{
    uint32_t d[8];

    trng_init();
    do {    /* a candidate outside [1, n - 1] (probability below 2^-32) is drawn again */
        int rc = trng_read(d_be, 32);
        if (rc != TRNG_OK)
            return rc;
        words_from_be(d, d_be);
    } while (!scalar_ok(d));
    return p256_public_key(d_be, pub);
}

int p256_ecdh(const uint8_t d_be[32], const uint8_t peer[65], uint8_t secret[32])
{
    uint32_t d[8], x[8], y[8];

    words_from_be(d, d_be);
    if (!scalar_ok(d))
        return ECC_ERR_KEY;
    setup();
    int err = load_point(peer, SL(S_V3), SL(S_V4));
    if (err)
        return err;
    pt r = mul_ct(d, SL(S_V3), SL(S_V4));
    uint32_t inf = to_affine(r, x, y);
    err = fe_errors();
    if (err)
        return err;
    if (inf)
        return ECC_ERR_INFINITY;        /* impossible for a point of the curve (prime order) */
    words_to_be(secret, x);
    return ECC_OK;
}

/* x mod n for x < 2^256 (< 2n): one masked subtraction. */
static void reduce_n(uint32_t x[8])
{
    words_csub(x, P256_N, ~words_lt(x, P256_N));
}

/* HMAC_K(V || [sep || x || h]) into out (RFC 6979 3.2: sep absent when sep < 0). */
static void hmac_vx(uint8_t out[32], const uint8_t K[32], const uint8_t V[32], int sep,
                    const uint8_t x[32], const uint8_t h[32])
{
    hmac256_ctx c;

    hmac256_init(&c, K, 32);
    hmac256_update(&c, V, 32);
    if (sep >= 0) {
        uint8_t s = (uint8_t)sep;
        hmac256_update(&c, &s, 1);
        if (x) {
            hmac256_update(&c, x, 32);
            hmac256_update(&c, h, 32);
        }
    }
    hmac256_final(&c, out);
}

int p256_sign(const uint8_t d_be[32], const uint8_t h_be[32], uint8_t sig[64])
{
    uint32_t d[8], e[8], k[8], x[8], y[8], r[8], s[8];
    uint8_t V[32], K[32], ho[32];

    words_from_be(d, d_be);
    if (!scalar_ok(d))
        return ECC_ERR_KEY;
    /* e = bits2int(H(m)) mod n (qlen = hlen = 256), which is also bits2octets's value */
    words_from_be(e, h_be);
    reduce_n(e);
    words_to_be(ho, e);
    /* RFC 6979 3.2 steps b-f */
    memset(V, 0x01, 32);
    memset(K, 0x00, 32);
    hmac_vx(K, K, V, 0x00, d_be, ho);
    hmac_vx(V, K, V, -1, 0, 0);
    hmac_vx(K, K, V, 0x01, d_be, ho);
    hmac_vx(V, K, V, -1, 0, 0);
    setup();
    for (;;) {
        /* step h: k = bits2int(V) until 1 <= k <= n - 1 (and r, s nonzero). Each test is
         * computed in constant time; a retry happens with probability below 2^-32. */
        hmac_vx(V, K, V, -1, 0, 0);
        words_from_be(k, V);
        if (scalar_ok(k)) {
            fe_modulus(SL(S_P));
            to_affine(mul_base_ct(k), x, y);
            memcpy(r, x, sizeof r);
            reduce_n(r);
            /* s = k^-1 (e + r d) mod n, on the PKA with the modulus n */
            fe_modulus(SL(S_N));
            fe_set(SL(S_V0), k);
            fe_set(SL(S_V1), r);
            fe_set(SL(S_V2), d);
            fe_set(SL(S_V3), e);
            fe_mul(SL(S_V0), SL(S_V0), SL(S_RRN));                    /* k R */
            fe_pow(SL(S_V4), SL(S_V0), P256_NM2, SL(S_ONEN), SL(S_TAB)); /* k^-1 R */
            fe_mul(SL(S_V1), SL(S_V1), SL(S_RRN));                    /* r R */
            fe_mul(SL(S_V2), SL(S_V1), SL(S_V2));                     /* r d */
            fe_add(SL(S_V2), SL(S_V3), SL(S_V2));                     /* e + r d */
            fe_mul(SL(S_V2), SL(S_V4), SL(S_V2));                     /* k^-1 (e + r d) */
            fe_get(s, SL(S_V2));
            int err = fe_errors();
            if (err)
                return err;
            if (!words_is_zero(r) && !words_is_zero(s))
                break;
        }
        uint8_t K2[32];
        hmac_vx(K2, K, V, 0x00, 0, 0);
        memcpy(K, K2, 32);
        hmac_vx(V, K, V, -1, 0, 0);
    }
    words_to_be(sig, r);
    words_to_be(sig + 32, s);
    return ECC_OK;
}

#if !ECC_CARD
int p256_verify(const uint8_t pub[65], const uint8_t h_be[32], const uint8_t sig[64])
{
    uint32_t e[8], r[8], s[8], u1[8], u2[8], x[8], y[8];

    words_from_be(r, sig);
    words_from_be(s, sig + 32);
    if (!scalar_ok(r) || !scalar_ok(s))
        return ECC_ERR_RANGE;
    words_from_be(e, h_be);
    reduce_n(e);
    setup();
    int err = load_point(pub, SL(S_V3), SL(S_V4));
    if (err)
        return err;
    /* w = s^-1 mod n; u1 = e w, u2 = r w */
    fe_modulus(SL(S_N));
    fe_set(SL(S_V0), s);
    fe_set(SL(S_V1), e);
    fe_set(SL(S_V2), r);
    fe_mul(SL(S_V0), SL(S_V0), SL(S_RRN));
    fe_pow(SL(S_Q), SL(S_V0), P256_NM2, SL(S_ONEN), SL(S_TAB));   /* s^-1 R */
    fe_mul(SL(S_V1), SL(S_Q), SL(S_V1));
    fe_mul(SL(S_V2), SL(S_Q), SL(S_V2));
    fe_get(u1, SL(S_V1));
    fe_get(u2, SL(S_V2));
    fe_modulus(SL(S_P));
    pt X = mul2_public(u1, u2, SL(S_V3), SL(S_V4));
    uint32_t inf = to_affine(X, x, y);
    err = fe_errors();
    if (err)
        return err;
    if (inf)
        return ECC_ERR_SIGNATURE;
    reduce_n(x);
    for (int i = 0; i < 8; i++)
        if (x[i] != r[i])
            return ECC_ERR_SIGNATURE;
    return ECC_OK;
}
#endif
