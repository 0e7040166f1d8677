/*
 * The baseline of benchmarks/montmul_native.py: peripherals/pka_montmul.c as it was
 * before the AVX-512 IFMA rows (64-bit SOS rows, MULX/ADX or C; 32-bit CIOS for odd
 * lengths), kept unchanged so that the benchmark times old and new code built the
 * same way in one run. Not part of pkasim.
 */
#include <stdint.h>
#include <string.h>

#include "pka_montmul.h"

#define MAX_WORDS PK_MONTMUL_MAX_WORDS

/* -n^-1 mod 2^32 for odd n (Newton: each step doubles the correct bits). */
static uint32_t neg_inv32(uint32_t n0) {
    uint32_t x = n0;
    for (int i = 0; i < 5; i++) x *= 2u - n0 * x;
    return 0u - x;
}


static int geq(const uint32_t *t, uint32_t top, const uint32_t *n, uint32_t w) {
    if (top) return 1;
    for (uint32_t i = w; i-- > 0;)
        if (t[i] != n[i]) return t[i] > n[i];
    return 1;
}

static uint32_t sub_n(uint32_t *t, const uint32_t *n, uint32_t w) {
    uint64_t borrow = 0;
    for (uint32_t i = 0; i < w; i++) {
        uint64_t d = (uint64_t)t[i] - n[i] - borrow;
        t[i] = (uint32_t)d;
        borrow = (d >> 63) & 1;
    }
    return (uint32_t)borrow;
}

/* The same product on 64-bit limbs (even w): a quarter of the multiplications. */
static uint64_t neg_inv64(uint64_t n0) {
    uint64_t x = n0;
    for (int i = 0; i < 6; i++) x *= 2u - n0 * x;
    return 0u - x;
}

static int geq64(const uint64_t *t, uint64_t top, const uint64_t *n, uint32_t w) {
    if (top) return 1;
    for (uint32_t i = w; i-- > 0;)
        if (t[i] != n[i]) return t[i] > n[i];
    return 1;
}

static uint64_t sub64(uint64_t *t, const uint64_t *n, uint32_t w) {
    unsigned __int128 borrow = 0;
    for (uint32_t i = 0; i < w; i++) {
        unsigned __int128 d = (unsigned __int128)t[i] - n[i] - borrow;
        t[i] = (uint64_t)d;
        borrow = (d >> 127) & 1;
    }
    return (uint64_t)borrow;
}

/* rp[0..n) += up[0..n) * v; returns the carry limb (the sum fits in n + 1 limbs). */
static uint64_t addmul_1_c(uint64_t *rp, const uint64_t *up, uint32_t n, uint64_t v) {
    unsigned __int128 c = 0;
    for (uint32_t j = 0; j < n; j++) {
        c += (unsigned __int128)up[j] * v + rp[j];
        rp[j] = (uint64_t)c;
        c >>= 64;
    }
    return (uint64_t)c;
}

#if defined(__x86_64__) && defined(__GNUC__)
/* The same with BMI2's MULX and ADX's two carry chains (ADCX adds the low halves of the
 * products, ADOX the high halves of the products before; LEA and JRCXZ leave both
 * flags alone), four limbs a turn: about half the time of the C loop, which keeps one
 * chain. n > 0 and a multiple of 4. Chosen at run time when the CPU has both. */
static uint64_t addmul_4k_adx(uint64_t *rp, const uint64_t *up, uint64_t n, uint64_t v) {
    uint64_t hi = 0, lo, hi2;
    __asm__ volatile(
        "xor %%r11d, %%r11d\n\t"          /* clears CF and OF */
        "1:\n\t"
        "mulx (%[up]), %[lo], %[hi2]\n\t"
        "adcx (%[rp]), %[lo]\n\t"
        "adox %[hi], %[lo]\n\t"
        "mov %[lo], (%[rp])\n\t"
        "mulx 8(%[up]), %[lo], %[hi]\n\t"
        "adcx 8(%[rp]), %[lo]\n\t"
        "adox %[hi2], %[lo]\n\t"
        "mov %[lo], 8(%[rp])\n\t"
        "mulx 16(%[up]), %[lo], %[hi2]\n\t"
        "adcx 16(%[rp]), %[lo]\n\t"
        "adox %[hi], %[lo]\n\t"
        "mov %[lo], 16(%[rp])\n\t"
        "mulx 24(%[up]), %[lo], %[hi]\n\t"
        "adcx 24(%[rp]), %[lo]\n\t"
        "adox %[hi2], %[lo]\n\t"
        "mov %[lo], 24(%[rp])\n\t"
        "lea 32(%[up]), %[up]\n\t"
        "lea 32(%[rp]), %[rp]\n\t"
        "lea -4(%%rcx), %%rcx\n\t"
        "jrcxz 2f\n\t"
        "jmp 1b\n\t"
        "2:\n\t"
        "adcx %%r11, %[hi]\n\t"           /* r11 = 0: the last high half takes both carries */
        "adox %%r11, %[hi]\n\t"
        : [hi] "+&r"(hi), [lo] "=&r"(lo), [hi2] "=&r"(hi2), [up] "+&r"(up), [rp] "+&r"(rp), "+&c"(n)
        : "d"(v)
        : "r11", "cc", "memory");
    return hi;
}

static int have_adx(void) {
    static int known = -1;
    if (known < 0) {
        __builtin_cpu_init();
        known = __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("adx");
    }
    return known;
}
#define HAVE_ADX_PATH 1
#else
#define HAVE_ADX_PATH 0
#endif

/* Which row primitive pk_montmul uses: 1 the MULX/ADX one where the CPU has it, 0 the
 * C one (tests run both: they must give the same bits). */
static int use_adx = 1;

