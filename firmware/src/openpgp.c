/*
 * OpenPGP card application: the APDU dispatcher and the commands (see openpgp.h).
 *
 * Commands: SELECT (A4), GET DATA (CA), VERIFY (20), PUT DATA (DA; DB with the
 * extended header list for key import), GENERATE ASYMMETRIC KEY PAIR (47: reading the
 * public key, and generating an ECC key on the card from the TRNG), PSO:COMPUTE
 * DIGITAL SIGNATURE (2A 9E9A), PSO:DECIPHER (2A 8086), INTERNAL AUTHENTICATE (88).
 * Each key slot holds RSA-2048/4096 or, by its algorithm attributes (C1-C3), ECDSA
 * P-256, EdDSA Ed25519, ECDH P-256 or ECDH cv25519 (ecc.h). Command chaining (CLA 10) and extended
 * lengths are taken. Errors (ISO 7816-4 5.6): 6700 wrong length, 6A80 bad data
 * (padding included), 6A82 not found, 6A88 no such data object or no key,
 * 6982 PIN not verified, 63Cx wrong PIN with x tries left, 6983 blocked,
 * 6B00 bad P1-P2, 6D00 unknown INS, 6E00 unknown CLA, 6985 conditions not met.
 */
#include <stddef.h>
#include "ccid.h"
#include "ecc.h"
#include "openpgp.h"
#include "trng.h"

/* libc_min.c */
void *memcpy(void *restrict dst, const void *restrict src, size_t n);
void *memmove(void *dst, const void *src, size_t n);
void *memset(void *dst, int c, size_t n);
int memcmp(const void *a, const void *b, size_t n);
#define SW(x) (x)

/* The state a fresh card starts with; the whole object is what a state file holds. */
__attribute__((section(".data.card_state")))
card_state_t card_state = {
    .magic = CARD_MAGIC,
    .pw1 = "123456", .pw1_len = 6,
    .pw3 = "12345678", .pw3_len = 8,
    .pw1_tries = 3, .pw3_tries = 3,
    .pw1_multi = 0,
    .sex = '9',
    .bits = {2048, 2048, 2048},
    .algo = {CARD_ALGO_RSA, CARD_ALGO_RSA, CARD_ALGO_RSA},
};

/* ECC algorithm attributes: the algorithm ID then the curve's OID (OpenPGP card 3.4
 * 4.4.3.10; RFC 6637 and RFC 8410's OIDs as OpenPGP uses them). */
static const uint8_t OID_P256[] = {0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07};
static const uint8_t OID_ED25519[] = {0x2B, 0x06, 0x01, 0x04, 0x01, 0xDA, 0x47, 0x0F, 0x01};
static const uint8_t OID_CV25519[] = {0x2B, 0x06, 0x01, 0x04, 0x01, 0x97, 0x55, 0x01, 0x05, 0x01};
#define ALGO_ID_ECDH  0x12u
#define ALGO_ID_ECDSA 0x13u
#define ALGO_ID_EDDSA 0x16u

static uint32_t pub_len(uint32_t algo)
{
    return algo == CARD_ALGO_P256 ? 65u : 32u;
}

volatile uint32_t card_cmd_cycles;
volatile uint32_t card_cmd_count;

/* Verification state: not kept across a power cycle. */
static uint8_t pw1_sign_ok, pw1_other_ok, pw3_ok, selected;

static const uint8_t aid[16] = {0xD2, 0x76, 0x00, 0x01, 0x24, 0x01, 0x03, 0x04, 0xFF, 0x00,
                                0x00, 0x00, 0x00, 0x01, 0x00, 0x00};
/* Historical bytes: category 00, card service data 31 C5, capabilities 73 C0 01 C0
 * (command chaining and extended Lc/Le), status 05 90 00. */
static const uint8_t hist[10] = {0x00, 0x31, 0xC5, 0x73, 0xC0, 0x01, 0xC0, 0x05, 0x90, 0x00};
const uint8_t card_atr[] = {0x3B, 0xDA, 0x18, 0xFF, 0x81, 0xB1, 0xFE, 0x75, 0x1F, 0x03,
                            0x00, 0x31, 0xC5, 0x73, 0xC0, 0x01, 0xC0, 0x05, 0x90, 0x00, 0x89};  /* TCK: T0..TCK XOR to 0 */
const uint32_t card_atr_len = sizeof card_atr;

static uint8_t chain[1600];     /* command chaining: the data so far */
static uint32_t chain_len;
static uint8_t work_in[512], work_out[512];

/* ---- Output ------------------------------------------------------------------ */
typedef struct {
    uint8_t *p;
    uint32_t n, max;
} out_t;

