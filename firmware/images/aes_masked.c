/*
 * aes_masked: AES-128 with first-order Boolean masking (Herbst, Oswald, Mangard,
 * ACNS 2006), the protected counterpart of aes.c for docs/power.md.
 *
 * Every intermediate that depends on the plaintext and the key is kept XORed with a
 * random mask: the S-box input with m, its output with mo (through a masked table T,
 * T[x ^ m] = S[x] ^ mo, made for every encryption), the state before MixColumns with
 * one mask per row mc[j] and after it with mco = MixColumns(mc). The round keys are
 * stored unmasked (the key is fixed: what a fixed-versus-random plaintext test
 * compares does not depend on it) and masked on the fly into the masks the state
 * needs. The plaintext comes in two shares and the ciphertext leaves in two, so no
 * unmasked value of the data is ever computed.
 *
 * The masks come from the TRNG (src/trng.c): 6 bytes per encryption, kept in aes_masks.
 * pkasim power and tvla reseed the TRNG for every trace, so every trace has its own.
 *
 * Inputs and outputs (ELF symbols in .data):
 *   aes_key         the key (default FIPS-197 C.1's)
 *   aes_pt_share0   plaintext ^ mask, aes_pt_share1 the mask (default: FIPS-197 C.1's
 *                   plaintext and a zero mask)
 *   aes_masks       m, mo, mc[0..3]: the 6 bytes drawn from the TRNG (an output)
 *   aes_ct_share0   ciphertext ^ aes_ct_share1
 * With aes_check = 1 (default) it compares share0 ^ share1 with FIPS-197 C.1's
 * ciphertext and exits 1 if they differ; else 0 (3 if the TRNG failed).
 */
#include <stdint.h>
#include "semihost.h"
#include "trng.h"

#define DATA(name) __attribute__((section(".data." #name), used, aligned(4)))
/* Two values masked alike must never follow each other on a bus: the transition
 * (their XOR) would be unmasked. CLEAR() puts zero on the data bus (a load of a zero
 * word) and on both ALU operand buses (EORS of that zero with itself) and keeps the
 * compiler from moving memory accesses across it. */
static const volatile uint32_t zero_word = 0;
#define CLEAR()                                                                            \
    do {                                                                                   \
        uint32_t z_;                                                                       \
        __asm__ volatile("ldr %0, [%1]\n\teors %0, %0" : "=&l"(z_) : "l"(&zero_word) : "memory"); \
    } while (0)
#define BARRIER() __asm__ volatile("" ::: "memory")
/* The compiler may not see through x here: a masked value is computed as written,
 * never reassociated into an XOR where two masks cancel. */
#define OPAQUE(x) __asm__ volatile("" : "+l"(x))

DATA(aes_key) uint8_t aes_key[16] = {0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
                                     0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f};
DATA(aes_pt_share0) uint8_t aes_pt_share0[16] = {0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
                                                 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff};
DATA(aes_pt_share1) uint8_t aes_pt_share1[16] = {0};
DATA(aes_masks) uint8_t aes_masks[8] = {0};
DATA(aes_ct_share0) uint8_t aes_ct_share0[16] = {0};
DATA(aes_ct_share1) uint8_t aes_ct_share1[16] = {0};
DATA(aes_check) uint32_t aes_check = 1;
DATA(aes_expected) uint8_t aes_expected[16] = {0x69, 0xc4, 0xe0, 0xd8, 0x6a, 0x7b, 0x04, 0x30,
                                               0xd8, 0xcd, 0xb7, 0x80, 0x70, 0xb4, 0xc5, 0x5a};

