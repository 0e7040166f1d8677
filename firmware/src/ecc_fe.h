/*
 * Field arithmetic for the ECC code (docs/ecc.md): 256-bit numbers modulo a prime (the
 * curve's field p, or the group order n or L) on the PKA at LEN = 8, or the same
 * operations in plain C (the software baseline, ecc_soft.elf, built with ECC_SOFT=1).
 *
 * Operands live in slots: 96 slots of 8 words (32 bytes) fill the 3 KiB of PKA RAM.
 * A slot is named by its byte offset in PKA RAM (FE_SLOT(i) = 32 i), which is what
 * the PKA's pointer registers take, so starting an operation writes the three
 * pointers and CR and nothing else (pka_poll.h: the CPU polls SR.BUSY, no interrupt).
 * In the software build the slots are an array in SRAM and each operation is a call
 * of the constant-time Montgomery code of the software RSA baseline (src/bn.c).
 *
 * Every value is kept fully reduced below the modulus, so the code is also right on a
 * PKA with strict_operands (docs/pka.md): MODADD and MODSUB of reduced operands give
 * reduced results, and the CPU reduces what it loads (fe_load_* callers check or
 * reduce first).
 *
 * Montgomery form: MONTMUL(a, b) = a b R^-1 mod N with R = 2^256. Field elements are
 * held as x R mod p; MONTMUL by the constant R^2 mod p converts into that form and a
 * MONTMUL by the plain 1 converts back.
 *
 * Timing: every operation's busy time depends on its kind and LEN only (docs/pka.md),
 * and the software operations run the same instructions for every value, so a fixed
 * sequence of fe_* calls takes the same time whatever the numbers.
 */
#ifndef PKASIM_ECC_FE_H
#define PKASIM_ECC_FE_H

#include <stdint.h>
#include "pka.h"

#ifndef ECC_SOFT
#define ECC_SOFT 0
#endif

#define FE_WORDS   8u                   /* LEN: 256-bit operands */
#define FE_BYTES   32u
#define FE_SLOTS   (PKA_RAM_BYTES / FE_BYTES)   /* 96 */
#define FE_SLOT(i) ((uint32_t)(i) * FE_BYTES)

typedef uint32_t fe_t;                  /* a slot: its byte offset in PKA RAM */

/* x, hidden from the optimizer: a mask made from a secret stays a mask (clang turns
 * `a & mask` back into a branch when it can prove mask is 0 or all ones). */
static inline uint32_t ct_barrier(uint32_t x)
{
    __asm__ volatile("" : "+r"(x));
    return x;
}

/* All ones when bit is 1, zero when it is 0 (bit is 0 or 1). */
static inline uint32_t ct_mask(uint32_t bit)
{
    return 0u - ct_barrier(bit);
}

/* ---- operations ---------------------------------------------------------------- */

#if ECC_SOFT
/* src/ecc_fe_soft.c: the slots in SRAM, the operations in C. */
extern uint32_t fe_ram[FE_SLOTS * FE_WORDS];
void fe_soft_op(uint32_t op, fe_t r, fe_t a, fe_t b);
void fe_soft_modulus(fe_t n);

static inline volatile uint32_t *fe_words(fe_t s) { return (volatile uint32_t *)&fe_ram[s / 4u]; }
static inline void fe_init(void) {}
static inline void fe_wait(void) {}
static inline void fe_modulus(fe_t n) { fe_soft_modulus(n); }
static inline void fe_mul(fe_t r, fe_t a, fe_t b) { fe_soft_op(PKA_MONTMUL, r, a, b); }
static inline void fe_add(fe_t r, fe_t a, fe_t b) { fe_soft_op(PKA_MODADD, r, a, b); }
static inline void fe_sub(fe_t r, fe_t a, fe_t b) { fe_soft_op(PKA_MODSUB, r, a, b); }
static inline int fe_errors(void) { return 0; }
#else
#include "pka_poll.h"

static inline volatile uint32_t *fe_words(fe_t s) { return PKA_RAM + s / 4u; }

/* The PKA on, LEN = 8, flags clear. */
static inline void fe_init(void)
{
    pkp_init();
    PKA_LEN = FE_WORDS;
}

/*
 * Until the PKA is idle (before the CPU touches PKA RAM or starts the next operation):
 * a one-block loop `ldr; tst; bne` on SR, 6 cycles a turn. Written in assembly because
 * clang unrolls pkp_wait's C loop four times; at LEN = 8 an operation lasts 24 to 63
 * cycles, so the unrolled loop read SR a dozen times per MONTMUL, each read a device
 * access the emulator serves, while the emulator fast-forwards a one-block poll loop
 * to the PKA's end after its second turn (docs/pka.md, docs/ecc.md).
 */
static inline void fe_wait(void)
{
    uint32_t sr;

    __asm__ volatile("1:\n\t"
                     "ldr %[sr], [%[reg]]\n\t"
                     "tst %[sr], %[busy]\n\t"
                     "bne 1b"
                     : [sr] "=&l"(sr)
                     : [reg] "l"(&PKA_SR), [busy] "l"(PKA_SR_BUSY)
                     : "cc", "memory");
}

/* The modulus of the operations that follow. */
static inline void fe_modulus(fe_t n)
{
    fe_wait();
    PKA_NPTR = n;
}