static void put(out_t *o, const uint8_t *d, uint32_t n)
{
    for (uint32_t i = 0; i < n && o->n < o->max; i++)
        o->p[o->n++] = d[i];
}

static void put1(out_t *o, uint32_t b)
{
    if (o->n < o->max)
        o->p[o->n++] = (uint8_t)b;
}

static void put_tag(out_t *o, uint32_t tag)
{
    if (tag > 0xFF)
        put1(o, tag >> 8);
    put1(o, tag);
}

static void put_len(out_t *o, uint32_t n)
{
    if (n < 0x80) {
        put1(o, n);
    } else if (n < 0x100) {
        put1(o, 0x81);
        put1(o, n);
    } else {
        put1(o, 0x82);
        put1(o, n >> 8);
        put1(o, n);
    }
}

static void put_tlv(out_t *o, uint32_t tag, const uint8_t *d, uint32_t n)
{
    put_tag(o, tag);
    put_len(o, n);
    put(o, d, n);
}

/* A constructed DO: its length is known once its contents are written; leave room
 * for a 3-byte length (82 xx xx) and move the contents down if less was needed. */
static uint32_t open_tlv(out_t *o, uint32_t tag)
{
    put_tag(o, tag);
    uint32_t at = o->n;
    o->n += 3;
    return at;
}

static void close_tlv(out_t *o, uint32_t at)
{
    uint32_t len = o->n - at - 3;
    uint32_t hdr = len < 0x80 ? 1u : len < 0x100 ? 2u : 3u;
    uint8_t *p = o->p + at;
    if (hdr != 3)
        memmove(p + hdr, p + 3, len);
    if (hdr == 1) {
        p[0] = (uint8_t)len;
    } else if (hdr == 2) {
        p[0] = 0x81;
        p[1] = (uint8_t)len;
    } else {
        p[0] = 0x82;
        p[1] = (uint8_t)(len >> 8);
        p[2] = (uint8_t)len;
    }
    o->n = at + hdr + len;
}

/* ---- Data objects ----------------------------------------------------------- */
static void put_algo(out_t *o, int slot)
{
    uint32_t algo = card_state.algo[slot];
    uint8_t a[16];
    uint32_t n;
    const uint8_t *oid = 0;
    uint32_t oid_len = 0;

    if (algo == CARD_ALGO_RSA) {
        uint32_t bits = card_state.bits[slot];
        /* RSA, modulus bits, 32-bit e, import format 02: CRT (p, q, 1/q mod p, dp, dq) */
        const uint8_t r[6] = {0x01, (uint8_t)(bits >> 8), (uint8_t)bits, 0x00, 0x20, 0x02};
        put_tlv(o, 0xC1 + slot, r, 6);
        return;
    }
    if (algo == CARD_ALGO_P256) {
        a[0] = slot == 1 ? ALGO_ID_ECDH : ALGO_ID_ECDSA;
        oid = OID_P256;
        oid_len = sizeof OID_P256;
    } else if (algo == CARD_ALGO_ED25519) {
        a[0] = ALGO_ID_EDDSA;
        oid = OID_ED25519;
        oid_len = sizeof OID_ED25519;
    } else {
        a[0] = ALGO_ID_ECDH;
        oid = OID_CV25519;
        oid_len = sizeof OID_CV25519;
    }
    memcpy(a + 1, oid, oid_len);
    n = 1 + oid_len;
    put_tlv(o, 0xC1 + slot, a, n);
}

static void put_pw_status(out_t *o, int tagged)
{
    const uint8_t s[7] = {card_state.pw1_multi, 0x7F, 0x7F, 0x7F, card_state.pw1_tries, 0x00,
                          card_state.pw3_tries};
    if (tagged)
        put_tlv(o, 0xC4, s, 7);
    else
        put(o, s, 7);
}

static void put_app_data(out_t *o)
{
    uint32_t at = open_tlv(o, 0x6E);
    put_tlv(o, 0x4F, aid, 16);
    put_tlv(o, 0x5F52, hist, 10);
    static const uint8_t ext_len[8] = {0x02, 0x02, 0x06, 0x00, 0x02, 0x02, 0x06, 0x00};
    put_tlv(o, 0x7F66, ext_len, 8);
    uint32_t at73 = open_tlv(o, 0x73);
    /* Extended capabilities: key import, PW1 status changeable, algorithm attributes
     * changeable; no SM, no GET CHALLENGE; max special DO 255. */
    static const uint8_t caps[10] = {0x34, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xFF, 0x00, 0x00};
    put_tlv(o, 0xC0, caps, 10);
    for (int k = 0; k < 3; k++)
        put_algo(o, k);
    put_pw_status(o, 1);
    put_tlv(o, 0xC5, &card_state.fpr[0][0], 60);
    put_tlv(o, 0xC6, &card_state.cafpr[0][0], 60);
    put_tlv(o, 0xCD, &card_state.gentime[0][0], 12);
    const uint8_t info[6] = {1, card_state.present[0], 2, card_state.present[1], 3, card_state.present[2]};
    put_tlv(o, 0xDE, info, 6);
    close_tlv(o, at73);
    close_tlv(o, at);
}

