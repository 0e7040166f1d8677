/*
 * Curve25519 on the field layer (ecc_fe.h; docs/ecc.md): X25519 (RFC 7748) and Ed25519
 * (RFC 8032 section 5.1), field p = 2^255 - 19 and group order L.
 *
 * X25519: the Montgomery ladder of RFC 7748 section 5, 255 steps of 10 MONTMULs and 8
 * MODADD/MODSUB, the conditional swap done by the CPU on the four coordinates under a
 * mask (fe_cswap: every word of both slots read and written whatever the bit).
 *
 * Ed25519: extended coordinates (X : Y : Z : T), x = X/Z, y = Y/Z, xy = T/Z, with the
 * complete formulas of Hisil, Wong, Carter and Dawson ("Twisted Edwards curves
 * revisited", ASIACRYPT 2008; add-2008-hwcd-3 and dbl-2008-hwcd for a = -1 in the
 * Explicit-Formulas Database): addition 9 MONTMULs, doubling 8, and the mixed addition
 * (madd-2008-hwcd-3) of an affine point in the form (y + x, y - x, 2 d x y): 7. A secret
 * scalar (the key a, the nonce r) multiplies B by a comb of 4 teeth 64 bits apart (Lim
 * and Lee) over the 16 sums of 2^(64 j) B in flash (ecc_consts.h), every entry read
 * under a mask for each of the 64 columns; verification uses Straus' interleaving with
 * public digits. Scalars modulo L are reduced on the PKA with L as the modulus: a 512-bit hash
 * as four 128-bit pieces, each below L, times 2^(128 i) R mod L.
 */
#include "libc_min.h"
#include "ecc.h"
#include "ecc_fe.h"
#include "ecc_consts.h"
#include "sha2.h"
#include "trng.h"

enum {
    S_P, S_L, S_ONE, S_RR, S_UNIT, S_ZERO, S_A24, S_D2, S_D, S_SQRTM1, S_ONEL, S_RRL, S_LK1, S_LK2, S_LK3,
    S_T0, S_T1, S_T2, S_T3, S_T4, S_T5,
    /* X25519's ladder */
    S_X1, S_X2, S_Z2, S_X3, S_Z3,
    /* Ed25519: accumulator (X, Y, Z, T consecutive), the table entry added, a point */
    S_ACC, S_ACC_Y, S_ACC_Z, S_ACC_T,
    S_Q, S_Q_Y, S_Q_Z, S_Q_T,
    S_PT, S_PT_Y, S_PT_Z, S_PT_T,
    S_V0, S_V1, S_V2, S_V3, S_V4,
    S_TAB,
    S_END = S_TAB + 15
};
_Static_assert(S_END <= FE_SLOTS, "Curve25519 slots fit in PKA RAM");

#define SL(i) FE_SLOT(i)
#define EPT_WORDS 32u

static const uint32_t WORD_ONE[8] = {1};
static const uint32_t WORD_ZERO[8] = {0};

static void setup(void)
{
    fe_init();
    fe_set(SL(S_P), F25519_P);
    fe_set(SL(S_L), ED_L);
    fe_set(SL(S_ONE), F25519_ONE);
    fe_set(SL(S_RR), F25519_RR);
    fe_set(SL(S_UNIT), WORD_ONE);
    fe_set(SL(S_ZERO), WORD_ZERO);
    fe_set(SL(S_A24), F25519_A24);
    fe_modulus(SL(S_P));
}

static void setup_ed(void)
{
    setup();
    fe_set(SL(S_D2), ED_D2M);
    fe_set(SL(S_D), ED_DM);
    fe_set(SL(S_SQRTM1), ED_SQRTM1);
    fe_set(SL(S_ONEL), ED_ONEL);
    fe_set(SL(S_RRL), ED_RRL);
    fe_set(SL(S_LK1), ED_LK1);
    fe_set(SL(S_LK2), ED_LK2);
    fe_set(SL(S_LK3), ED_LK3);
}

