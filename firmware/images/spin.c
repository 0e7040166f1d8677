/*
 * spin: endless loops, for the run loop's idle fast-forward (docs/cycle-model.md).
 * `spin_mode` (set through --load or Machine.write_symbol) picks one:
 *   0  a `while (1);` main loop with SysTick at 1 ms; the handler exits after
 *      SPIN_TICKS interrupts (the loop is fast-forwarded from tick to tick);
 *   1  a `while (1);` main loop with nothing enabled: stuck, no interrupt can fire;
 *   2  an unaligned load faults; HardFault_Handler spins in `while (1);`;
 *   3  a poll of a RAM flag that only the SysTick handler sets;
 *   4  prints "spin: counting", then counts in RAM for ever with nothing enabled: not
 *      idle (every iteration stores a new value), so it runs to the cycle budget; the
 *      command line's signal tests (Ctrl-C, SIGTERM) stop it.
 */
#include <stdint.h>
#include "cmsis_min.h"
#include "semihost.h"

#define SPIN_TICKS 3u

volatile uint32_t spin_mode = 8;  /* .data, so --load can set it; 8 is mode 0 */
volatile uint32_t spin_ticks;
volatile uint32_t spin_flag;

void HardFault_Handler(void)
{
    for (;;)
        ;
}

void SysTick_Handler(void)
{
    spin_ticks++;
    spin_flag = 1;
    if (spin_mode % 8u == 0 && spin_ticks == SPIN_TICKS)
        sh_exit(0);
}

static void systick_start(void)
{
    SYST_RVR = 48000u - 1u;
    SYST_CVR = 0;
    SYST_CSR = SYST_CSR_ENABLE | SYST_CSR_TICKINT | SYST_CSR_CLKSOURCE;
}

int main(void)
{
    uint32_t mode = spin_mode % 8u;

    if (mode == 0) {
        systick_start();
        for (;;)
            ;
    }
    if (mode == 1) {
        for (;;)
            ;
    }
    if (mode == 2) {
        volatile uint32_t *p = (volatile uint32_t *)(0x20000001u + mode - 2u);
        return (int)*p;
    }
    if (mode == 4) {
        sh_puts("spin: counting\n");
        for (;;)
            spin_ticks++;
    }
    systick_start();
    while (!spin_flag)
        ;
    SYST_CSR = 0;
    return (int)spin_ticks - 1;
}
