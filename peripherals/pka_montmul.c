/*
 * The PKA's MONTMUL in native code: r = a b 2^(-32w) mod n, fully reduced, exactly as
 * peripherals/pka_math.py computes it (docs/pka.md), or -1 where the product is left
 * above 4n (a tiny n under long operands: pka.py reduces those). pka_fast.c calls it
 * for MONTMUL and the parallel pair's MONTMUL2; it needs nothing of the emulator, so
 * benchmarks/montmul_native.py builds it on its own.
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

/* ------------------------------------------------------------------ AVX-512 IFMA */

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_IFMA_PATH 1
#include <immintrin.h>

#define MASK52 ((UINT64_C(1) << 52) - 1)
/* From 576 bits (18 words) at even lengths, 288 bits (9 words) at odd ones (which the
 * 32-bit CIOS rows serve otherwise), the IFMA rows win by 1.15x and more (1.45x at 1024
 * bits, 2.4x at 2048: benchmarks/montmul_native.py); below, the 64-bit rows. */
#ifndef IFMA_MIN_WORDS
#define IFMA_MIN_WORDS 18
#endif
#ifndef IFMA_MIN_ODD_WORDS
#define IFMA_MIN_ODD_WORDS 9
#endif
#define IFMA_MAX_VEC ((32 * MAX_WORDS + 51) / 52 / 8 + 1)

static int have_ifma(void) {
    static int known = -1;
    if (known < 0) {
        __builtin_cpu_init();
        known = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512ifma");
    }
    return known;
}

/* w words as 52-bit digits, zero up to 8 nv + 1 digits: digit i is the 8 bytes from
 * byte 6.5 i (13 bytes hold two digits) shifted right by 0 or 4 bits, so one byte
 * permutation (VBMI's vpermb) of the 64 bytes from byte 52 j, a shift and a mask make
 * the eight digits of vector j; the masked load reads nothing beyond the w words and
 * zeroes the bytes above them. */
static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vbmi"))) void
to_digits(uint64_t *d, const uint32_t *x, uint32_t w, uint32_t nv) {
    static const uint8_t from[64] = { /* lane l: the 8 bytes from byte 6.5 l, rounded down */
    0, 1, 2, 3, 4, 5, 6, 7,
    6, 7, 8, 9, 10, 11, 12, 13,
    13, 14, 15, 16, 17, 18, 19, 20,
    19, 20, 21, 22, 23, 24, 25, 26,
    26, 27, 28, 29, 30, 31, 32, 33,
    32, 33, 34, 35, 36, 37, 38, 39,
    39, 40, 41, 42, 43, 44, 45, 46,
    45, 46, 47, 48, 49, 50, 51, 52,
    };
    const __m512i idx = _mm512_loadu_si512(from);
    const __m512i shift = _mm512_set_epi64(4, 0, 4, 0, 4, 0, 4, 0);
    const __m512i mask = _mm512_set1_epi64((long long)MASK52);
    const uint8_t *bytes = (const uint8_t *)x;
    const int32_t len = (int32_t)(4 * w);
    for (uint32_t j = 0; j < nv; j++) {
        int32_t left = len - (int32_t)(52 * j);
        __mmask64 k = left >= 64 ? ~(__mmask64)0 : left > 0 ? ((__mmask64)1 << left) - 1 : 0;
        __m512i v = _mm512_maskz_loadu_epi8(k, bytes + 52 * j);
        v = _mm512_and_si512(_mm512_srlv_epi64(_mm512_permutexvar_epi8(idx, v), shift), mask);
        _mm512_storeu_si512(d + 8 * j, v);
    }
    d[8 * nv] = 0;
}

/* -n^-1 mod 2^52: for odd n, (3 n) xor 2 is n^-1 to 5 bits (Montgomery's seed) and
 * four Newton steps make 80; the inverse mod 2^52 is unique, so this is neg_inv64's
 * value in fewer steps. An even n has none: neg_inv64's (meaningless) value then, so
 * the bits stay the same. */
static uint64_t neg_inv52(uint64_t n0) {
    if (!(n0 & 1)) return neg_inv64(n0) & MASK52;
    uint64_t x = (3 * n0) ^ 2;
    for (int i = 0; i < 4; i++) x *= 2u - n0 * x;
    return (0u - x) & MASK52;
}

