/*
 * Vector table and reset for newlib programs linked with --specs=rdimon.specs
 * (plain or nano) on an ARMv6-M core. newlib's rdimon crt0 (_mainCRTStartup)
 * does the rest of a hosted start: it asks the debugger for the heap and stack
 * (SYS_HEAPINFO), clears .bss, opens the console, fetches argv
 * (SYS_GET_CMDLINE), runs constructors and calls exit(main(argc, argv)).
 * It expects to be loaded by a debugger, so it never copies .data from flash:
 * Reset_Handler does that first, then jumps to it.
 *
 * Default handlers loop in place: without a debugger a fault just stops the
 * program's progress (pkasim reports the fault; QEMU hangs until its timeout).
 */
#include <stdint.h>

extern uint32_t __stack[];
extern uint32_t __data_load__[], __data_start__[], __data_end__[];

void _mainCRTStartup(void) __attribute__((noreturn));
void Reset_Handler(void) __attribute__((noreturn));

static void Default_Handler(void)
{
    for (;;)
        __asm__ volatile("bkpt #0");
}

typedef void (*vector_t)(void);

__attribute__((section(".vectors"), used))
const vector_t vector_table[16] = {
    (vector_t)(uintptr_t)__stack,   /* initial SP: top of RAM */
    Reset_Handler,
    Default_Handler,                /* NMI */
    Default_Handler,                /* HardFault */
    0, 0, 0, 0, 0, 0, 0,
    Default_Handler,                /* SVCall */
    0, 0,
    Default_Handler,                /* PendSV */
    Default_Handler,                /* SysTick */
};

void Reset_Handler(void)
{
    const uint32_t *src = __data_load__;
    volatile uint32_t *dst;

    for (dst = __data_start__; dst < __data_end__; )
        *dst++ = *src++;
    _mainCRTStartup();
}