static uint32_t get_data(uint32_t tag, out_t *o)
{
    switch (tag) {
    case 0x004F: put(o, aid, 16); break;
    case 0x5F52: put(o, hist, 10); break;
    case 0x006E: put_app_data(o); break;
    case 0x0065: {
        uint32_t at = open_tlv(o, 0x65);
        put_tlv(o, 0x5B, card_state.name, card_state.name_len);
        put_tlv(o, 0x5F2D, card_state.lang, card_state.lang_len);
        put_tlv(o, 0x5F35, &card_state.sex, 1);
        close_tlv(o, at);
        break;
    }
    case 0x005E: break;                                 /* login data: empty */
    case 0x5F50: put(o, card_state.url, card_state.url_len); break;
    case 0x007A: {
        uint32_t at = open_tlv(o, 0x7A);
        const uint8_t c[3] = {(uint8_t)(card_state.sig_count >> 16), (uint8_t)(card_state.sig_count >> 8),
                              (uint8_t)card_state.sig_count};
        put_tlv(o, 0x93, c, 3);
        close_tlv(o, at);
        break;
    }
    case 0x00C4: put_pw_status(o, 0); break;
    case 0x7F21: break;                                 /* cardholder certificate: empty */
    case 0x00C5: put(o, &card_state.fpr[0][0], 60); break;
    case 0x00CD: put(o, &card_state.gentime[0][0], 12); break;
    case 0x00C1: case 0x00C2: case 0x00C3: {
        out_t t = {work_out, 0, sizeof work_out};
        put_algo(&t, (int)(tag - 0xC1));
        put(o, work_out + 2, work_out[1]);
        break;
    }
    case 0x7F74: { static const uint8_t gf[3] = {0x81, 0x01, 0x20}; put(o, gf, 3); break; }
    default: return SW(0x6A88);
    }
    return SW(0x9000);
}

/* ---- TLV input ------------------------------------------------------------- */
static int read_tag(const uint8_t **p, const uint8_t *end, uint32_t *tag)
{
    if (*p >= end)
        return 0;
    uint32_t t = *(*p)++;
    if ((t & 0x1F) == 0x1F) {
        if (*p >= end)
            return 0;
        t = t << 8 | *(*p)++;
    }
    *tag = t;
    return 1;
}

static int read_len(const uint8_t **p, const uint8_t *end, uint32_t *len)
{
    if (*p >= end)
        return 0;
    uint32_t b = *(*p)++;
    if (b < 0x80) {
        *len = b;
    } else if (b == 0x81 && *p < end) {
        *len = *(*p)++;
    } else if (b == 0x82 && *p + 1 < end) {
        *len = (uint32_t)(*p)[0] << 8 | (*p)[1];
        *p += 2;
    } else {
        return 0;
    }
    return 1;
}

/* A big-endian value into rsa_key_t's form: right-aligned in the first n bytes. */
static int store_be(uint8_t *dst, uint32_t n, const uint8_t *v, uint32_t len)
{
    while (len > n && *v == 0) {
        v++;
        len--;
    }
    if (len > n)
        return 0;
    memset(dst, 0, n);
    memcpy(dst + n - len, v, len);
    return 1;
}

/* The public key of an ECC private key in ec_priv[slot], into ec_pub[slot]. */
static int ec_derive_public(int slot)
{
    uint32_t algo = card_state.algo[slot];
    uint8_t *priv = card_state.ec_priv[slot], *pub = card_state.ec_pub[slot];

    if (algo == CARD_ALGO_P256)
        return p256_public_key(priv, pub);
    if (algo == CARD_ALGO_ED25519)
        return ed25519_public_key(priv, pub);
    static const uint8_t nine[32] = {9};
    return x25519(priv, nine, pub);
}