/* x (Montgomery form) into 32 little-endian bytes of its normal form. */
static void get_normal_le(uint8_t out[32], fe_t x)
{
    fe_mul(SL(S_T5), x, SL(S_UNIT));
    fe_get_le(out, SL(S_T5));
}

/* ---- X25519 ---------------------------------------------------------------------- */

int x25519(const uint8_t k_in[32], const uint8_t u_in[32], uint8_t out[32])
{
    uint8_t k[32];
    uint32_t u[8];
    const fe_t x1 = SL(S_X1), x2 = SL(S_X2), z2 = SL(S_Z2), x3 = SL(S_X3), z3 = SL(S_Z3);
    const fe_t A = SL(S_T0), B = SL(S_T1), C = SL(S_T2), D = SL(S_T3), DA = SL(S_T4), CB = SL(S_T5);

    /* RFC 7748 section 5: decodeScalar25519, decodeUCoordinate (the top bit masked,
     * a non-canonical u in [p, 2^255) reduced) */
    memcpy(k, k_in, 32);
    k[0] &= 248;
    k[31] &= 127;
    k[31] |= 64;
    words_from_le(u, u_in);
    u[7] &= 0x7FFFFFFFu;
    words_csub(u, F25519_P, ~words_lt(u, F25519_P));

    setup();
    fe_set(x1, u);
    fe_mul(x1, x1, SL(S_RR));
    fe_copy(x2, SL(S_ONE));
    fe_copy(z2, SL(S_ZERO));
    fe_copy(x3, x1);
    fe_copy(z3, SL(S_ONE));
    uint32_t swap = 0;
    for (int t = 254; t >= 0; t--) {
        uint32_t kt = (k[t >> 3] >> (t & 7)) & 1u;
        swap ^= kt;
        fe_cswap(swap, x2, x3);
        fe_cswap(swap, z2, z3);
        swap = kt;
        fe_add(A, x2, z2);
        fe_sub(B, x2, z2);
        fe_add(C, x3, z3);
        fe_sub(D, x3, z3);
        fe_mul(DA, D, A);
        fe_mul(CB, C, B);
        fe_add(x3, DA, CB);
        fe_sub(z3, DA, CB);
        fe_sqr(x3, x3);
        fe_sqr(z3, z3);
        fe_mul(z3, z3, x1);
        fe_sqr(C, A);               /* AA */
        fe_sqr(D, B);               /* BB */
        fe_mul(x2, C, D);           /* AA BB */
        fe_sub(B, C, D);            /* E = AA - BB */
        fe_mul(z2, B, SL(S_A24));
        fe_add(z2, z2, C);
        fe_mul(z2, z2, B);          /* E (AA + a24 E) */
    }
    fe_cswap(swap, x2, x3);
    fe_cswap(swap, z2, z3);
    fe_pow(SL(S_V0), z2, F25519_PM2, SL(S_ONE), SL(S_TAB));
    fe_mul(x2, x2, SL(S_V0));
    get_normal_le(out, x2);
    int err = fe_errors();
    if (err)
        return err;
    uint32_t acc = 0;
    for (int i = 0; i < 32; i++)
        acc |= out[i];
    return acc == 0 ? ECC_ERR_ZERO : ECC_OK;
}

/* ---- Ed25519 points ---------------------------------------------------------------- */

typedef struct {
    fe_t x, y, z, t;
} ept;

static ept ept_at(uint32_t slot) { return (ept){SL(slot), SL(slot + 1), SL(slot + 2), SL(slot + 3)}; }