static const uint8_t sbox[256] = {
    0x63, 0x7c, 0x77, 0x7b, 0xf2, 0x6b, 0x6f, 0xc5, 0x30, 0x01, 0x67, 0x2b, 0xfe, 0xd7, 0xab, 0x76,
    0xca, 0x82, 0xc9, 0x7d, 0xfa, 0x59, 0x47, 0xf0, 0xad, 0xd4, 0xa2, 0xaf, 0x9c, 0xa4, 0x72, 0xc0,
    0xb7, 0xfd, 0x93, 0x26, 0x36, 0x3f, 0xf7, 0xcc, 0x34, 0xa5, 0xe5, 0xf1, 0x71, 0xd8, 0x31, 0x15,
    0x04, 0xc7, 0x23, 0xc3, 0x18, 0x96, 0x05, 0x9a, 0x07, 0x12, 0x80, 0xe2, 0xeb, 0x27, 0xb2, 0x75,
    0x09, 0x83, 0x2c, 0x1a, 0x1b, 0x6e, 0x5a, 0xa0, 0x52, 0x3b, 0xd6, 0xb3, 0x29, 0xe3, 0x2f, 0x84,
    0x53, 0xd1, 0x00, 0xed, 0x20, 0xfc, 0xb1, 0x5b, 0x6a, 0xcb, 0xbe, 0x39, 0x4a, 0x4c, 0x58, 0xcf,
    0xd0, 0xef, 0xaa, 0xfb, 0x43, 0x4d, 0x33, 0x85, 0x45, 0xf9, 0x02, 0x7f, 0x50, 0x3c, 0x9f, 0xa8,
    0x51, 0xa3, 0x40, 0x8f, 0x92, 0x9d, 0x38, 0xf5, 0xbc, 0xb6, 0xda, 0x21, 0x10, 0xff, 0xf3, 0xd2,
    0xcd, 0x0c, 0x13, 0xec, 0x5f, 0x97, 0x44, 0x17, 0xc4, 0xa7, 0x7e, 0x3d, 0x64, 0x5d, 0x19, 0x73,
    0x60, 0x81, 0x4f, 0xdc, 0x22, 0x2a, 0x90, 0x88, 0x46, 0xee, 0xb8, 0x14, 0xde, 0x5e, 0x0b, 0xdb,
    0xe0, 0x32, 0x3a, 0x0a, 0x49, 0x06, 0x24, 0x5c, 0xc2, 0xd3, 0xac, 0x62, 0x91, 0x95, 0xe4, 0x79,
    0xe7, 0xc8, 0x37, 0x6d, 0x8d, 0xd5, 0x4e, 0xa9, 0x6c, 0x56, 0xf4, 0xea, 0x65, 0x7a, 0xae, 0x08,
    0xba, 0x78, 0x25, 0x2e, 0x1c, 0xa6, 0xb4, 0xc6, 0xe8, 0xdd, 0x74, 0x1f, 0x4b, 0xbd, 0x8b, 0x8a,
    0x70, 0x3e, 0xb5, 0x66, 0x48, 0x03, 0xf6, 0x0e, 0x61, 0x35, 0x57, 0xb9, 0x86, 0xc1, 0x1d, 0x9e,
    0xe1, 0xf8, 0x98, 0x11, 0x69, 0xd9, 0x8e, 0x94, 0x9b, 0x1e, 0x87, 0xe9, 0xce, 0x55, 0x28, 0xdf,
    0x8c, 0xa1, 0x89, 0x0d, 0xbf, 0xe6, 0x42, 0x68, 0x41, 0x99, 0x2d, 0x0f, 0xb0, 0x54, 0xbb, 0x16,
};

static uint8_t round_keys[176]; /* unmasked: the key is fixed */
static uint8_t table[256];      /* T[x ^ m] = S[x] ^ mo */
static uint8_t mco[4];          /* MixColumns(mc): the state's row masks after MixColumns */
static uint8_t remask[4];       /* mo ^ mc[j]: from the S-box output mask to MixColumns' */

static inline uint8_t xtime(uint8_t a)
{
    return (uint8_t)((a << 1) ^ (0x1b & (uint8_t)-(a >> 7)));
}

__attribute__((noinline)) void aes_expand_key(const uint8_t key[16])
{
    static const uint8_t rcon[10] = {0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0x1b, 0x36};
    for (int i = 0; i < 16; i++)
        round_keys[i] = key[i];
    for (int i = 4; i < 44; i++) {
        uint8_t t0 = round_keys[4 * i - 4], t1 = round_keys[4 * i - 3];
        uint8_t t2 = round_keys[4 * i - 2], t3 = round_keys[4 * i - 1];
        if (i % 4 == 0) {
            uint8_t u = t0;
            t0 = (uint8_t)(sbox[t1] ^ rcon[i / 4 - 1]);
            t1 = sbox[t2];
            t2 = sbox[t3];
            t3 = sbox[u];
        }
        round_keys[4 * i + 0] = round_keys[4 * i - 16] ^ t0;
        round_keys[4 * i + 1] = round_keys[4 * i - 15] ^ t1;
        round_keys[4 * i + 2] = round_keys[4 * i - 14] ^ t2;
        round_keys[4 * i + 3] = round_keys[4 * i - 13] ^ t3;
    }
}

