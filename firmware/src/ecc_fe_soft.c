/*
 * The field layer in software (ecc_fe.h, ECC_SOFT=1; ecc_soft.elf): the same slots and
 * the same three operations as the PKA, computed on the CPU by the constant-time
 * Montgomery code of the software RSA baseline (src/bn.c: Mbed TLS 3.6's bignum core
 * with its Thumb-1 multiply-accumulate), at 8 limbs. Like the PKA's MODADD and MODSUB
 * (docs/pka.md) the results are fully reduced for operands below the modulus.
 */
#include "ecc_fe.h"
#include "bn.h"

uint32_t fe_ram[FE_SLOTS * FE_WORDS];

static const uint32_t *modulus = fe_ram;
static uint32_t mont_mm;

void fe_soft_modulus(fe_t n)
{
    modulus = &fe_ram[n / 4u];
    mont_mm = bn_mont_init(modulus[0]);
}

void fe_soft_op(uint32_t op, fe_t r, fe_t a, fe_t b)
{
    uint32_t acc[FE_WORDS];
    uint32_t scratch[BN_MONT_SCRATCH(FE_WORDS)];
    const uint32_t *x = &fe_ram[a / 4u], *y = &fe_ram[b / 4u];

    if (op == PKA_MONTMUL) {
        bn_copy(acc, x, FE_WORDS);
        bn_montmul(acc, y, modulus, FE_WORDS, mont_mm, scratch);
    } else if (op == PKA_MODADD) {
        uint32_t carry = bn_add(acc, x, y, FE_WORDS);
        bn_csub(acc, carry, modulus, FE_WORDS);
    } else {
        uint32_t borrow = bn_sub(acc, x, y, FE_WORDS);
        bn_add_masked(acc, acc, modulus, FE_WORDS, 0u - borrow);
    }
    bn_copy(&fe_ram[r / 4u], acc, FE_WORDS);
}