#if !ECC_CARD
/* o = p + q (add-2008-hwcd-3, k = 2d); o may be p or q. T3 only when with_t. */
static void ed_add(ept o, ept p, ept q, int with_t)
{
    const fe_t t0 = SL(S_T0), t1 = SL(S_T1), t2 = SL(S_T2), t3 = SL(S_T3), t4 = SL(S_T4);

    fe_sub(t0, p.y, p.x);
    fe_sub(t1, q.y, q.x);
    fe_mul(t0, t0, t1);             /* A = (Y1 - X1)(Y2 - X2) */
    fe_add(t1, p.y, p.x);
    fe_add(t2, q.y, q.x);
    fe_mul(t1, t1, t2);             /* B = (Y1 + X1)(Y2 + X2) */
    fe_mul(t2, p.t, q.t);
    fe_mul(t2, t2, SL(S_D2));       /* C = T1 2d T2 */
    fe_mul(t3, p.z, q.z);
    fe_add(t3, t3, t3);             /* D = 2 Z1 Z2 */
    fe_sub(t4, t1, t0);             /* E = B - A */
    fe_add(t1, t1, t0);             /* H = B + A */
    fe_sub(t0, t3, t2);             /* F = D - C */
    fe_add(t3, t3, t2);             /* G = D + C */
    fe_mul(o.x, t4, t0);            /* X3 = E F */
    fe_mul(o.y, t3, t1);            /* Y3 = G H */
    if (with_t)
        fe_mul(o.t, t4, t1);        /* T3 = E H */
    fe_mul(o.z, t0, t3);            /* Z3 = F G */
}
#endif

/* p = 2 p (dbl-2008-hwcd, a = -1). T3 only when with_t (doubling does not read T). */
static void ed_dbl(ept p, int with_t)
{
    const fe_t t0 = SL(S_T0), t1 = SL(S_T1), t2 = SL(S_T2), t3 = SL(S_T3), t4 = SL(S_T4);

    fe_sqr(t0, p.x);                /* A = X^2 */
    fe_sqr(t1, p.y);                /* B = Y^2 */
    fe_sqr(t2, p.z);
    fe_add(t2, t2, t2);             /* C = 2 Z^2 */
    fe_add(t3, p.x, p.y);
    fe_sqr(t3, t3);
    fe_add(t4, t0, t1);             /* A + B */
    fe_sub(t3, t3, t4);             /* E = (X + Y)^2 - A - B */
    fe_sub(t0, t1, t0);             /* G = -A + B */
    fe_sub(t1, SL(S_ZERO), t4);     /* H = -A - B */
    fe_sub(t2, t0, t2);             /* F = G - C */
    fe_mul(p.x, t3, t2);            /* X3 = E F */
    fe_mul(p.y, t0, t1);            /* Y3 = G H */
    if (with_t)
        fe_mul(p.t, t3, t1);        /* T3 = E H */
    fe_mul(p.z, t2, t0);            /* Z3 = F G */
}

#if !ECC_CARD
/* T[i] = i P (i = 0..15) into tab, P = (px, py) affine in Montgomery form. */
static void ed_table(uint32_t *tab, fe_t px, fe_t py)
{
    ept q = ept_at(S_Q), a = ept_at(S_ACC);

    fe_copy(a.x, SL(S_ZERO));
    fe_copy(a.y, SL(S_ONE));
    fe_copy(a.z, SL(S_ONE));
    fe_copy(a.t, SL(S_ZERO));
    fe_table_store(tab, EPT_WORDS, 0, a.x);
    fe_copy(q.x, px);
    fe_copy(q.y, py);
    fe_copy(q.z, SL(S_ONE));
    fe_mul(q.t, px, py);
    fe_table_store(tab, EPT_WORDS, 1, q.x);
    fe_copy(a.x, q.x);
    fe_copy(a.y, q.y);
    fe_copy(a.z, q.z);
    fe_copy(a.t, q.t);
    for (uint32_t i = 2; i < 16; i++) {
        ed_add(a, a, q, 1);
        fe_table_store(tab, EPT_WORDS, i, a.x);
    }
}

static void base_table(void)
{
    fe_set(SL(S_V0), ED_BXM);
    fe_set(SL(S_V1), ED_BYM);
    ed_table(fe_table, SL(S_V0), SL(S_V1));
}

#endif

