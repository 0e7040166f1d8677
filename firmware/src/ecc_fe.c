/*
 * The CPU's side of the field layer (ecc_fe.h): moving numbers into and out of slots,
 * constant-time word helpers, and exponentiation by a public exponent. The same code
 * for the PKA build and the software build (fe_words() says where a slot lives).
 */
#include "ecc_fe.h"
#include "carry.h"

void fe_set(fe_t s, const uint32_t w[FE_WORDS])
{
    volatile uint32_t *d = fe_words(s);

    fe_wait();
    for (uint32_t i = 0; i < FE_WORDS; i++)
        d[i] = w[i];
}

void fe_get(uint32_t w[FE_WORDS], fe_t s)
{
    volatile uint32_t *d = fe_words(s);

    fe_wait();
    for (uint32_t i = 0; i < FE_WORDS; i++)
        w[i] = d[i];
}

void fe_set_be(fe_t s, const uint8_t be[FE_BYTES])
{
    uint32_t w[FE_WORDS];

    words_from_be(w, be);
    fe_set(s, w);
}

void fe_set_le(fe_t s, const uint8_t le[FE_BYTES])
{
    uint32_t w[FE_WORDS];

    words_from_le(w, le);
    fe_set(s, w);
}

void fe_set_le128(fe_t s, const uint8_t le[16])
{
    uint32_t w[FE_WORDS];

    for (uint32_t i = 0; i < 4; i++)
        w[i] = (uint32_t)le[4 * i] | (uint32_t)le[4 * i + 1] << 8 | (uint32_t)le[4 * i + 2] << 16 |
               (uint32_t)le[4 * i + 3] << 24;
    for (uint32_t i = 4; i < FE_WORDS; i++)
        w[i] = 0;
    fe_set(s, w);
}

void fe_get_be(uint8_t be[FE_BYTES], fe_t s)
{
    uint32_t w[FE_WORDS];

    fe_get(w, s);
    words_to_be(be, w);
}

void fe_get_le(uint8_t le[FE_BYTES], fe_t s)
{
    uint32_t w[FE_WORDS];

    fe_get(w, s);
    words_to_le(le, w);
}

void fe_copy(fe_t dst, fe_t src)
{
    volatile uint32_t *d = fe_words(dst), *s = fe_words(src);

    fe_wait();
    for (uint32_t i = 0; i < FE_WORDS; i++)
        d[i] = s[i];
}

int fe_equal(fe_t a, fe_t b)
{
    uint32_t x[FE_WORDS], y[FE_WORDS];

    fe_get(x, a);
    fe_get(y, b);
    for (uint32_t i = 0; i < FE_WORDS; i++)
        if (x[i] != y[i])
            return 0;
    return 1;
}

void fe_cswap(uint32_t bit, fe_t a, fe_t b)
{
    volatile uint32_t *x = fe_words(a), *y = fe_words(b);
    uint32_t mask = ct_mask(bit);

    fe_wait();
    for (uint32_t i = 0; i < FE_WORDS; i++) {
        uint32_t u = x[i], v = y[i];
        uint32_t t = (u ^ v) & mask;
        x[i] = u ^ t;
        y[i] = v ^ t;
    }
}

void words_from_be(uint32_t w[FE_WORDS], const uint8_t be[FE_BYTES])
{
    for (uint32_t i = 0; i < FE_WORDS; i++) {
        const uint8_t *p = be + FE_BYTES - 4u * (i + 1u);
        w[i] = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
    }
}

void words_to_be(uint8_t be[FE_BYTES], const uint32_t w[FE_WORDS])
{
    for (uint32_t i = 0; i < FE_WORDS; i++) {
        uint8_t *p = be + FE_BYTES - 4u * (i + 1u);
        p[0] = (uint8_t)(w[i] >> 24);
        p[1] = (uint8_t)(w[i] >> 16);
        p[2] = (uint8_t)(w[i] >> 8);
        p[3] = (uint8_t)w[i];
    }
}

void words_from_le(uint32_t w[FE_WORDS], const uint8_t le[FE_BYTES])
{
    for (uint32_t i = 0; i < FE_WORDS; i++)
        w[i] = (uint32_t)le[4 * i] | (uint32_t)le[4 * i + 1] << 8 | (uint32_t)le[4 * i + 2] << 16 |
               (uint32_t)le[4 * i + 3] << 24;
}

