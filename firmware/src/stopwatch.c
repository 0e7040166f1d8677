#include "stopwatch.h"
#include "cmsis_min.h"

__attribute__((section(".data.core_clock_hz"), used)) uint32_t core_clock_hz = 48000000u;

static volatile uint32_t ticks;

void SysTick_Handler(void)
{
    ticks++;
}

void stopwatch_start(void)
{
    ticks = 0;
    SYST_CSR = 0;
    SYST_RVR = core_clock_hz / 1000u - 1u;
    SYST_CVR = 0;
    SYST_CSR = SYST_CSR_ENABLE | SYST_CSR_TICKINT | SYST_CSR_CLKSOURCE;
}

uint32_t stopwatch_stop(void)
{
    SYST_CSR = 0;
    return ticks;
}