/*
 * An ECC key from the extended header list (OpenPGP card 3.4 4.4.3.12): the template
 * 7F48 names the private key (92) and optionally the public key (99); 5F48 holds
 * them in that order. The private key is what gpg sends: the P-256 scalar d
 * big-endian (left-padded to 32 bytes), the Ed25519 secret key (32 bytes), the
 * cv25519 secret as OpenPGP stores it, big-endian (the RFC 7748 scalar reversed). The
 * public key is computed on the card and the 99 value, if any, is not trusted.
 */
static uint32_t ec_key_import(int slot, const uint8_t *tp, const uint8_t *tend, const uint8_t *v,
                              const uint8_t *vend)
{
    uint8_t priv[32];
    int have = 0;

    while (tp < tend) {
        uint32_t et, el;
        if (!read_tag(&tp, tend, &et) || !read_len(&tp, tend, &el) || v + el > vend)
            return SW(0x6A80);
        if (et == 0x92) {
            const uint8_t *k = v;
            uint32_t kl = el;
            while (kl > 32 && *k == 0) {
                k++;
                kl--;
            }
            if (kl > 32 || kl == 0)
                return SW(0x6A80);
            if (card_state.algo[slot] == CARD_ALGO_ED25519 && kl != 32)
                return SW(0x6A80);
            memset(priv, 0, 32);
            memcpy(priv + 32 - kl, k, kl);
            have = 1;
        } else if (et != 0x99) {
            return SW(0x6A80);
        }
        v += el;
    }
    if (!have)
        return SW(0x6A80);
    if (card_state.algo[slot] == CARD_ALGO_CV25519)
        for (int i = 0; i < 16; i++) {      /* big-endian (OpenPGP) to RFC 7748 little-endian */
            uint8_t t = priv[i];
            priv[i] = priv[31 - i];
            priv[31 - i] = t;
        }
    memcpy(card_state.ec_priv[slot], priv, 32);
    if (ec_derive_public(slot) != ECC_OK) {
        memset(card_state.ec_priv[slot], 0, 32);
        card_state.present[slot] = 0;
        return SW(0x6A80);                  /* a P-256 scalar outside [1, n-1] */
    }
    card_state.present[slot] = 2;
    if (slot == 0)
        card_state.sig_count = 0;
    return SW(0x9000);
}

static uint32_t key_import(const uint8_t *d, uint32_t len)
{
    const uint8_t *p = d, *end = d + len;
    uint32_t tag, l;
    if (!read_tag(&p, end, &tag) || tag != 0x4D || !read_len(&p, end, &l) || p + l > end)
        return SW(0x6A80);
    end = p + l;
    if (!read_tag(&p, end, &tag) || !read_len(&p, end, &l) || p + l > end)
        return SW(0x6A80);
    int slot = tag == 0xB6 ? 0 : tag == 0xB8 ? 1 : tag == 0xA4 ? 2 : -1;
    if (slot < 0)
        return SW(0x6A80);
    p += l;
    uint32_t ttag, tlen;
    if (!read_tag(&p, end, &ttag) || ttag != 0x7F48 || !read_len(&p, end, &tlen) || p + tlen > end)
        return SW(0x6A80);
    const uint8_t *tp = p, *tend = p + tlen;
    p = tend;
    uint32_t dtag, dlen;
    if (!read_tag(&p, end, &dtag) || dtag != 0x5F48 || !read_len(&p, end, &dlen) || p + dlen > end)
        return SW(0x6A80);
    const uint8_t *v = p, *vend = p + dlen;
    if (card_state.algo[slot] != CARD_ALGO_RSA)
        return ec_key_import(slot, tp, tend, v, vend);
    uint32_t bits = card_state.bits[slot];
    uint32_t half = bits / 16u;
    rsa_key_t *key = &card_state.keys[slot];
    uint32_t have = 0;
    static rsa_key_t staged;
    memset(&staged, 0, sizeof staged);
    staged.nbits = (uint16_t)bits;
    while (tp < tend) {
        uint32_t et, el;
        if (!read_tag(&tp, tend, &et) || !read_len(&tp, tend, &el) || v + el > vend)
            return SW(0x6A80);
        int ok = 1;
        switch (et) {
        case 0x91: ok = store_be(staged.e, E_LENGTH, v, el); have |= 1; break;
        case 0x92: ok = store_be(staged.p, half, v, el); have |= 2; break;
        case 0x93: ok = store_be(staged.q, half, v, el); have |= 4; break;
        case 0x94: ok = store_be(staged.qinv, half, v, el); have |= 8; break;
        case 0x95: ok = store_be(staged.dp, half, v, el); have |= 16; break;
        case 0x96: ok = store_be(staged.dq, half, v, el); have |= 32; break;
        case 0x97: break;                   /* the modulus: computed from p and q */
        default: ok = 0;
        }
        if (!ok)
            return SW(0x6A80);
        v += el;
    }
    if (have != 63)
        return SW(0x6A80);                  /* CRT components required (import format 02) */
    memcpy(key, &staged, sizeof staged);
    card_state.present[slot] = 2;
    if (slot == 0)
        card_state.sig_count = 0;
    return SW(0x9000);
}