/* The rows of the product on nv vectors of eight 52-bit digits (vpmadd52luq/huq add
 * the low and high 52 bits of 52x52-bit products into 64-bit lanes, which hold the
 * carries until the end: each lane takes at most 4 terms below 2^52 a digit, so 64-bit
 * lanes last 1024 digits). Digit i of b: t += a b_i, m = t k0 mod 2^52, t += m n, and
 * t, now a multiple of 2^52, moves down one lane (its lane 0's carry into the new lane
 * 0); then the high halves, which weigh one lane more, land where they belong. The
 * high halves of a b_i and the low ones of a b_(i+1) do not depend on m: they are
 * summed aside (u), with the high halves of m n, and the next row's lane 0 is summed
 * in a register from the lanes they come from, so that only a multiply, a broadcast,
 * one IFMA and a lane read stand between one m and the next (about 15 cycles, 22 when
 * m waited for the shifted vector). Then
 * the last, partial digit (dp bits) when the length is no multiple of 52 bits: its
 * high halves go to h, one lane up, and the caller shifts the sum right by dp bits. */
static inline __attribute__((always_inline, target("avx512f,avx512ifma"))) void
ifma_rows(uint64_t *tout, uint64_t *hout, const uint64_t *ad, const uint64_t *bd, const uint64_t *nd, uint32_t k,
          uint32_t dp, uint64_t k0, const int nv) {
    __m512i A[IFMA_MAX_VEC], N[IFMA_MAX_VEC], T[IFMA_MAX_VEC], U[IFMA_MAX_VEC];
    const __m512i zero = _mm512_setzero_si512();
    const uint32_t digits = k + (dp != 0);
    __m512i bi = _mm512_set1_epi64((long long)bd[0]);
    for (int j = 0; j < nv; j++) {
        A[j] = _mm512_loadu_si512(ad + 8 * j);
        N[j] = _mm512_loadu_si512(nd + 8 * j);
        T[j] = _mm512_madd52lo_epu64(zero, A[j], bi);
    }
    const uint64_t n0 = nd[0];
    uint64_t t0 = (uint64_t)_mm_cvtsi128_si64(_mm512_castsi512_si128(T[0]));
    for (uint32_t i = 0; i < k; i++) {
        const __m512i bnext = _mm512_set1_epi64(i + 1 < digits ? (long long)bd[i + 1] : 0);
        for (int j = 0; j < nv; j++) U[j] = _mm512_madd52lo_epu64(_mm512_madd52hi_epu64(zero, A[j], bi), A[j], bnext);
        uint64_t m = (t0 * k0) & MASK52;
        const __m512i mv = _mm512_set1_epi64((long long)m);
        for (int j = 0; j < nv; j++) T[j] = _mm512_madd52lo_epu64(T[j], N[j], mv);
        uint64_t carry = (t0 + ((n0 * m) & MASK52)) >> 52;
        for (int j = 0; j < nv; j++) U[j] = _mm512_madd52hi_epu64(U[j], N[j], mv);
        /* the next row's lane 0, summed in a register from lane 1 and the high halves
         * before the vectors are: the only path from one m to the next */
        t0 = (uint64_t)_mm_extract_epi64(_mm512_castsi512_si128(T[0]), 1) +
             (uint64_t)_mm_cvtsi128_si64(_mm512_castsi512_si128(U[0])) + carry;
        U[0] = _mm512_add_epi64(U[0], _mm512_maskz_set1_epi64(1, (long long)carry));
        for (int j = 0; j + 1 < nv; j++) T[j] = _mm512_add_epi64(_mm512_alignr_epi64(T[j + 1], T[j], 1), U[j]);
        T[nv - 1] = _mm512_add_epi64(_mm512_alignr_epi64(zero, T[nv - 1], 1), U[nv - 1]);
        bi = bnext;
    }
    __m512i H[IFMA_MAX_VEC];
    for (int j = 0; j < nv; j++) H[j] = zero;
    if (dp) { /* t already holds the low halves of a b_k */
        uint64_t t0 = (uint64_t)_mm_cvtsi128_si64(_mm512_castsi512_si128(T[0]));
        uint64_t m = (t0 * k0) & ((UINT64_C(1) << dp) - 1);
        const __m512i mv = _mm512_set1_epi64((long long)m);
        for (int j = 0; j < nv; j++) {
            T[j] = _mm512_madd52lo_epu64(T[j], N[j], mv);
            H[j] = _mm512_madd52hi_epu64(_mm512_madd52hi_epu64(zero, A[j], bi), N[j], mv);
        }
    }
    for (int j = 0; j < nv; j++) {
        _mm512_storeu_si512(tout + 8 * j, T[j]);
        _mm512_storeu_si512(hout + 8 * j, H[j]);
    }
}

#define IFMA_ROWS(NV)                                                                                            \
    static __attribute__((target("avx512f,avx512ifma"), noinline)) void ifma_rows_##NV(                          \
        uint64_t *tout, uint64_t *hout, const uint64_t *ad, const uint64_t *bd, const uint64_t *nd, uint32_t k,  \
        uint32_t dp, uint64_t k0) {                                                                              \
        ifma_rows(tout, hout, ad, bd, nd, k, dp, k0, NV);                                                        \
    }