int pk_montmul_use_adx(int on) {
    int was = use_adx;
    use_adx = on;
#if HAVE_ADX_PATH
    return was && have_adx();
#else
    (void)was;
    return 0;
#endif
}

static uint64_t addmul_1(uint64_t *rp, const uint64_t *up, uint32_t n, uint64_t v) {
#if HAVE_ADX_PATH
    if (use_adx && n >= 4 && have_adx()) {
        uint32_t n4 = n & ~3u;
        uint64_t c = addmul_4k_adx(rp, up, n4, v);
        if (n4 == n) return c;
        unsigned __int128 t = c;
        for (uint32_t j = n4; j < n; j++) {
            t += (unsigned __int128)up[j] * v + rp[j];
            rp[j] = (uint64_t)t;
            t >>= 64;
        }
        return (uint64_t)t;
    }
#endif
    return addmul_1_c(rp, up, n, v);
}

/* The same product on 64-bit limbs (even w): a quarter of the multiplications. Separated
 * operand scanning (Koc et al. 1996, SOS): the whole product a b first (a square takes
 * the products below the diagonal once and doubles them), then w reduction rows. The
 * reduced value before the final subtractions is (a b + M n) / R with the one M < R that
 * makes the division exact, whichever order the rows run in, so it is CIOS's, bit for
 * bit, and so is when it declines. */
static int montmul64(uint32_t *r, const uint32_t *a32, const uint32_t *b32, const uint32_t *n32, uint32_t w32) {
    uint32_t w = w32 / 2;
    uint64_t a[MAX_WORDS / 2], b[MAX_WORDS / 2], n[MAX_WORDS / 2], t[MAX_WORDS + 1];
    memcpy(a, a32, 4u * w32); /* little-endian words: two 32-bit words are one 64-bit limb */
    memcpy(b, b32, 4u * w32);
    memcpy(n, n32, 4u * w32);
    uint64_t ninv = neg_inv64(n[0]);
    memset(t, 0, sizeof(uint64_t) * (2 * w));
    if (memcmp(a, b, 8u * w) == 0) {
        /* a^2 = 2 * sum_{i<j} a_i a_j 2^(64(i+j)) + sum_i a_i^2 2^(128 i) */
        for (uint32_t i = 0; i + 1 < w; i++) t[i + w] = addmul_1(t + 2 * i + 1, a + i + 1, w - 1 - i, a[i]);
        uint64_t top = 0;
        for (uint32_t k = 0; k < 2 * w; k++) { /* doubled */
            uint64_t x = t[k];
            t[k] = x << 1 | top;
            top = x >> 63;
        }
        unsigned __int128 c = 0;
        for (uint32_t i = 0; i < w; i++) { /* plus the squares on the diagonal */
            unsigned __int128 sq = (unsigned __int128)a[i] * a[i];
            c += (unsigned __int128)t[2 * i] + (uint64_t)sq;
            t[2 * i] = (uint64_t)c;
            c >>= 64;
            c += (unsigned __int128)t[2 * i + 1] + (uint64_t)(sq >> 64);
            t[2 * i + 1] = (uint64_t)c;
            c >>= 64;
        }
    } else {
        for (uint32_t i = 0; i < w; i++) t[i + w] = addmul_1(t + i, a, w, b[i]);
    }
    uint64_t c2 = 0; /* the carry out of t[i + w] that reduction row i left */
    for (uint32_t i = 0; i < w; i++) {
        uint64_t cy = addmul_1(t + i, n, w, t[i] * ninv); /* t[i] becomes 0 */
        uint64_t s = t[i + w] + cy;
        uint64_t carry = s < cy;
        s += c2;
        carry += s < c2;
        t[i + w] = s;
        c2 = carry;
    }
    uint64_t *u = t + w; /* (a b + M n) / R = c2 * R + u */
    for (int k = 0; k < 4 && geq64(u, c2, n, w); k++) c2 -= sub64(u, n, w);
    if (geq64(u, c2, n, w)) return -1;
    memcpy(r, u, 4u * w32);
    return 0;
}

/* r = a * b * 2^(-32w) mod n (CIOS, Koc et al. 1996), fully reduced; -1 when the
 * product is left above 4n (a tiny n under long operands): pka.py reduces those. */
int pk_montmul(uint32_t *r, const uint32_t *a, const uint32_t *b, const uint32_t *n, uint32_t w) {
    if (w % 2 == 0) return montmul64(r, a, b, n, w);
    uint32_t t[MAX_WORDS + 2];
    uint32_t ninv = neg_inv32(n[0]);
    memset(t, 0, sizeof(uint32_t) * (w + 2));
    for (uint32_t i = 0; i < w; i++) {
        uint64_t c = 0, bi = b[i];
        for (uint32_t j = 0; j < w; j++) {
            c += (uint64_t)t[j] + (uint64_t)a[j] * bi;
            t[j] = (uint32_t)c;
            c >>= 32;
        }
        c += t[w];
        t[w] = (uint32_t)c;
        t[w + 1] = (uint32_t)(c >> 32);
        uint64_t m = (uint32_t)(t[0] * ninv);
        c = ((uint64_t)t[0] + m * n[0]) >> 32;
        for (uint32_t j = 1; j < w; j++) {
            c += (uint64_t)t[j] + m * n[j];
            t[j - 1] = (uint32_t)c;
            c >>= 32;
        }
        c += t[w];
        t[w - 1] = (uint32_t)c;
        t[w] = t[w + 1] + (uint32_t)(c >> 32);
    }
    for (int k = 0; k < 4 && geq(t, t[w], n, w); k++) t[w] -= sub_n(t, n, w);
    if (geq(t, t[w], n, w)) return -1;
    memcpy(r, t, sizeof(uint32_t) * w);
    return 0;
}