static uint32_t put_data(uint32_t tag, const uint8_t *d, uint32_t len)
{
    if (!pw3_ok)
        return SW(0x6982);
    switch (tag) {
    case 0x5B: if (len > sizeof card_state.name) return SW(0x6700);
        memcpy(card_state.name, d, len); card_state.name_len = (uint8_t)len; break;
    case 0x5F2D: if (len > sizeof card_state.lang) return SW(0x6700);
        memcpy(card_state.lang, d, len); card_state.lang_len = (uint8_t)len; break;
    case 0x5F35: if (len != 1) return SW(0x6700);
        card_state.sex = d[0]; break;
    case 0x5F50: if (len > sizeof card_state.url) return SW(0x6700);
        memcpy(card_state.url, d, len); card_state.url_len = (uint8_t)len; break;
    case 0xC4: if (len < 1) return SW(0x6700);
        card_state.pw1_multi = d[0] ? 1 : 0; break;
    case 0xC1: case 0xC2: case 0xC3: {
        int slot = (int)(tag - 0xC1);
        uint32_t algo;
        if (len >= 5 && d[0] == 0x01) {
            uint32_t bits = (uint32_t)d[1] << 8 | d[2];
            if (bits != 2048 && bits != 4096)
                return SW(0x6A80);
            card_state.bits[slot] = (uint16_t)bits;
            algo = CARD_ALGO_RSA;
        } else {
            /* an ECC algorithm ID and OID, perhaps followed by FF (import with the public key) */
            uint32_t oid_len = len >= 2 && d[len - 1] == 0xFF ? len - 2 : len - 1;
            const uint8_t *oid = d + 1;
            if (len < 2)
                return SW(0x6A80);
            if (d[0] == ALGO_ID_EDDSA && slot != 1 && oid_len == sizeof OID_ED25519 &&
                memcmp(oid, OID_ED25519, oid_len) == 0)
                algo = CARD_ALGO_ED25519;
            else if (d[0] == ALGO_ID_ECDH && slot == 1 && oid_len == sizeof OID_CV25519 &&
                     memcmp(oid, OID_CV25519, oid_len) == 0)
                algo = CARD_ALGO_CV25519;
            else if (((d[0] == ALGO_ID_ECDSA && slot != 1) || (d[0] == ALGO_ID_ECDH && slot == 1)) &&
                     oid_len == sizeof OID_P256 && memcmp(oid, OID_P256, oid_len) == 0)
                algo = CARD_ALGO_P256;
            else
                return SW(0x6A80);          /* another curve (secp384r1, Ed448, ...), or the wrong slot */
        }
        if (algo != card_state.algo[slot])
            card_state.present[slot] = 0;   /* a key of the old algorithm is gone */
        card_state.algo[slot] = (uint8_t)algo;
        break;
    }
    case 0xC7: case 0xC8: case 0xC9: if (len != 20) return SW(0x6700);
        memcpy(card_state.fpr[tag - 0xC7], d, 20); break;
    case 0xCA: case 0xCB: case 0xCC: if (len != 20) return SW(0x6700);
        memcpy(card_state.cafpr[tag - 0xCA], d, 20); break;
    case 0xCE: case 0xCF: case 0xD0: if (len != 4) return SW(0x6700);
        memcpy(card_state.gentime[tag - 0xCE], d, 4); break;
    case 0xD3: break;                       /* resetting code: accepted, not used */
    default: return SW(0x6A88);
    }
    return SW(0x9000);
}