#if !ECC_CARD
static uint32_t window(const uint32_t k[8], uint32_t w) { return (k[w / 8u] >> (4u * (w % 8u))) & 15u; }
#endif

/* o = p + q for q = (y + x, y - x, 2 d x y) in q.x, q.y, q.z (madd-2008-hwcd-3, Z2 = 1);
 * o may be p. T3 only when with_t. */
static void ed_madd(ept o, ept p, ept q, int with_t)
{
    const fe_t t0 = SL(S_T0), t1 = SL(S_T1), t2 = SL(S_T2), t3 = SL(S_T3), t4 = SL(S_T4);

    fe_sub(t0, p.y, p.x);
    fe_mul(t0, t0, q.y);            /* A = (Y1 - X1)(y2 - x2) */
    fe_add(t1, p.y, p.x);
    fe_mul(t1, t1, q.x);            /* B = (Y1 + X1)(y2 + x2) */
    fe_mul(t2, p.t, q.z);           /* C = T1 2d t2 */
    fe_add(t3, p.z, p.z);           /* D = 2 Z1 */
    fe_sub(t4, t1, t0);             /* E = B - A */
    fe_add(t1, t1, t0);             /* H = B + A */
    fe_sub(t0, t3, t2);             /* F = D - C */
    fe_add(t3, t3, t2);             /* G = D + C */
    fe_mul(o.x, t4, t0);            /* X3 = E F */
    fe_mul(o.y, t3, t1);            /* Y3 = G H */
    if (with_t)
        fe_mul(o.t, t4, t1);        /* T3 = E H */
    fe_mul(o.z, t0, t3);            /* Z3 = F G */
}

/* The comb column col of k: bit 64 j + col of k as bit j, j = 0..3. */
static uint32_t comb_index(const uint32_t k[8], uint32_t col)
{
    uint32_t w = col / 32u, b = col % 32u;

    return ((k[w] >> b) & 1u) | ((k[2u + w] >> b) & 1u) << 1 | ((k[4u + w] >> b) & 1u) << 2 |
           ((k[6u + w] >> b) & 1u) << 3;
}

/* The accumulator = k B for a secret k (8 words), by the comb: the same operations,
 * addresses and PKA operations for every k. */
static ept mul_base_ct(const uint32_t k[8])
{
    ept acc = ept_at(S_ACC), q = ept_at(S_Q);

    fe_copy(acc.x, SL(S_ZERO));
    fe_copy(acc.y, SL(S_ONE));
    fe_copy(acc.z, SL(S_ONE));
    fe_copy(acc.t, SL(S_ZERO));
    for (int col = 63; col >= 0; col--) {
        if (col != 63)
            ed_dbl(acc, 1);
        fe_table_select(&ED_COMB[0][0], 24, comb_index(k, (uint32_t)col), q.x);
        ed_madd(acc, acc, q, 0);
    }
    return acc;
}

/* p encoded (RFC 8032 5.1.2): y little-endian, bit 255 the low bit of x. */
static void ed_encode(uint8_t out[32], ept p)
{
    uint8_t xb[32];

    fe_pow(SL(S_V4), p.z, F25519_PM2, SL(S_ONE), SL(S_TAB));  /* 1/Z */
    fe_mul(SL(S_V2), p.x, SL(S_V4));
    fe_mul(SL(S_V3), p.y, SL(S_V4));
    get_normal_le(xb, SL(S_V2));
    get_normal_le(out, SL(S_V3));
    out[31] |= (uint8_t)((xb[0] & 1u) << 7);
}

#if !ECC_CARD
/* A public encoded point (RFC 8032 5.1.3) into slots (affine x, y; Montgomery form);
 * 0, or ECC_ERR_ENCODING (y >= p, or x = 0 with the sign bit set) or ECC_ERR_POINT
 * (no square root: not on the curve). */