IFMA_ROWS(1)
IFMA_ROWS(2)
IFMA_ROWS(3)
IFMA_ROWS(4)
IFMA_ROWS(5)
IFMA_ROWS(6)
IFMA_ROWS(7)
IFMA_ROWS(8)
IFMA_ROWS(9)
IFMA_ROWS(10)
typedef void (*ifma_rows_fn)(uint64_t *, uint64_t *, const uint64_t *, const uint64_t *, const uint64_t *, uint32_t,
                             uint32_t, uint64_t);
static const ifma_rows_fn IFMA_BY_NV[IFMA_MAX_VEC + 1] = {0,           ifma_rows_1, ifma_rows_2, ifma_rows_3,
                                                          ifma_rows_4, ifma_rows_5, ifma_rows_6, ifma_rows_7,
                                                          ifma_rows_8, ifma_rows_9, ifma_rows_10};

/* The IFMA rows' sum (lane i of t, plus lane i - 1 of h, weighs 2^(52 i); lanes below
 * 2^64) shifted right by dp bits, as 64-bit words. In vectors: one step moves every
 * lane's bits above 52 up a lane, which leaves lanes below 2^52 + 2^12, so each now
 * carries at most 1 and takes at most 1: those carries ripple through the lanes of
 * all ones as in an addition of lane masks (carries in = (G << 1) + P xor P, G the
 * lanes that carry, P the lanes of all ones). Then each vector's eight exact 52-bit
 * digits are packed to 52 bytes by two byte permutations (the odd digits shifted up 4
 * bits first, the 13th byte of a pair taking half of each), and the words read from
 * bit dp on. */
static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vbmi"))) void
to_words(uint64_t *u, const uint64_t *t, const uint64_t *h, uint32_t nv, uint32_t dp, uint32_t words) {
    /* byte 13 p + q of a pair p: byte q of digit 2 p (q <= 6), byte q - 6 of digit 2 p + 1
     * shifted up 4 bits (q >= 6) */
    static const uint8_t idx_even[64] = {
        0, 1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 0, 0,
        16, 17, 18, 19, 20, 21, 22, 0, 0, 0, 0, 0, 0,
        32, 33, 34, 35, 36, 37, 38, 0, 0, 0, 0, 0, 0,
        48, 49, 50, 51, 52, 53, 54, 0, 0, 0, 0, 0, 0,
    };
    static const uint8_t idx_odd[64] = {
        0, 0, 0, 0, 0, 0, 8, 9, 10, 11, 12, 13, 14,
        0, 0, 0, 0, 0, 0, 24, 25, 26, 27, 28, 29, 30,
        0, 0, 0, 0, 0, 0, 40, 41, 42, 43, 44, 45, 46,
        0, 0, 0, 0, 0, 0, 56, 57, 58, 59, 60, 61, 62,
    };
    const __mmask64 k_even = UINT64_C(0x3f81fc0fe07f), k_odd = UINT64_C(0xfe07f03f81fc0);
    const __m512i mask = _mm512_set1_epi64((long long)MASK52), zero = _mm512_setzero_si512();
    __m512i S[IFMA_MAX_VEC + 1];
    __m512i hprev = zero, cprev = zero;
    for (uint32_t j = 0; j <= nv; j++) {
        __m512i tj = j < nv ? _mm512_loadu_si512(t + 8 * j) : zero;
        __m512i hj = j < nv ? _mm512_loadu_si512(h + 8 * j) : zero;
        S[j] = _mm512_add_epi64(tj, _mm512_alignr_epi64(hj, hprev, 7));
        hprev = hj;
    }
    for (uint32_t j = 0; j <= nv; j++) {
        __m512i cj = _mm512_srli_epi64(S[j], 52);
        S[j] = _mm512_add_epi64(_mm512_and_si512(S[j], mask), _mm512_alignr_epi64(cj, cprev, 7));
        cprev = cj;
    }
    unsigned __int128 g = 0, p = 0;
    for (uint32_t j = 0; j <= nv; j++) {
        g |= (unsigned __int128)_mm512_cmpgt_epu64_mask(S[j], mask) << (8 * j);
        p |= (unsigned __int128)_mm512_cmpeq_epu64_mask(S[j], mask) << (8 * j);
    }
    unsigned __int128 cin = ((g << 1) + p) ^ p;
    const __m512i one = _mm512_set1_epi64(1), up4 = _mm512_set_epi64(4, 0, 4, 0, 4, 0, 4, 0);
    const __m512i ie = _mm512_loadu_si512(idx_even), io = _mm512_loadu_si512(idx_odd);
    uint8_t packed[52 * (IFMA_MAX_VEC + 1) + 64];
    for (uint32_t j = 0; j <= nv; j++) {
        __m512i d = _mm512_and_si512(_mm512_mask_add_epi64(S[j], (__mmask8)(cin >> (8 * j)), S[j], one), mask);
        d = _mm512_sllv_epi64(d, up4);
        __m512i bytes = _mm512_or_si512(_mm512_maskz_permutexvar_epi8(k_even, ie, d),
                                        _mm512_maskz_permutexvar_epi8(k_odd, io, d));
        _mm512_storeu_si512(packed + 52 * j, bytes); /* its 12 zero bytes above are the next one's */
    }
    const uint8_t *from = packed + dp / 8;
    const uint32_t s = dp % 8;
    for (uint32_t o = 0; o < words; o++) {
        uint64_t lo, hi;
        memcpy(&lo, from + 8 * o, 8);
        memcpy(&hi, from + 8 * o + 8, 8);
        u[o] = s ? lo >> s | hi << (64 - s) : lo;
    }
}

