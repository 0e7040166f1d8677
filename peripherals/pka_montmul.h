/* The PKA's MONTMUL in native code (pka_montmul.c). */
#ifndef PKA_MONTMUL_H
#define PKA_MONTMUL_H

#include <stdint.h>

#define PK_MONTMUL_MAX_WORDS 128

/* t (w words, plus ``top`` above them) >= n (w words): the test before a final
 * subtraction. */
static inline int pk_geq(const uint32_t *t, uint32_t top, const uint32_t *n, uint32_t w) {
    if (top) return 1;
    for (uint32_t i = w; i-- > 0;)
        if (t[i] != n[i]) return t[i] > n[i];
    return 1;
}

/* t -= n (w words); returns the borrow out. */
static inline uint32_t pk_sub_n(uint32_t *t, const uint32_t *n, uint32_t w) {
    uint64_t borrow = 0;
    for (uint32_t i = 0; i < w; i++) {
        uint64_t d = (uint64_t)t[i] - n[i] - borrow;
        t[i] = (uint32_t)d;
        borrow = (d >> 63) & 1;
    }
    return (uint32_t)borrow;
}

/* t (w words, plus ``top`` above them) brought below n by subtracting n at most four
 * times: 0; -1 when that is not enough (n = 0 included). The final reduction of the
 * MONTMUL here and of pka_fast.c's MODADD and MODSUB. */
static inline int pk_reduce_few(uint32_t *t, uint32_t top, const uint32_t *n, uint32_t w) {
    for (int k = 0; pk_geq(t, top, n, w); k++) {
        if (k == 4) return -1;
        top -= pk_sub_n(t, n, w);
    }
    return 0;
}

/* r = a * b * 2^(-32w) mod n (odd n, 1 <= w <= PK_MONTMUL_MAX_WORDS words), fully
 * reduced: 0; -1 (r untouched) when the product is left above 4n. r may alias a or b. */
int pk_montmul(uint32_t *r, const uint32_t *a, const uint32_t *b, const uint32_t *n, uint32_t w);

/* 1: the MULX/ADX rows where the CPU has them (the default), 0: the portable C rows
 * (tests run both: they give the same bits). Returns whether the fast rows were in use. */
int pk_montmul_use_adx(int on);

/* 1: the AVX-512 IFMA rows (52-bit digits; AVX-512 IFMA, BW and VBMI) where the CPU has
 * them, for the lengths where they are faster (the default: from 576 bits, odd lengths
 * from 288); 2: at every length (tests); 0: the 64-bit rows. The
 * same bits either way; pk_montmul_use_adx(0) turns them off too. Returns whether the
 * IFMA rows were in use (the CPU has them and they were on). */
int pk_montmul_use_ifma(int on);

#endif
