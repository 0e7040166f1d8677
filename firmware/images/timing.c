/*
 * timing: peripheral accesses are seen at the cycle their instruction starts.
 *
 * systick_probe() starts SysTick from the core clock and reads CVR 12 cycles later,
 * inside one basic block: STR to CSR (2 cycles) then 10 NOPs (1 each). SysTick
 * reloads RVR on its first tick and counts down on each later one (ARMv6-M B3.3),
 * so CVR reads RVR - 11 = 0xFFFFF4. Tests call it and check that value.
 */
#include <stdint.h>
#include "semihost.h"

__attribute__((naked)) uint32_t systick_probe(void)
{
    __asm volatile(
        "ldr r1, =0xE000E010\n"   /* SysTick CSR */
        "ldr r2, =0x00FFFFFF\n"
        "str r2, [r1, #4]\n"      /* RVR = 0xFFFFFF */
        "movs r2, #0\n"
        "str r2, [r1, #8]\n"      /* CVR = 0 */
        "movs r2, #5\n"           /* ENABLE | CLKSOURCE (core clock) */
        "str r2, [r1, #0]\n"      /* counting starts with this instruction */
        ".rept 10\n"
        "  .inst.n 0xbf00\n"      /* NOP */
        ".endr\n"
        "ldr r0, [r1, #8]\n"      /* CVR */
        "bx lr\n"
        ".ltorg\n");
}

/*
 * cpsie_probe() pends PendSV with interrupts masked, then unmasks them for exactly
 * one instruction (cpsie i; cpsid i) in one basic block. The core takes a pending
 * interrupt as soon as CPSIE unmasks it, so PendSV runs in between and the function
 * returns 1 (pendsv_count).
 */
volatile uint32_t pendsv_count;

void PendSV_Handler(void)
{
    pendsv_count++;
}

__attribute__((naked)) uint32_t cpsie_probe(void)
{
    __asm volatile(
        "cpsid i\n"
        "ldr r1, =0xE000ED04\n"  /* SCB ICSR */
        "ldr r2, =0x10000000\n"  /* PENDSVSET */
        "str r2, [r1]\n"
        "cpsie i\n"
        "cpsid i\n"
        "ldr r1, =pendsv_count\n"
        "ldr r0, [r1]\n"
        "cpsie i\n"
        "bx lr\n"
        ".ltorg\n");
}

int main(void)
{
    uint32_t v = systick_probe();
    sh_puts("SysTick CVR 12 cycles after enable: ");
    sh_print_hex(v);
    sh_puts("\n");
    uint32_t taken = cpsie_probe();
    sh_puts("PendSV taken between cpsie and cpsid: ");
    sh_print_u32(taken);
    sh_puts("\n");
    return v == 0xFFFFF4u && taken == 1 ? 0 : 1;
}
