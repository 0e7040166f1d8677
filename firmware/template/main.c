/*
 * A pkasim firmware project (made by `pkasim init`): a Cortex-M0 class program for the
 * emulated SC000 chip. It prints through semihosting (src/semihost.h), times itself
 * with SysTick (src/cmsis_min.h) and returns its exit code to `pkasim run`.
 *
 *   make run          build build/app.elf and run it on the chip of CHIP (Makefile)
 *
 * The PKA driver (src/pka.c, src/pka.h) and the RSA code of the bundled images are in
 * src/ too; add them to SRCS in the Makefile to use them.
 */
#include <stdint.h>
#include "cmsis_min.h"
#include "semihost.h"

static volatile uint32_t count = 100;    /* volatile: computed at run time, not by the compiler */

static uint32_t sum_of_squares(uint32_t n)
{
    uint32_t sum = 0;
    for (uint32_t i = 1; i <= n; i++)
        sum += i * i;
    return sum;
}

int main(void)
{
    SYST_RVR = 0x00FFFFFFu;                          /* count down from the top */
    SYST_CVR = 0;
    SYST_CSR = SYST_CSR_ENABLE | SYST_CSR_CLKSOURCE; /* core clock, no interrupt */
    uint32_t start = SYST_CVR;
    uint32_t sum = sum_of_squares(count);
    uint32_t cycles = (start - SYST_CVR) & 0x00FFFFFFu;

    sh_puts("hello from a pkasim project: sum of squares 1..100 = ");
    sh_print_u32(sum);
    sh_puts(" in ");
    sh_print_u32(cycles);
    sh_puts(" cycles\n");
    return sum == 338350 ? 0 : 1;
}
