/*
 * compute: a speed benchmark. Multiplies two 64-limb (2048-bit, 32-bit limbs)
 * numbers into a 128-limb product with the schoolbook method, `iterations`
 * times, and prints a checksum of the product:
 *   "compute: <iterations> x 64x64-limb multiply, checksum 0x........\n"
 * Every iteration computes the same product, so the checksum does not depend
 * on `iterations` (a test may patch it: it lives in .data). The checksum is
 * also left in the global `compute_checksum`. Returns 0.
 *
 * One multiply (4096 inner steps, each a 32x32->64 product on a core without
 * UMULL) is about 180 k instructions built with zig cc and 260 k with
 * arm-none-eabi-gcc -O2 (which calls __aeabi_lmul), so the default of 25
 * iterations runs about 4.6 M / 6.4 M instructions in all.
 */
#include <stdint.h>
#include "semihost.h"

#define LIMBS 64u

volatile uint32_t iterations = 25;
volatile uint32_t compute_checksum;

static uint32_t a[LIMBS], b[LIMBS], r[2 * LIMBS];

/* xorshift32: deterministic operands without large initialised tables. */
static uint32_t rng_state = 0x2545F491u;

static uint32_t rng(void)
{
    uint32_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    rng_state = x;
    return x;
}

static void mul_schoolbook(uint32_t *restrict out, const uint32_t *x, const uint32_t *y)
{
    for (unsigned i = 0; i < 2 * LIMBS; i++)
        out[i] = 0;
    for (unsigned i = 0; i < LIMBS; i++) {
        uint32_t carry = 0;
        uint32_t xi = x[i];
        for (unsigned j = 0; j < LIMBS; j++) {
            uint64_t t = (uint64_t)xi * y[j] + out[i + j] + carry;
            out[i + j] = (uint32_t)t;
            carry = (uint32_t)(t >> 32);
        }
        out[i + LIMBS] = carry;
    }
}

int main(void)
{
    for (unsigned i = 0; i < LIMBS; i++) {
        a[i] = rng();
        b[i] = rng();
    }

    uint32_t n = iterations;
    for (uint32_t it = 0; it < n; it++)
        mul_schoolbook(r, a, b);

    uint32_t sum = 0;
    for (unsigned i = 0; i < 2 * LIMBS; i++)
        sum = ((sum << 5) | (sum >> 27)) ^ r[i];
    compute_checksum = sum;

    sh_puts("compute: ");
    sh_print_u32(n);
    sh_puts(" x 64x64-limb multiply, checksum ");
    sh_print_hex(sum);
    sh_puts("\n");
    return 0;
}
