/*
 * PKA driver (docs/pka.md): start an operation, sleep until its interrupt, report
 * the error flags; CPU copies into and out of PKA RAM.
 *
 * Waiting: the core sleeps in WFI with PRIMASK set, so the end of an operation
 * cannot slip in between the test of the done flag and the WFI (a pending
 * interrupt wakes WFI even under PRIMASK, ARMv6-M B1.5.17). After the wake-up,
 * CPSIE + ISB lets the interrupt be taken (the ISB makes it architecturally
 * visible before the next instruction); PKA_IRQHandler clears the flags through
 * CLRFR and sets the done flag. Every error flag has its interrupt enabled too,
 * so a refused START (OPERRF, ADDRERRF) also ends the wait.
 */
#include "pka.h"

#define PKA_CR_IRQS (PKA_CR_PROCENDIE | PKA_CR_RAMERRIE | PKA_CR_ADDRERRIE | PKA_CR_OPERRIE)

static volatile uint32_t pka_done;
static volatile uint32_t pka_flags;     /* SR flags the handler saw since the start */

void PKA_IRQHandler(void)
{
    uint32_t sr = PKA_SR;

    PKA_CLRFR = sr & PKA_SR_FLAGS;
    pka_flags |= sr;
    pka_done = 1;
}

void pka_init(void)
{
    PKA_CLRFR = PKA_SR_FLAGS;
    PKA_CR = PKA_CR_EN | PKA_CR_IRQS;
    nvic_clear_pending_irq(PKA_IRQ);
    nvic_enable_irq(PKA_IRQ);
}

static int pka_error(uint32_t flags)
{
    /* An error may come while an operation still runs (RAMERRF): leave the PKA idle. */
    while (PKA_SR & PKA_SR_BUSY)
        ;
    PKA_CLRFR = PKA_SR_FLAGS;
    if (flags & PKA_SR_OPERRF)
        return PKA_ERR_OP;
    if (flags & PKA_SR_ADDRERRF)
        return PKA_ERR_ADDR;
    return PKA_ERR_RAM;
}

void pka_config(uint32_t len, uint32_t n)
{
    PKA_LEN = len;
    PKA_NPTR = 4u * n;
}

int pka_run(uint32_t op, uint32_t a, uint32_t b, uint32_t r)
{
    PKA_APTR = 4u * a;
    PKA_BPTR = 4u * b;
    PKA_RPTR = 4u * r;
    pka_done = 0;
    pka_flags = 0;

    __disable_irq();
    PKA_CR = PKA_CR_EN | PKA_CR_IRQS | (op << PKA_CR_OPCODE_POS) | PKA_CR_START;
    while (!pka_done) {
        __WFI();
        __enable_irq();
        __ISB();
        __disable_irq();
    }
    __enable_irq();

    uint32_t flags = pka_flags;
    if (flags & PKA_SR_ERRORS)
        return pka_error(flags);
    return PKA_OK;
}

int pka_exec(uint32_t op, uint32_t len, uint32_t a, uint32_t b, uint32_t n, uint32_t r)
{
    pka_config(len, n);
    return pka_run(op, a, b, r);
}

void pka_fill(uint32_t off, uint32_t value, uint32_t words)
{
    volatile uint32_t *d = PKA_RAM + off;

    for (uint32_t i = 0; i < words; i++)
        d[i] = value;
}

void pka_copy(uint32_t dst, uint32_t src, uint32_t words)
{
    volatile uint32_t *d = PKA_RAM + dst;
    volatile uint32_t *s = PKA_RAM + src;

    for (uint32_t i = 0; i < words; i++)
        d[i] = s[i];
}

void pka_load_be(uint32_t off, const uint8_t *be, uint32_t words)
{
    volatile uint32_t *d = PKA_RAM + off;
    const uint8_t *s = be + 4u * words;     /* least significant word last */

#ifdef SLOW_PKA_LOAD_BE
    /* A deliberate slowdown that no normal build has: tests/test_regress.py builds
     * the firmware with -DSLOW_PKA_LOAD_BE=N to check that `pkasim regress` names
     * the function that got slower. */
    for (volatile uint32_t spin = 0; spin < SLOW_PKA_LOAD_BE; spin++)
        ;
#endif
    for (uint32_t i = 0; i < words; i++) {
        s -= 4;
        d[i] = (uint32_t)s[0] << 24 | (uint32_t)s[1] << 16 | (uint32_t)s[2] << 8 | s[3];
    }
}

void pka_fetch_be(uint32_t off, uint8_t *be, uint32_t words)
{
    volatile uint32_t *s = PKA_RAM + off;
    uint8_t *d = be + 4u * words;

    for (uint32_t i = 0; i < words; i++) {
        uint32_t w = s[i];
        d -= 4;
        d[0] = (uint8_t)(w >> 24);
        d[1] = (uint8_t)(w >> 16);
        d[2] = (uint8_t)(w >> 8);
        d[3] = (uint8_t)w;
    }
}
