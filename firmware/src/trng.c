/*
 * TRNG driver (trng.h, docs/trng.md): polls DRDY word by word; on a failed health test
 * (HTF) one reseed, then the words go on or the failure is reported.
 */
#include "trng.h"

void trng_init(void)
{
    TRNG_CR = TRNG_CR_EN;
    TRNG_SR_CLR = TRNG_SR_HTFI;
}

/* The next word, or TRNG_ERR_HEALTH after a failed reseed. */
static int next_word(uint32_t *word)
{
    int reseeded = 0;

    for (;;) {
        uint32_t sr = TRNG_SR;
        if (sr & TRNG_SR_DRDY) {
            *word = TRNG_DR;
            return TRNG_OK;
        }
        if (sr & TRNG_SR_HTF) {
            if (reseeded)
                return TRNG_ERR_HEALTH;
            TRNG_SR_CLR = TRNG_SR_HTFI;
            TRNG_CR = TRNG_CR_EN | TRNG_CR_RESEED;
            reseeded = 1;
        }
    }
}

int trng_read(void *buf, uint32_t len)
{
    uint8_t *out = buf;

    while (len > 0) {
        uint32_t word;
        int rc = next_word(&word);
        if (rc != TRNG_OK)
            return rc;
        for (uint32_t i = 0; i < 4 && len > 0; i++, len--)
            *out++ = (uint8_t)(word >> (8 * i));
    }
    return TRNG_OK;
}