void words_to_le(uint8_t le[FE_BYTES], const uint32_t w[FE_WORDS])
{
    for (uint32_t i = 0; i < FE_WORDS; i++) {
        le[4 * i] = (uint8_t)w[i];
        le[4 * i + 1] = (uint8_t)(w[i] >> 8);
        le[4 * i + 2] = (uint8_t)(w[i] >> 16);
        le[4 * i + 3] = (uint8_t)(w[i] >> 24);
    }
}

/* *r = a - b - c (c the borrow in, 0 or 1): sub_step, from carry.h. */

/* r = a - b over 8 words; returns the borrow out, no branch on the values. */
static uint32_t sub_borrow(uint32_t r[FE_WORDS], const uint32_t a[FE_WORDS], const uint32_t b[FE_WORDS])
{
    uint32_t c = 0;

    for (uint32_t i = 0; i < FE_WORDS; i++)
        c = sub_step(&r[i], a[i], b[i], c);
    return c;
}

uint32_t words_lt(const uint32_t a[FE_WORDS], const uint32_t b[FE_WORDS])
{
    uint32_t t[FE_WORDS];

    return ct_mask(sub_borrow(t, a, b));
}

uint32_t words_is_zero(const uint32_t a[FE_WORDS])
{
    uint32_t acc = 0;

    for (uint32_t i = 0; i < FE_WORDS; i++)
        acc |= a[i];
    /* (acc | -acc) has its top bit set exactly when acc != 0 */
    return ct_mask(1u ^ ((acc | (0u - acc)) >> 31));
}

uint32_t words_csub(uint32_t a[FE_WORDS], const uint32_t b[FE_WORDS], uint32_t mask)
{
    uint32_t t[FE_WORDS];
    uint32_t borrow = sub_borrow(t, a, b);

    mask = ct_barrier(mask);
    for (uint32_t i = 0; i < FE_WORDS; i++)
        a[i] ^= (a[i] ^ t[i]) & mask;
    return borrow & mask & 1u;
}

void fe_pow(fe_t r, fe_t a, const uint32_t e[FE_WORDS], fe_t one, fe_t tab)
{
    /* tab + 32 (i - 1) = a^i, i = 1..15 */
    fe_copy(tab, a);
    for (uint32_t i = 2; i < 16; i++)
        fe_mul(tab + FE_BYTES * (i - 1u), tab + FE_BYTES * (i - 2u), a);
    fe_copy(r, one);
    int started = 0;
    for (int k = 63; k >= 0; k--) {
        uint32_t win = (e[k / 8] >> (4 * (k % 8))) & 15u;
        if (started) {
            fe_sqr(r, r);
            fe_sqr(r, r);
            fe_sqr(r, r);
            fe_sqr(r, r);
        }
        if (win) {
            fe_mul(r, r, tab + FE_BYTES * (win - 1u));
            started = 1;
        }
    }
}

uint32_t fe_table[FE_TABLE_WORDS];

void fe_table_store(uint32_t *tab, uint32_t words, uint32_t idx, fe_t src)
{
    volatile uint32_t *s = fe_words(src);
    uint32_t *d = tab + idx * words;

    fe_wait();
    for (uint32_t i = 0; i < words; i++)
        d[i] = s[i];
}

#if defined(__thumb__) && !defined(__thumb2__)
/*
 * out[0..words) = the entry of tab (16 entries of `words` words) whose mask is all ones,
 * every entry read: ARMv6-M assembly, two words of all 16 entries at a time (the 16
 * entries unrolled), 10 cycles per entry and word pair: LDM of the pair, LDR of the
 * entry's mask, two ANDS, two ORRS, ADD to the next entry. C compiled by clang spills
 * its accumulators here and takes twice as long. Registers: r0 entry pointer, r2 the
 * masks, r4/r5 the pair, r6/r7 the loaded words, r3 the mask; r8 the entry stride - 8,
 * r9 out, r10 the pairs left, r11 the pair's address in entry 0.
 */
