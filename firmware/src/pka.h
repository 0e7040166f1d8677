/*
 * Driver for pkasim's public-key accelerator (register interface: docs/pka.md).
 *
 * Operands live in PKA RAM, least-significant word first; the driver addresses
 * them by word offset from the start of PKA RAM (the registers take byte offsets).
 * pka_exec() starts one operation and sleeps in WFI until the PKA interrupt
 * (PKA_IRQHandler) reports its end or an error; it never polls SR.BUSY.
 */
#ifndef PKASIM_PKA_H
#define PKASIM_PKA_H

#include <stdint.h>
#include "cmsis_min.h"

/* The PKA of the default chip, from configs/ciu98320b.yaml (peripherals.pka):
 * base, irq, ram_size and max_words. Change them with the chip description.
 * PKA_RAM_BYTES and PKA_MAX_WORDS are what the code is built for (checked at build
 * time); the chip the firmware runs on reports its own values in MAXLEN and RAMSIZE
 * (pka_max_words(), pka_ram_words()), which may be larger (configs/native4096.yaml). */
#define PKA_BASE        0x40010000u
#define PKA_IRQ         5u                          /* NVIC line */
#define PKA_IRQHandler  IRQ5_Handler                /* the vector of line PKA_IRQ */
#define PKA_RAM_OFFSET  0x400u                      /* docs/pka.md: PKA RAM at base + 0x400 */
#define PKA_RAM_BASE    (PKA_BASE + PKA_RAM_OFFSET)
#define PKA_RAM_BYTES   3072u                       /* ram_size: 3 KiB */
#define PKA_RAM_WORDS   (PKA_RAM_BYTES / 4u)
#define PKA_MAX_WORDS   64u                         /* max_words: a 2048-bit multiplier */

/* Registers (docs/pka.md, "Registers"). */
#define PKA_CR      REG32(PKA_BASE + 0x00u)
#define PKA_SR      REG32(PKA_BASE + 0x04u)
#define PKA_CLRFR   REG32(PKA_BASE + 0x08u)
#define PKA_LEN     REG32(PKA_BASE + 0x0Cu)
#define PKA_APTR    REG32(PKA_BASE + 0x10u)
#define PKA_BPTR    REG32(PKA_BASE + 0x14u)
#define PKA_NPTR    REG32(PKA_BASE + 0x18u)
#define PKA_RPTR    REG32(PKA_BASE + 0x1Cu)
#define PKA_CARRY   REG32(PKA_BASE + 0x20u)
#define PKA_LASTCYC REG32(PKA_BASE + 0x24u)
#define PKA_MAXLEN  REG32(PKA_BASE + 0x28u)     /* RO: max_words, the largest LEN */
#define PKA_RAMSIZE REG32(PKA_BASE + 0x2Cu)     /* RO: PKA RAM size in words */
#define PKA_CAPS    REG32(PKA_BASE + 0x30u)     /* RO: optional features (PKA_CAPS_PAIR) */
#define PKA_A2PTR   REG32(PKA_BASE + 0x34u)     /* MONTMUL2's second A (CAPS.PAIR chips only) */
#define PKA_R2PTR   REG32(PKA_BASE + 0x38u)     /* MONTMUL2's second result (CAPS.PAIR chips only) */
#define PKA_CAPS_PAIR      (1u << 0)            /* MONTMUL2: A*B and A2*B in one MONTMUL's time */
#define PKA_RAM     ((volatile uint32_t *)(uintptr_t)PKA_RAM_BASE)

#define PKA_CR_EN          (1u << 0)
#define PKA_CR_START       (1u << 1)
#define PKA_CR_OPCODE_POS  8u
#define PKA_CR_PROCENDIE   (1u << 17)
#define PKA_CR_RAMERRIE    (1u << 19)
#define PKA_CR_ADDRERRIE   (1u << 20)
#define PKA_CR_OPERRIE     (1u << 21)

#define PKA_SR_BUSY        (1u << 16)
#define PKA_SR_PROCENDF    (1u << 17)
#define PKA_SR_RAMERRF     (1u << 19)
#define PKA_SR_ADDRERRF    (1u << 20)
#define PKA_SR_OPERRF      (1u << 21)
#define PKA_SR_ERRORS      (PKA_SR_RAMERRF | PKA_SR_ADDRERRF | PKA_SR_OPERRF)
#define PKA_SR_FLAGS       (PKA_SR_PROCENDF | PKA_SR_ERRORS)

/* Operations (CR.OPCODE). */
#define PKA_MONTMUL 0x01u   /* R = A * B * 2^(-32*LEN) mod N */
#define PKA_MODADD  0x02u   /* R = (A + B) mod N */
#define PKA_MODSUB  0x03u   /* R = (A - B) mod N */
#define PKA_ADD     0x04u   /* R = A + B mod 2^(32*LEN), CARRY = carry out */
#define PKA_SUB     0x05u   /* R = A - B mod 2^(32*LEN), CARRY = borrow out */
#define PKA_MONTMUL2 0x06u  /* R = A (x) B and R2 = A2 (x) B (CAPS.PAIR chips only) */

/* pka_exec() results: 0, or the error flag the PKA raised. */
#define PKA_OK        0
#define PKA_ERR_OP    (-2)  /* OPERRF: bad LEN/opcode/EN, or an arithmetic rule (even N, N = 0) */
#define PKA_ERR_ADDR  (-3)  /* ADDRERRF: an operand runs past PKA RAM or is misaligned */
#define PKA_ERR_RAM   (-4)  /* RAMERRF: PKA RAM touched while BUSY */

/* Enable the PKA, its interrupts (end and every error) and its NVIC line. */
void pka_init(void);

/* One operation on LEN = len words; a, b, n, r are word offsets in PKA RAM (n is
 * ignored by ADD and SUB). Sleeps until the end; returns PKA_OK or PKA_ERR_*. */
int pka_exec(uint32_t op, uint32_t len, uint32_t a, uint32_t b, uint32_t n, uint32_t r);

/* The same in two parts, for loops: pka_config() writes LEN and NPTR, which then
 * stay for every pka_run() (three pointer writes and START). Each register write
 * is a bus access, and a call into the device model in the emulator. */
void pka_config(uint32_t len, uint32_t n);
int pka_run(uint32_t op, uint32_t a, uint32_t b, uint32_t r);

/* The chip's capabilities (docs/pka.md): the largest LEN its multiplier takes, in
 * words (64 = 2048 bits on the default chip), and its PKA RAM in words. */
static inline uint32_t pka_max_words(void) { return PKA_MAXLEN; }
static inline uint32_t pka_ram_words(void) { return PKA_RAMSIZE; }

/* CARRY of the last ADD/SUB (0 or 1). */
static inline uint32_t pka_carry(void) { return PKA_CARRY & 1u; }

/* CPU copies between memory and PKA RAM (word accesses only; off in words). */
static inline void pka_write(uint32_t off, uint32_t v) { PKA_RAM[off] = v; }
static inline uint32_t pka_read(uint32_t off) { return PKA_RAM[off]; }
void pka_fill(uint32_t off, uint32_t value, uint32_t words);
void pka_copy(uint32_t dst, uint32_t src, uint32_t words);
/* Load: `words` words from a big-endian byte string (4 * words bytes, any alignment). */
void pka_load_be(uint32_t off, const uint8_t *be, uint32_t words);
/* Fetch: `words` words to a big-endian byte string (4 * words bytes). */
void pka_fetch_be(uint32_t off, uint8_t *be, uint32_t words);

#endif