/* ---- PINs ------------------------------------------------------------------ */
static uint32_t verify(uint32_t p1, uint32_t p2, const uint8_t *d, uint32_t len)
{
    if (p1 == 0xFF) {                       /* reset the verification state */
        if (p2 == 0x81) pw1_sign_ok = 0;
        else if (p2 == 0x82) pw1_other_ok = 0;
        else if (p2 == 0x83) pw3_ok = 0;
        else return SW(0x6B00);
        return SW(0x9000);
    }
    if (p1 != 0 || (p2 != 0x81 && p2 != 0x82 && p2 != 0x83))
        return SW(0x6B00);
    int admin = p2 == 0x83;
    uint8_t *tries = admin ? &card_state.pw3_tries : &card_state.pw1_tries;
    uint8_t *ok = p2 == 0x81 ? &pw1_sign_ok : p2 == 0x82 ? &pw1_other_ok : &pw3_ok;
    if (len == 0)
        return *ok ? SW(0x9000) : SW(0x63C0 | *tries);
    if (*tries == 0)
        return SW(0x6983);
    const uint8_t *pw = admin ? card_state.pw3 : card_state.pw1;
    uint32_t pwlen = admin ? card_state.pw3_len : card_state.pw1_len;
    uint8_t diff = (uint8_t)(len != pwlen);
    for (uint32_t i = 0; i < len && i < pwlen; i++)
        diff |= d[i] ^ pw[i];
    if (diff) {
        *ok = 0;
        (*tries)--;
        return *tries ? SW(0x63C0 | *tries) : SW(0x6983);
    }
    *tries = 3;
    *ok = 1;
    return SW(0x9000);
}

/* ---- RSA ------------------------------------------------------------------- */
/* EMSA-PKCS1-v1_5 (RFC 8017 9.2) around what the host sent (a DigestInfo). */
static uint32_t rsa_sign_padded(int slot, const uint8_t *d, uint32_t len, out_t *o)
{
    if (!card_state.present[slot])
        return SW(0x6A88);
    uint32_t nbytes = card_state.keys[slot].nbits / 8u;
    if (len + 11u > nbytes || len > nbytes * 2u / 5u + 1u)
        return SW(0x6700);
    work_in[0] = 0x00;
    work_in[1] = 0x01;
    memset(work_in + 2, 0xFF, nbytes - len - 3u);
    work_in[nbytes - len - 1u] = 0x00;
    memcpy(work_in + nbytes - len, d, len);
    if (rsa_private(&card_state.keys[slot], work_in, work_out) != RSA_OK)
        return SW(0x6F00);
    put(o, work_out, nbytes);
    return SW(0x9000);
}

static uint32_t decipher(const uint8_t *d, uint32_t len, out_t *o)
{
    if (!card_state.present[1])
        return SW(0x6A88);
    uint32_t nbytes = card_state.keys[1].nbits / 8u;
    if (len < 2 || d[0] != 0x00 || len - 1u > nbytes)
        return SW(len >= 1 && d[0] != 0x00 ? 0x6A80 : 0x6700);
    memset(work_in, 0, nbytes);
    memcpy(work_in + nbytes - (len - 1u), d + 1, len - 1u);
    if (rsa_private(&card_state.keys[1], work_in, work_out) != RSA_OK)
        return SW(0x6F00);
    /* EME-PKCS1-v1_5 (RFC 8017 7.2.2): 00 02 PS (>= 8 nonzero) 00 M */
    uint32_t i = 2;
    while (i < nbytes && work_out[i] != 0)
        i++;
    if (work_out[0] != 0x00 || work_out[1] != 0x02 || i >= nbytes || i < 10)
        return SW(0x6A80);
    put(o, work_out + i + 1, nbytes - i - 1u);
    return SW(0x9000);
}

static uint32_t read_public(const uint8_t *d, uint32_t len, out_t *o)
{
    if (len < 2)
        return SW(0x6700);
    int slot = d[0] == 0xB6 ? 0 : d[0] == 0xB8 ? 1 : d[0] == 0xA4 ? 2 : -1;
    if (slot < 0)
        return SW(0x6A80);
    if (!card_state.present[slot])
        return SW(0x6A88);
    if (card_state.algo[slot] != CARD_ALGO_RSA) {
        uint32_t at = open_tlv(o, 0x7F49);
        put_tlv(o, 0x86, card_state.ec_pub[slot], pub_len(card_state.algo[slot]));
        close_tlv(o, at);
        return SW(0x9000);
    }
    uint32_t nbytes = card_state.keys[slot].nbits / 8u;
    if (rsa_get_public_key(&card_state.keys[slot], work_out) != RSA_OK)
        return SW(0x6F00);
    uint32_t at = open_tlv(o, 0x7F49);
    put_tlv(o, 0x81, work_out, nbytes);
    const uint8_t *e = card_state.keys[slot].e;
    uint32_t skip = 0;
    while (skip < 3 && e[skip] == 0)
        skip++;
    put_tlv(o, 0x82, e + skip, 4 - skip);
    close_tlv(o, at);
    return SW(0x9000);
}

/* ---- ECC --------------------------------------------------------------------- */
/* ECDSA over the hash the host sent (its leftmost 256 bits; a shorter one as a number)
 * or EdDSA over the data (PSO:CDS, INTERNAL AUTHENTICATE). */