static int ed_decode(const uint8_t in[32], fe_t px, fe_t py)
{
    uint32_t y[8], x[8];
    const fe_t u = SL(S_T0), v = SL(S_T1), v3 = SL(S_T2), t = SL(S_T3), w = SL(S_T4);
    uint32_t sign = in[31] >> 7;

    words_from_le(y, in);
    y[7] &= 0x7FFFFFFFu;
    if (!words_lt(y, F25519_P))
        return ECC_ERR_ENCODING;
    fe_set(py, y);
    fe_mul(py, py, SL(S_RR));
    fe_sqr(u, py);                          /* y^2 */
    fe_mul(v, u, SL(S_D));
    fe_add(v, v, SL(S_ONE));                /* v = d y^2 + 1 */
    fe_sub(u, u, SL(S_ONE));                /* u = y^2 - 1 */
    fe_sqr(v3, v);
    fe_mul(v3, v3, v);                      /* v^3 */
    fe_sqr(t, v3);
    fe_mul(t, t, v);                        /* v^7 */
    fe_mul(t, t, u);                        /* u v^7 */
    fe_pow(w, t, F25519_PM58, SL(S_ONE), SL(S_TAB));
    fe_mul(w, w, v3);
    fe_mul(px, w, u);                       /* x = u v^3 (u v^7)^((p-5)/8) */
    fe_sqr(t, px);
    fe_mul(t, t, v);                        /* v x^2 */
    if (!fe_equal(t, u)) {
        fe_sub(w, SL(S_ZERO), u);
        if (!fe_equal(t, w))
            return ECC_ERR_POINT;
        fe_mul(px, px, SL(S_SQRTM1));
    }
    fe_mul(t, px, SL(S_UNIT));
    fe_get(x, t);
    if (words_is_zero(x) && sign)
        return ECC_ERR_ENCODING;
    if ((x[0] & 1u) != sign)
        fe_sub(px, SL(S_ZERO), px);
    return fe_errors();
}
#endif

/* The 64-byte little-endian hash h modulo L into slot r (normal form), with L the
 * modulus: the pieces h_i < 2^128 < L times 2^(128 i) R mod L, added. */
static void reduce_l(fe_t r, const uint8_t h[64])
{
    fe_set_le128(r, h);
    fe_set_le128(SL(S_T0), h + 16);
    fe_set_le128(SL(S_T1), h + 32);
    fe_set_le128(SL(S_T2), h + 48);
    fe_mul(SL(S_T0), SL(S_T0), SL(S_LK1));
    fe_mul(SL(S_T1), SL(S_T1), SL(S_LK2));
    fe_mul(SL(S_T2), SL(S_T2), SL(S_LK3));
    fe_add(r, r, SL(S_T0));
    fe_add(r, r, SL(S_T1));
    fe_add(r, r, SL(S_T2));
}

/* The secret scalar a and the prefix from the seed (RFC 8032 5.1.5 steps 1-2). */
static void expand_seed(const uint8_t seed[32], uint8_t h[64], uint32_t a[8])
{
    sha512_ctx c;

    sha512_init(&c);
    sha512_update(&c, seed, 32);
    sha512_final(&c, h);
    h[0] &= 248;
    h[31] &= 127;
    h[31] |= 64;
    words_from_le(a, h);
}

int ed25519_public_key(const uint8_t seed[32], uint8_t pub[32])
{
    uint8_t h[64];
    uint32_t a[8];

    expand_seed(seed, h, a);
    setup_ed();
    ed_encode(pub, mul_base_ct(a));
    return fe_errors();
}

int ed25519_keygen(uint8_t seed[32], uint8_t pub[32])
{
    trng_init();
    int rc = trng_read(seed, 32);
    if (rc != TRNG_OK)
        return rc;
    return ed25519_public_key(seed, pub);
}