static inline void fe_op(uint32_t op, fe_t r, fe_t a, fe_t b)
{
    fe_wait();
    PKA_APTR = a;
    PKA_BPTR = b;
    PKA_RPTR = r;
    PKA_CR = PKP_CR(op);
}

/* r = a b R^-1 mod N */
static inline void fe_mul(fe_t r, fe_t a, fe_t b) { fe_op(PKA_MONTMUL, r, a, b); }
/* r = a + b mod N */
static inline void fe_add(fe_t r, fe_t a, fe_t b) { fe_op(PKA_MODADD, r, a, b); }
/* r = a - b mod N */
static inline void fe_sub(fe_t r, fe_t a, fe_t b) { fe_op(PKA_MODSUB, r, a, b); }

/* 0, or the first PKA error flag raised since fe_init or the last call (pkp_errors);
 * every flag is cleared, PROCENDF too, so that an interrupt-driven PKA driver used
 * next (pka.c, the card's RSA) does not take a stale completion for its own. */
static inline int fe_errors(void)
{
    fe_wait();
    int rc = pkp_errors();
    PKA_CLRFR = PKA_SR_FLAGS;
    return rc;
}
#endif

static inline void fe_sqr(fe_t r, fe_t a) { fe_mul(r, a, a); }

/* ---- the CPU's side: loading and reading slots (the PKA idle first) ---------------- */

/* A slot from 8 words (least significant first). */
void fe_set(fe_t s, const uint32_t w[FE_WORDS]);
/* 8 words from a slot. */
void fe_get(uint32_t w[FE_WORDS], fe_t s);
/* A slot from 32 bytes, big-endian (P-256) or little-endian (X25519, Ed25519). */
void fe_set_be(fe_t s, const uint8_t be[FE_BYTES]);
void fe_set_le(fe_t s, const uint8_t le[FE_BYTES]);
/* A slot from a 16-byte little-endian piece (the top 4 words zero). */
void fe_set_le128(fe_t s, const uint8_t le[16]);
/* A slot to 32 bytes. */
void fe_get_be(uint8_t be[FE_BYTES], fe_t s);
void fe_get_le(uint8_t le[FE_BYTES], fe_t s);
/* dst = src (a CPU copy). */
void fe_copy(fe_t dst, fe_t src);
/* Nonzero when the two slots hold the same value (public values only: it returns early). */
int fe_equal(fe_t a, fe_t b);
/* Swap the slots a and b when bit = 1, leave them when bit = 0; the same accesses
 * either way (every word of both is read and written under a mask). */
void fe_cswap(uint32_t bit, fe_t a, fe_t b);

/* ---- numbers as 8 words on the CPU ---------------------------------------------------- */

/* 32 bytes big-endian / little-endian <-> 8 words. */
void words_from_be(uint32_t w[FE_WORDS], const uint8_t be[FE_BYTES]);
void words_to_be(uint8_t be[FE_BYTES], const uint32_t w[FE_WORDS]);
void words_from_le(uint32_t w[FE_WORDS], const uint8_t le[FE_BYTES]);
void words_to_le(uint8_t le[FE_BYTES], const uint32_t w[FE_WORDS]);
/* All ones when a < b, else zero; constant time. */
uint32_t words_lt(const uint32_t a[FE_WORDS], const uint32_t b[FE_WORDS]);
/* All ones when a is zero, else zero; constant time. */
uint32_t words_is_zero(const uint32_t a[FE_WORDS]);
/* a -= b when mask is all ones (constant time); returns the borrow under the mask. */
uint32_t words_csub(uint32_t a[FE_WORDS], const uint32_t b[FE_WORDS], uint32_t mask);

/*
 * r = a^e mod N in Montgomery form (a in Montgomery form, e public, 8 words), with
 * one = R mod N: 4-bit fixed windows, left to right, the table a^1..a^15 in the 15
 * slots from tab (tab, tab + 32, ...). The same operations for every a; the
 * exponent's windows pick table slots directly, as they are public (p - 2, n - 2).
 * r must not be a, one or in the table.
 */
void fe_pow(fe_t r, fe_t a, const uint32_t e[FE_WORDS], fe_t one, fe_t tab);

/* ---- tables of points in SRAM ------------------------------------------------------- */

/*
 * Scalar multiplication keeps its table of 16 points in SRAM (fe_table), each entry
 * `words` words (3 or 4 coordinates of 8 words), and brings the one it needs into
 * consecutive slots from dst: fe_table_select reads every entry under a mask (the
 * same addresses whatever idx: for secret scalars), fe_table_load only the one (for
 * public scalars). fe_table_store saves consecutive slots from src as entry idx.
 * Two tables (verification) fill FE_TABLE_WORDS.
 */
#ifndef ECC_CARD
#define ECC_CARD 0
#endif
#define FE_TABLE_ENTRIES 16u
#if ECC_CARD
/* The card (images/card.c) verifies nothing: one table of P-256 points (ECDH). */
#define FE_TABLE_WORDS   (FE_TABLE_ENTRIES * 24u)
#else
#define FE_TABLE_WORDS   (2u * FE_TABLE_ENTRIES * 32u)
#endif
extern uint32_t fe_table[FE_TABLE_WORDS];
void fe_table_store(uint32_t *tab, uint32_t words, uint32_t idx, fe_t src);
void fe_table_select(const uint32_t *tab, uint32_t words, uint32_t idx, fe_t dst);
void fe_table_load(const uint32_t *tab, uint32_t words, uint32_t idx, fe_t dst);

#endif