static uint32_t ec_sign(int slot, const uint8_t *d, uint32_t len, out_t *o)
{
    int rc;

    if (!card_state.present[slot])
        return SW(0x6A88);
    if (card_state.algo[slot] == CARD_ALGO_P256) {
        uint8_t h[32];
        if (len == 0)
            return SW(0x6700);
        memset(h, 0, 32);
        if (len >= 32)
            memcpy(h, d, 32);
        else
            memcpy(h + 32 - len, d, len);
        rc = p256_sign(card_state.ec_priv[slot], h, work_out);
    } else if (card_state.algo[slot] == CARD_ALGO_ED25519) {
        rc = ed25519_sign(card_state.ec_priv[slot], d, len, work_out);
    } else {
        return SW(0x6985);
    }
    if (rc != ECC_OK)
        return SW(0x6F00);
    put(o, work_out, 64);
    return SW(0x9000);
}

/* ECDH (PSO:DECIPHER): A6 { 7F49 { 86 the other party's public point } }; the answer is
 * the shared secret: X25519's 32 bytes (a point given with OpenPGP's 0x40 prefix is
 * taken too), or P-256's x-coordinate. */
static uint32_t ec_decipher(const uint8_t *d, uint32_t len, out_t *o)
{
    const uint8_t *p = d, *end = d + len;
    uint32_t tag, l;
    int rc;

    if (!read_tag(&p, end, &tag) || tag != 0xA6 || !read_len(&p, end, &l) || p + l > end)
        return SW(0x6A80);
    end = p + l;
    if (!read_tag(&p, end, &tag) || tag != 0x7F49 || !read_len(&p, end, &l) || p + l > end)
        return SW(0x6A80);
    end = p + l;
    if (!read_tag(&p, end, &tag) || tag != 0x86 || !read_len(&p, end, &l) || p + l > end)
        return SW(0x6A80);
    if (card_state.algo[1] == CARD_ALGO_CV25519) {
        if (l == 33 && p[0] == 0x40) {
            p++;
            l--;
        }
        if (l != 32)
            return SW(0x6A80);
        rc = x25519(card_state.ec_priv[1], p, work_out);
    } else {
        if (l != 65)
            return SW(0x6A80);
        rc = p256_ecdh(card_state.ec_priv[1], p, work_out);
    }
    if (rc == ECC_ERR_POINT || rc == ECC_ERR_INFINITY || rc == ECC_ERR_ZERO)
        return SW(0x6A80);
    if (rc != ECC_OK)
        return SW(0x6F00);
    put(o, work_out, 32);
    return SW(0x9000);
}

/* GENERATE ASYMMETRIC KEY PAIR (47 80): a new ECC key from the TRNG; the public key as
 * 7F49 { 86 }. RSA keys are not generated on the card (6A81). */
static uint32_t ec_generate(const uint8_t *d, uint32_t len, out_t *o)
{
    if (len < 2)
        return SW(0x6700);
    int slot = d[0] == 0xB6 ? 0 : d[0] == 0xB8 ? 1 : d[0] == 0xA4 ? 2 : -1;
    if (slot < 0)
        return SW(0x6A80);
    if (!pw3_ok)
        return SW(0x6982);
    uint32_t algo = card_state.algo[slot];
    int rc;
    if (algo == CARD_ALGO_RSA)
        return SW(0x6A81);
    if (algo == CARD_ALGO_P256) {
        rc = p256_keygen(card_state.ec_priv[slot], card_state.ec_pub[slot]);
    } else if (algo == CARD_ALGO_ED25519) {
        rc = ed25519_keygen(card_state.ec_priv[slot], card_state.ec_pub[slot]);
    } else {
        trng_init();
        rc = trng_read(card_state.ec_priv[slot], 32);
        if (rc == TRNG_OK)
            rc = ec_derive_public(slot);
    }
    if (rc != ECC_OK) {
        card_state.present[slot] = 0;
        return SW(0x6F00);
    }
    card_state.present[slot] = 1;
    if (slot == 0)
        card_state.sig_count = 0;
    uint32_t at = open_tlv(o, 0x7F49);
    put_tlv(o, 0x86, card_state.ec_pub[slot], pub_len(algo));
    close_tlv(o, at);
    return SW(0x9000);
}