int ed25519_sign(const uint8_t seed[32], const uint8_t *msg, uint32_t len, uint8_t sig[64])
{
    uint8_t h[64], pub[32], rh[64];
    uint32_t a[8], r[8];
    sha512_ctx c;

    expand_seed(seed, h, a);
    setup_ed();
    ed_encode(pub, mul_base_ct(a));                 /* A = a B */
    sha512_init(&c);
    sha512_update(&c, h + 32, 32);
    sha512_update(&c, msg, len);
    sha512_final(&c, rh);                           /* SHA-512(prefix || M) */
    fe_modulus(SL(S_L));
    reduce_l(SL(S_V0), rh);                         /* r */
    fe_get(r, SL(S_V0));
    fe_modulus(SL(S_P));
    ed_encode(sig, mul_base_ct(r));                 /* R = r B */
    sha512_init(&c);
    sha512_update(&c, sig, 32);
    sha512_update(&c, pub, 32);
    sha512_update(&c, msg, len);
    sha512_final(&c, rh);                           /* SHA-512(R || A || M) */
    fe_modulus(SL(S_L));
    reduce_l(SL(S_V1), rh);                         /* k */
    fe_set_le128(SL(S_V2), h);                      /* a mod L: a0 + a1 2^128 */
    fe_set_le128(SL(S_V3), h + 16);
    fe_mul(SL(S_V3), SL(S_V3), SL(S_LK1));
    fe_add(SL(S_V2), SL(S_V2), SL(S_V3));
    fe_mul(SL(S_V1), SL(S_V1), SL(S_RRL));          /* k R */
    fe_mul(SL(S_V1), SL(S_V1), SL(S_V2));           /* k a */
    fe_add(SL(S_V1), SL(S_V0), SL(S_V1));           /* S = r + k a mod L */
    fe_get_le(sig + 32, SL(S_V1));
    return fe_errors();
}

#if !ECC_CARD
int ed25519_verify(const uint8_t pub[32], const uint8_t *msg, uint32_t len, const uint8_t sig[64])
{
    uint32_t s[8], k[8];
    uint8_t kh[64], chk[32];
    sha512_ctx c;
    ept acc = ept_at(S_ACC), q = ept_at(S_Q);
    uint32_t *tb = fe_table, *ta = fe_table + FE_TABLE_ENTRIES * EPT_WORDS;

    words_from_le(s, sig + 32);
    if (!words_lt(s, ED_L))
        return ECC_ERR_RANGE;                       /* RFC 8032 5.1.7 step 1: S < L */
    setup_ed();
    int err = ed_decode(pub, SL(S_PT), SL(S_PT_Y));
    if (err)
        return err;
    sha512_init(&c);
    sha512_update(&c, sig, 32);
    sha512_update(&c, pub, 32);
    sha512_update(&c, msg, len);
    sha512_final(&c, kh);
    fe_modulus(SL(S_L));
    reduce_l(SL(S_V0), kh);
    fe_get(k, SL(S_V0));
    fe_modulus(SL(S_P));
    /* S B - k A, compared with R as encoded (RFC 8032 5.1.7 step 3, cofactorless) */
    fe_sub(SL(S_PT), SL(S_ZERO), SL(S_PT));         /* -A */
    ed_table(ta, SL(S_PT), SL(S_PT_Y));
    base_table();
    fe_table_load(tb, EPT_WORDS, 0, acc.x);
    for (int w = 63; w >= 0; w--) {
        if (w != 63) {
            ed_dbl(acc, 0);
            ed_dbl(acc, 0);
            ed_dbl(acc, 0);
            ed_dbl(acc, 1);
        }
        uint32_t d1 = window(s, (uint32_t)w), d2 = window(k, (uint32_t)w);
        if (d1) {
            fe_table_load(tb, EPT_WORDS, d1, q.x);
            ed_add(acc, acc, q, 1);
        }
        if (d2) {
            fe_table_load(ta, EPT_WORDS, d2, q.x);
            ed_add(acc, acc, q, 1);
        }
    }
    ed_encode(chk, acc);
    err = fe_errors();
    if (err)
        return err;
    return memcmp(chk, sig, 32) == 0 ? ECC_OK : ECC_ERR_SIGNATURE;
}
#endif