void ct_select_words(uint32_t *out, const uint32_t *tab, const uint32_t masks[16], uint32_t words);

#define SEL_FIRST "ldm r0!, {r4, r5}\n\tldr r3, [r2, #0]\n\tands r4, r3\n\tands r5, r3\n\tadd r0, r8\n\t"
#define SEL_NEXT(off) "ldm r0!, {r6, r7}\n\tldr r3, [r2, #" #off "]\n\tands r6, r3\n\tands r7, r3\n\t" \
                      "orrs r4, r6\n\torrs r5, r7\n\tadd r0, r8\n\t"

__asm__(
    "\t.section .text.ct_select_words,\"ax\",%progbits\n"
    "\t.syntax unified\n"
    "\t.thumb\n"
    "\t.balign 4\n"
    "\t.global ct_select_words\n"
    "\t.type ct_select_words, %function\n"
    "\t.thumb_func\n"
    "ct_select_words:\n\t"
    "push {r4, r5, r6, r7, lr}\n\t"
    "mov r4, r8\n\tmov r5, r9\n\tmov r6, r10\n\tmov r7, r11\n\t"
    "push {r4, r5, r6, r7}\n\t"
    "lsls r4, r3, #2\n\t"
    "subs r4, #8\n\t"
    "mov r8, r4\n\t"            /* stride - 8 bytes */
    "mov r9, r0\n\t"            /* out */
    "lsrs r3, r3, #1\n\t"
    "mov r10, r3\n\t"           /* word pairs */
    "mov r11, r1\n"             /* the pair in entry 0 */
    "1:\n\t"
    "mov r0, r11\n\t"
    SEL_FIRST
    SEL_NEXT(4) SEL_NEXT(8) SEL_NEXT(12) SEL_NEXT(16) SEL_NEXT(20) SEL_NEXT(24) SEL_NEXT(28)
    SEL_NEXT(32) SEL_NEXT(36) SEL_NEXT(40) SEL_NEXT(44) SEL_NEXT(48) SEL_NEXT(52) SEL_NEXT(56) SEL_NEXT(60)
    "mov r1, r9\n\t"
    "stm r1!, {r4, r5}\n\t"
    "mov r9, r1\n\t"
    "mov r1, r11\n\t"
    "adds r1, #8\n\t"
    "mov r11, r1\n\t"
    "mov r1, r10\n\t"
    "subs r1, #1\n\t"
    "mov r10, r1\n\t"
    "bne 1b\n\t"
    "pop {r4, r5, r6, r7}\n\t"
    "mov r8, r4\n\tmov r9, r5\n\tmov r10, r6\n\tmov r11, r7\n\t"
    "pop {r4, r5, r6, r7, pc}\n\t"
    ".size ct_select_words, . - ct_select_words\n"
    "\t.text\n");
#else
static void ct_select_words(uint32_t *out, const uint32_t *tab, const uint32_t masks[16], uint32_t words)
{
    for (uint32_t w = 0; w < words; w++) {
        uint32_t acc = 0;
        for (uint32_t i = 0; i < FE_TABLE_ENTRIES; i++)
            acc |= tab[i * words + w] & masks[i];
        out[w] = acc;
    }
}
#endif

void fe_table_select(const uint32_t *tab, uint32_t words, uint32_t idx, fe_t dst)
{
    volatile uint32_t *d = fe_words(dst);
    uint32_t out[32], masks[FE_TABLE_ENTRIES];

    /* all ones exactly when i ^ idx is 0: then (i ^ idx) - 1 wraps and its top bit is set */
    for (uint32_t i = 0; i < FE_TABLE_ENTRIES; i++)
        masks[i] = ct_mask(((i ^ idx) - 1u) >> 31);
    ct_select_words(out, tab, masks, words);
    fe_wait();
    for (uint32_t i = 0; i < words; i++)
        d[i] = out[i];
}

void fe_table_load(const uint32_t *tab, uint32_t words, uint32_t idx, fe_t dst)
{
    volatile uint32_t *d = fe_words(dst);
    const uint32_t *s = tab + idx * words;

    fe_wait();
    for (uint32_t i = 0; i < words; i++)
        d[i] = s[i];
}
