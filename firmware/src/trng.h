/*
 * Driver for pkasim's true random number generator (register interface: docs/trng.md).
 * It polls SR.DRDY for each 32-bit word; when the generator's health test fails
 * (SR.HTF: a stuck source) it reseeds once and goes on, and reports the failure if the
 * reseeded source fails again.
 */
#ifndef PKASIM_TRNG_H
#define PKASIM_TRNG_H

#include <stdint.h>
#include "cmsis_min.h"

/* The TRNG of the default chip (configs/ciu98320b.yaml, peripherals.trng). */
#define TRNG_BASE    0x40030000u
#define TRNG_CR      REG32(TRNG_BASE + 0x00u)
#define TRNG_SR      REG32(TRNG_BASE + 0x04u)
#define TRNG_DR      REG32(TRNG_BASE + 0x08u)
#define TRNG_SR_CLR  REG32(TRNG_BASE + 0x0Cu)
#define TRNG_COUNT   REG32(TRNG_BASE + 0x10u)
#define TRNG_RESEEDS REG32(TRNG_BASE + 0x14u)

#define TRNG_CR_EN     (1u << 0)
#define TRNG_CR_IE     (1u << 1)
#define TRNG_CR_RESEED (1u << 2)
#define TRNG_SR_DRDY   (1u << 0)
#define TRNG_SR_BUSY   (1u << 1)
#define TRNG_SR_HTF    (1u << 2)
#define TRNG_SR_HTFI   (1u << 3)

#define TRNG_OK          0
#define TRNG_ERR_HEALTH  (-20)  /* the health test failed again after a reseed */

/* Enable the generator (no interrupt). */
void trng_init(void);
/* len random bytes into buf: TRNG_OK or TRNG_ERR_HEALTH. */
int trng_read(void *buf, uint32_t len);

#endif