/* The masks of one encryption: the masked S-box table, MixColumns' output masks. */
__attribute__((noinline)) void aes_masks_setup(uint8_t m, uint8_t mo, const uint8_t mc[4])
{
    for (uint32_t x = 0; x < 256; x++) {
        table[(x ^ m) & 0xFF] = sbox[x] ^ mo;
        BARRIER();
    }
    uint8_t all = mc[0] ^ mc[1] ^ mc[2] ^ mc[3];
    for (int j = 0; j < 4; j++) {
        mco[j] = mc[j] ^ all ^ xtime(mc[j] ^ mc[(j + 1) & 3]);
        remask[j] = mo ^ mc[j];
    }
}

/* AddRoundKey with the key masked on the fly: the state's row masks `from` become m.
 * The masks are read from memory where they are used (a volatile read), never kept in
 * a register the compiler may spill and reload next to a value they mask. */
static void add_round_key(uint8_t s[16], const uint8_t *rk, const uint8_t from[4], const volatile uint8_t *m)
{
    for (int i = 0; i < 16; i++) {
        CLEAR();
        uint8_t k = (uint8_t)(rk[i] ^ from[i & 3]);
        OPAQUE(k);
        k ^= *m;
        OPAQUE(k);
        CLEAR();
        s[i] ^= k;
        CLEAR();
    }
}

/* SubBytes through the masked table and ShiftRows: mask m in, mo out. */
static void sub_shift(uint8_t s[16])
{
    uint8_t t[16];
    for (int i = 0; i < 16; i++) {
        t[i] = table[s[(i + 4 * (i % 4)) % 16]];
        CLEAR();
    }
    for (int i = 0; i < 16; i++) {
        s[i] = t[i];
        CLEAR();
    }
}

/* From mo on every byte to mc[row]; then MixColumns, linear, gives mco[row]. */
static void mix_columns(uint8_t s[16])
{
    for (int i = 0; i < 16; i++) {
        s[i] ^= remask[i & 3];
        CLEAR();
    }
    for (int c = 0; c < 4; c++) {
        uint8_t *col = s + 4 * c;
        uint8_t a0 = col[0];
        CLEAR();
        uint8_t a1 = col[1];
        CLEAR();
        uint8_t a2 = col[2];
        CLEAR();
        uint8_t a3 = col[3];
        CLEAR();
        uint8_t all = a0 ^ a1 ^ a2 ^ a3;
        col[0] = a0 ^ all ^ xtime(a0 ^ a1);
        CLEAR();
        col[1] = a1 ^ all ^ xtime(a1 ^ a2);
        CLEAR();
        col[2] = a2 ^ all ^ xtime(a2 ^ a3);
        CLEAR();
        col[3] = a3 ^ all ^ xtime(a3 ^ a0);
        CLEAR();
    }
}

__attribute__((noinline)) void aes_round(uint8_t s[16], const uint8_t *rk, const volatile uint8_t *m)
{
    add_round_key(s, rk, mco, m);
    sub_shift(s);
    mix_columns(s);
}

__attribute__((noinline)) void aes_encrypt_masked(const uint8_t in0[16], const uint8_t in1[16], uint8_t out0[16],
                                                  uint8_t out1[16])
{
    uint8_t s[16];
    const volatile uint8_t *m = &aes_masks[0], *mo = &aes_masks[1];
    aes_masks_setup(*m, *mo, aes_masks + 2);
    /* the state masked with mco by row: share1 ^ mco first, then share0 */
    for (int i = 0; i < 16; i++) {
        uint8_t t = (uint8_t)(in1[i] ^ mco[i & 3]);
        OPAQUE(t);
        CLEAR();
        s[i] = in0[i] ^ t;
        CLEAR();
    }
    for (int r = 0; r < 9; r++)
        aes_round(s, round_keys + 16 * r, m);
    add_round_key(s, round_keys + 144, mco, m);
    sub_shift(s);
    /* the last round key, unmasked: the state leaves masked with mo in every byte */
    for (int i = 0; i < 16; i++) {
        s[i] ^= round_keys[160 + i];
        CLEAR();
    }
    for (int i = 0; i < 16; i++) {
        out0[i] = s[i];
        CLEAR();
        out1[i] = *mo;
        CLEAR();
    }
}

int main(void)
{
    aes_expand_key(aes_key);
    trng_init();
    if (trng_read(aes_masks, 6) != TRNG_OK)
        return 3;
    aes_encrypt_masked(aes_pt_share0, aes_pt_share1, aes_ct_share0, aes_ct_share1);
    if (!aes_check)
        return 0;
    uint8_t diff = 0;
    for (int i = 0; i < 16; i++)
        diff |= aes_ct_share0[i] ^ aes_ct_share1[i] ^ aes_expected[i];
    return diff != 0;
}
