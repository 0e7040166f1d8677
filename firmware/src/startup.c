/*
 * Reset and the vector table for an ARMv6-M core (ARMv6-M ARM, B1.5.3).
 *
 * The table sits in section .vectors, which link.ld places first in FLASH,
 * at address 0 (the SC000 has no VTOR, so the table never moves):
 *   0 initial SP (_estack), 1 Reset, 2 NMI, 3 HardFault, 4-10 reserved,
 *   11 SVCall, 12-13 reserved, 14 PendSV, 15 SysTick, 16-47 IRQ0..IRQ31.
 *
 * Every handler except Reset_Handler is weak, so an image overrides one by
 * defining a function of the same name. By default an exception or IRQ
 * executes UDF (escalates to HardFault), and HardFault executes BKPT #0:
 * without a debugger that is a fault inside HardFault, i.e. lockup.
 */
#include <stdint.h>
#include "semihost.h"

/* Linker-script symbols (link.ld). */
extern uint32_t _estack[];
extern uint32_t _sidata[], _sdata[], _edata[];
extern uint32_t _sbss[], _ebss[];

int main(void);

void Reset_Handler(void) __attribute__((noreturn));

void Default_Handler(void)
{
    __builtin_trap();   /* UDF: escalates to HardFault */
}

__attribute__((weak)) void HardFault_Handler(void)
{
    for (;;)
        __asm__ volatile("bkpt #0");
}

#define WEAK_ALIAS(name) \
    void name(void) __attribute__((weak, alias("Default_Handler")))

WEAK_ALIAS(NMI_Handler);
WEAK_ALIAS(SVC_Handler);
WEAK_ALIAS(PendSV_Handler);
WEAK_ALIAS(SysTick_Handler);
WEAK_ALIAS(IRQ0_Handler);
WEAK_ALIAS(IRQ1_Handler);
WEAK_ALIAS(IRQ2_Handler);
WEAK_ALIAS(IRQ3_Handler);
WEAK_ALIAS(IRQ4_Handler);
WEAK_ALIAS(IRQ5_Handler);
WEAK_ALIAS(IRQ6_Handler);
WEAK_ALIAS(IRQ7_Handler);
WEAK_ALIAS(IRQ8_Handler);
WEAK_ALIAS(IRQ9_Handler);
WEAK_ALIAS(IRQ10_Handler);
WEAK_ALIAS(IRQ11_Handler);
WEAK_ALIAS(IRQ12_Handler);
WEAK_ALIAS(IRQ13_Handler);
WEAK_ALIAS(IRQ14_Handler);
WEAK_ALIAS(IRQ15_Handler);
WEAK_ALIAS(IRQ16_Handler);
WEAK_ALIAS(IRQ17_Handler);
WEAK_ALIAS(IRQ18_Handler);
WEAK_ALIAS(IRQ19_Handler);
WEAK_ALIAS(IRQ20_Handler);
WEAK_ALIAS(IRQ21_Handler);
WEAK_ALIAS(IRQ22_Handler);
WEAK_ALIAS(IRQ23_Handler);
WEAK_ALIAS(IRQ24_Handler);
WEAK_ALIAS(IRQ25_Handler);
WEAK_ALIAS(IRQ26_Handler);
WEAK_ALIAS(IRQ27_Handler);
WEAK_ALIAS(IRQ28_Handler);
WEAK_ALIAS(IRQ29_Handler);
WEAK_ALIAS(IRQ30_Handler);
WEAK_ALIAS(IRQ31_Handler);

typedef void (*vector_t)(void);

__attribute__((section(".vectors"), used))
const vector_t vector_table[16 + 32] = {
    (vector_t)(uintptr_t)_estack,   /*  0: initial main stack pointer */
    Reset_Handler,                  /*  1 */
    NMI_Handler,                    /*  2 */
    HardFault_Handler,              /*  3 */
    0, 0, 0, 0, 0, 0, 0,            /*  4-10: reserved on ARMv6-M */
    SVC_Handler,                    /* 11 */
    0, 0,                           /* 12-13: reserved */
    PendSV_Handler,                 /* 14 */
    SysTick_Handler,                /* 15 */
    IRQ0_Handler,  IRQ1_Handler,  IRQ2_Handler,  IRQ3_Handler,
    IRQ4_Handler,  IRQ5_Handler,  IRQ6_Handler,  IRQ7_Handler,
    IRQ8_Handler,  IRQ9_Handler,  IRQ10_Handler, IRQ11_Handler,
    IRQ12_Handler, IRQ13_Handler, IRQ14_Handler, IRQ15_Handler,
    IRQ16_Handler, IRQ17_Handler, IRQ18_Handler, IRQ19_Handler,
    IRQ20_Handler, IRQ21_Handler, IRQ22_Handler, IRQ23_Handler,
    IRQ24_Handler, IRQ25_Handler, IRQ26_Handler, IRQ27_Handler,
    IRQ28_Handler, IRQ29_Handler, IRQ30_Handler, IRQ31_Handler,
};

void Reset_Handler(void)
{
    /* Volatile pointers keep these loops as plain word copies. */
    const uint32_t *src = _sidata;
    volatile uint32_t *dst;

    for (dst = _sdata; dst < _edata; )
        *dst++ = *src++;
    for (dst = _sbss; dst < _ebss; )
        *dst++ = 0;

    sh_exit(main());
}
