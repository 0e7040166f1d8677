/*
 * systick: SysTick at 1 ms (48 MHz core clock, reload 48000 - 1, processor
 * clock source), counting TICKS interrupts while the core sleeps in WFI.
 * Prints "SysTick interrupts: 10\n" and returns 0 (1 if the count is off).
 * Tests read the global `systick_count`.
 */
#include <stdint.h>
#include "cmsis_min.h"
#include "semihost.h"

#define CORE_HZ 48000000u
#define TICK_HZ 1000u
#define TICKS   10u

volatile uint32_t systick_count;

void SysTick_Handler(void)
{
    systick_count++;
}

int main(void)
{
    SYST_CSR = 0;
    SYST_RVR = CORE_HZ / TICK_HZ - 1u;      /* 47999 */
    SYST_CVR = 0;                           /* any write clears it */
    SYST_CSR = SYST_CSR_ENABLE | SYST_CSR_TICKINT | SYST_CSR_CLKSOURCE;

    while (systick_count < TICKS)
        __WFI();

    SYST_CSR = 0;

    uint32_t n = systick_count;
    sh_puts("SysTick interrupts: ");
    sh_print_u32(n);
    sh_puts("\n");
    return n == TICKS ? 0 : 1;
}
