/*
 * ctleak: a deliberately leaky square-and-multiply, the example of docs/ct-check.md.
 *
 * It computes ct_base ^ ct_secret mod ct_modulus (a modulus below 2^15, so every
 * product fits in 32 bits) by left-to-right square-and-multiply over the 32 bits of
 * the secret exponent, in one of two ways (ct_mode):
 *   0  leaky_modexp: multiplies only when the exponent bit is 1, a branch on the
 *      secret: which blocks run, and how many cycles, depend on the exponent;
 *   1  ct_modexp: multiplies for every bit and keeps the product under a mask made
 *      from the bit: the same instructions and addresses for every exponent;
 *   2  window_modexp: fixed windows of 4 bits, multiplying by a table entry indexed by
 *      the window: no branch on the secret, but the table address it reads depends
 *      on it (a cache-timing leak on a chip with a cache; here a leak of addresses).
 * The modular multiplication itself is branch-free (shift and conditional subtract
 * under a mask), so the exponent's branch is the only leak.
 *
 * Inputs and outputs are ELF symbols in .data (pkasim run --load/--dump):
 *   ct_secret   the exponent (4 bytes, little-endian): the secret
 *   ct_base     the base, ct_modulus the modulus (below 2^15), ct_mode as above
 *   ct_result   the result
 * It prints "ctleak: done" and exits 0 (2 for a modulus out of range).
 */
#include <stdint.h>
#include "semihost.h"

#define DATA(name) __attribute__((section(".data." #name), used, aligned(4)))

DATA(ct_secret) uint32_t ct_secret = 0x9E3779B9u;
DATA(ct_base) uint32_t ct_base = 12345u;
DATA(ct_modulus) uint32_t ct_modulus = 32749u; /* the largest prime below 2^15 */
DATA(ct_mode) uint32_t ct_mode = 0u;
DATA(ct_result) uint32_t ct_result = 0u;

/* All ones if x is negative as a signed word, else 0; the empty asm keeps the
 * compiler from turning the mask back into a branch. */
static inline uint32_t sign_mask(uint32_t x)
{
    uint32_t m = (uint32_t)((int32_t)x >> 31);
    __asm__("" : "+r"(m));
    return m;
}

/* a * b mod m for a, b < m < 2^15: the product (below 2^30) reduced by 16 conditional
 * subtractions of m << k, each under a mask. */
static uint32_t mulmod(uint32_t a, uint32_t b, uint32_t m)
{
    uint32_t r = a * b;
    for (int k = 15; k >= 0; k--) {
        uint32_t t = r - (m << k);
        uint32_t keep = sign_mask(t); /* all ones: r was below m << k */
        r = (r & keep) | (t & ~keep);
    }
    return r;
}

__attribute__((noinline)) uint32_t leaky_modexp(uint32_t base, uint32_t exp, uint32_t m)
{
    uint32_t r = 1;
    for (int i = 31; i >= 0; i--) {
        r = mulmod(r, r, m);
        if ((exp >> i) & 1u) /* LEAK: a branch on a bit of the secret exponent */
            r = mulmod(r, base, m);
    }
    return r;
}

__attribute__((noinline)) uint32_t ct_modexp(uint32_t base, uint32_t exp, uint32_t m)
{
    uint32_t r = 1;
    for (int i = 31; i >= 0; i--) {
        r = mulmod(r, r, m);
        uint32_t p = mulmod(r, base, m);
        uint32_t take = 0u - ((exp >> i) & 1u);
        __asm__("" : "+r"(take));
        r = (p & take) | (r & ~take);
    }
    return r;
}

__attribute__((noinline)) uint32_t window_modexp(uint32_t base, uint32_t exp, uint32_t m)
{
    uint32_t table[16];
    table[0] = 1;
    for (int j = 1; j < 16; j++)
        table[j] = mulmod(table[j - 1], base, m);
    uint32_t r = 1;
    for (int i = 28; i >= 0; i -= 4) {
        for (int k = 0; k < 4; k++)
            r = mulmod(r, r, m);
        r = mulmod(r, table[(exp >> i) & 15u], m); /* LEAK: an address from the secret exponent */
    }
    return r;
}

/* How many times main computes it (.data, default 1): a long run for the test that
 * ct-check stops a run that differs soon after its first difference. */
DATA(ct_repeat) uint32_t ct_repeat = 1u;

int main(void)
{
    uint32_t m = ct_modulus;
    if (m < 2u || m >= 1u << 15) {
        sh_puts("ctleak: modulus out of range\n");
        return 2;
    }
    uint32_t base = ct_base % m;
    uint32_t mode = ct_mode;
    for (uint32_t n = 0; n == 0 || n < ct_repeat; n++)
        ct_result = mode == 2 ? window_modexp(base, ct_secret, m)
                  : mode == 1 ? ct_modexp(base, ct_secret, m)
                  : leaky_modexp(base, ct_secret, m);
    sh_puts("ctleak: done\n");
    return 0;
}