/* ---- The dispatcher ------------------------------------------------------------ */
static uint32_t dispatch(uint32_t ins, uint32_t p1, uint32_t p2, const uint8_t *d, uint32_t lc, out_t *o)
{
    if (ins == 0xA4) {
        static const uint8_t rid[6] = {0xD2, 0x76, 0x00, 0x01, 0x24, 0x01};
        if (p1 == 0x04 && lc >= 6 && memcmp(d, rid, 6) == 0) {
            selected = 1;
            return SW(0x9000);
        }
        return SW(0x6A82);
    }
    if (!selected)
        return SW(0x6985);
    uint32_t p1p2 = p1 << 8 | p2;
    switch (ins) {
    case 0xCA: return get_data(p1p2, o);
    case 0x20: return verify(p1, p2, d, lc);
    case 0xDA: return put_data(p1p2, d, lc);
    case 0xDB:
        if (p1p2 != 0x3FFF)
            return SW(0x6B00);
        if (!pw3_ok)
            return SW(0x6982);
        return key_import(d, lc);
    case 0x47:
        if (p1 == 0x81)
            return read_public(d, lc, o);
        return p1 == 0x80 ? ec_generate(d, lc, o) : SW(0x6B00);
    case 0x2A:
        if (p1p2 == 0x9E9A) {
            if (!pw1_sign_ok)
                return SW(0x6982);
            uint32_t sw = card_state.algo[0] == CARD_ALGO_RSA ? rsa_sign_padded(0, d, lc, o) : ec_sign(0, d, lc, o);
            if (sw == SW(0x9000)) {
                card_state.sig_count++;
                if (!card_state.pw1_multi)
                    pw1_sign_ok = 0;
            }
            return sw;
        }
        if (p1p2 == 0x8086) {
            if (!pw1_other_ok)
                return SW(0x6982);
            if (card_state.algo[1] != CARD_ALGO_RSA)
                return card_state.present[1] ? ec_decipher(d, lc, o) : SW(0x6A88);
            return decipher(d, lc, o);
        }
        return SW(0x6B00);
    case 0x88:
        if (p1p2 != 0)
            return SW(0x6B00);
        if (!pw1_other_ok)
            return SW(0x6982);
        return card_state.algo[2] == CARD_ALGO_RSA ? rsa_sign_padded(2, d, lc, o) : ec_sign(2, d, lc, o);
    default:
        return SW(0x6D00);
    }
}

/* Parse the command APDU (ISO 7816-4 5.1: cases 1, 2, 3, 4, short and extended). */
uint32_t apdu_process(const uint8_t *cmd, uint32_t len, uint8_t *rsp, uint32_t rsp_max)
{
    out_t o = {rsp, 0, rsp_max - 2u};
    uint32_t sw;
    const uint8_t *data = cmd + 5;
    uint32_t lc = 0;
    int ok = 1;
    if (len < 4) {
        ok = 0;
    } else if (len == 4 || len == 5) {
        lc = 0;                                         /* case 1, case 2 short */
    } else if (cmd[4] != 0) {
        lc = cmd[4];                                    /* cases 3 and 4 short */
        ok = len == 5u + lc || len == 6u + lc;
    } else if (len == 7) {
        lc = 0;                                         /* case 2 extended */
    } else {
        lc = (uint32_t)cmd[5] << 8 | cmd[6];            /* cases 3 and 4 extended */
        data = cmd + 7;
        ok = lc != 0 && (len == 7u + lc || len == 9u + lc);
    }
    card_cmd_count++;
    if (!ok) {
        chain_len = 0;
        sw = SW(0x6700);
    } else if ((cmd[0] & ~0x10u) != 0x00) {
        chain_len = 0;
        sw = SW(0x6E00);
    } else if (cmd[0] & 0x10u) {                        /* command chaining: more to come */
        if (chain_len + lc > sizeof chain) {
            chain_len = 0;
            sw = SW(0x6700);
        } else {
            memcpy(chain + chain_len, data, lc);
            chain_len += lc;
            sw = SW(0x9000);
        }
    } else {
        if (chain_len) {
            if (chain_len + lc > sizeof chain) {
                chain_len = 0;
                sw = SW(0x6700);
                goto done;
            }
            memcpy(chain + chain_len, data, lc);
            data = chain;
            lc += chain_len;
            chain_len = 0;
        }
        sw = dispatch(cmd[1], cmd[2], cmd[3], data, lc, &o);
        if (sw != SW(0x9000))
            o.n = 0;
    }
done:
    rsp[o.n] = (uint8_t)(sw >> 8);
    rsp[o.n + 1] = (uint8_t)sw;
    return o.n + 2;
}

/* Power off or reset: the verification state goes. */
void openpgp_reset(void)
{
    pw1_sign_ok = pw1_other_ok = pw3_ok = 0;
    selected = 0;
    chain_len = 0;
}