/* The same value as the CIOS and SOS products, (a b + M n) / 2^(32w) with the one
 * M < 2^(32w) that makes the division exact, on 52-bit digits: the digits of b
 * (bits = 32w = 52 k + dp) give M's digits m_0..m_(k-1) of 52 bits and a last one of
 * dp bits, so the sum and when it declines are theirs, bit for bit. */
static __attribute__((target("avx512f,avx512bw,avx512vbmi"))) int montmul_ifma(uint32_t *r, const uint32_t *a, const uint32_t *b, const uint32_t *n, uint32_t w) {
    uint32_t bits = 32 * w, k = bits / 52, dp = bits % 52, digits = k + (dp != 0);
    uint32_t nv = (digits + 7) / 8;
    uint64_t ad[8 * IFMA_MAX_VEC + 1], bd[8 * IFMA_MAX_VEC + 1], nd[8 * IFMA_MAX_VEC + 1];
    uint64_t t[8 * IFMA_MAX_VEC + 1], h[8 * IFMA_MAX_VEC + 1];
    to_digits(ad, a, w, nv);
    to_digits(bd, b, w, nv);
    to_digits(nd, n, w, nv);
    uint64_t k0 = neg_inv52(nd[0]);
    IFMA_BY_NV[nv](t, h, ad, bd, nd, k, dp, k0);
    /* the sum, below 2^(32w + 1 + dp) (before the shift of the last, partial digit): */
    const uint32_t words = w / 2 + 1; /* 64-bit words that hold the w words and the top one */
    uint64_t u[MAX_WORDS / 2 + 2];
    to_words(u, t, h, nv, dp, words);
    if (w % 2 == 0) { /* the same subtractions on 64-bit limbs */
        uint64_t n64[MAX_WORDS / 2], top = u[w / 2];
        memcpy(n64, n, 4u * w);
        for (int i = 0; i < 4 && geq64(u, top, n64, w / 2); i++) top -= sub64(u, n64, w / 2);
        if (geq64(u, top, n64, w / 2)) return -1;
        memcpy(r, u, 4u * w);
        return 0;
    }
    uint32_t u32[MAX_WORDS + 2];
    memcpy(u32, u, 8u * words);
    if (pk_reduce_few(u32, u32[w], n, w)) return -1;
    memcpy(r, u32, 4u * w);
    return 0;
}
#else
#define HAVE_IFMA_PATH 0
#endif

/* 1 (the default): the IFMA rows where the CPU has them, for the lengths where they
 * win; 2: at every length (tests); 0: never. */
static int use_ifma = 1;

int pk_montmul_use_ifma(int on) {
    int was = use_ifma;
    use_ifma = on;
#if HAVE_IFMA_PATH
    return was && have_ifma();
#else
    (void)was;
    return 0;
#endif
}

/* r = a * b * 2^(-32w) mod n (CIOS, Koc et al. 1996), fully reduced; -1 when the
 * product is left above 4n (a tiny n under long operands): pka.py reduces those. */
int pk_montmul(uint32_t *r, const uint32_t *a, const uint32_t *b, const uint32_t *n, uint32_t w) {
#if HAVE_IFMA_PATH
    if (use_ifma && use_adx && (w >= (w % 2 ? IFMA_MIN_ODD_WORDS : IFMA_MIN_WORDS) || use_ifma == 2) && have_ifma())
        return montmul_ifma(r, a, b, n, w);
#endif
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
    if (pk_reduce_few(t, t[w], n, w)) return -1;
    memcpy(r, t, sizeof(uint32_t) * w);
    return 0;
}
