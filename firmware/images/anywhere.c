/*
 * anywhere: code in SRAM, code that changes, and instructions an ARMv6-M core lacks.
 *
 *   f_mul(x)          three MULS (x^8) then bx lr, in flash: `--load f_mul=FILE`
 *                     replaces them (tests put three NOPs there; the 32-cycle
 *                     multiplier then costs 93 cycles less)
 *   loop_flash(n, p)  the same loop, byte for byte, in flash and in SRAM
 *   loop_ram(n, p)    (.data.ramfunc: the startup code copies it to SRAM): n times
 *                     s += p[0]; p[1] = s; returns s. Same cycles from either.
 *   smc_target()      in SRAM: movs r0, #1; nop; bx lr
 *   smc_patch(hw)     stores hw over smc_target's NOP (strh), then DSB, ISB: the
 *                     core's own store changes code (self-modifying code)
 *   v7m_*             one instruction each that ARMv7-M has and ARMv6-M does not
 *                     (UDIV, MOVW, LDR.W, CBZ, IT, VLDR), then bx lr. Called only
 *                     by a probe (below); each takes HardFault (UNDEFINED).
 *
 * main runs f_mul (not printing its result, so only its own cycles change when it is
 * replaced), both loops and the SMC sequence, prints the results and returns 0 when
 * they are as expected. HardFault prints "HardFault" and exits with 3.
 *
 * `probe` (in .data: patch it with --load probe=FILE) makes main do one wrong thing
 * first, each a fault the core takes:
 *   1  point VTOR at unmapped 0x30000000, then SVC: the vector fetch faults, and so
 *      does HardFault's (lockup) on a chip with VTOR; without VTOR the write is
 *      ignored and SVC runs the default handler (UDF: HardFault)
 *   2  call 0xF0000000 (where Machine.call() returns to): a fetch from unmapped
 *      memory, HardFault
 *   3-8  call v7m_udiv, v7m_movw, v7m_ldrw, v7m_cbz, v7m_it, v7m_vldr: HardFault
 */
#include <stdint.h>
#include "semihost.h"

#define NAKED __attribute__((naked, noinline, used))
#define RAMFUNC __attribute__((section(".data.ramfunc")))

NAKED uint32_t f_mul(uint32_t x)
{
    __asm__ volatile(
        ".syntax unified\n"
        "muls r0, r0, r0\n"
        "muls r0, r0, r0\n"
        "muls r0, r0, r0\n"
        "bx lr\n");
}

#define LOOP_BODY                \
    ".syntax unified\n"          \
    "movs r2, #0\n"              \
    "1:\n"                       \
    "ldr r3, [r1]\n"             \
    "adds r2, r2, r3\n"          \
    "str r2, [r1, #4]\n"         \
    "subs r0, #1\n"              \
    "bne 1b\n"                   \
    "movs r0, r2\n"              \
    "bx lr\n"

NAKED uint32_t loop_flash(uint32_t n, uint32_t *p)
{
    __asm__ volatile(LOOP_BODY);
}

RAMFUNC NAKED uint32_t loop_ram(uint32_t n, uint32_t *p)
{
    __asm__ volatile(LOOP_BODY);
}

RAMFUNC NAKED uint32_t smc_target(void)
{
    __asm__ volatile(
        ".syntax unified\n"
        "movs r0, #1\n"
        ".inst.n 0xbf00\n" /* NOP: smc_patch overwrites it */
        "bx lr\n");
}

NAKED void smc_patch(uint32_t hw)
{
    __asm__ volatile(
        ".syntax unified\n"
        "ldr r1, =smc_target\n"
        "subs r1, #1\n" /* the symbol's Thumb bit */
        "strh r0, [r1, #2]\n"
        "dsb\n"
        "isb\n"
        "bx lr\n"
        ".ltorg\n");
}

NAKED void v7m_udiv(void) { __asm__ volatile(".inst.w 0xfbb1f0f2\n bx lr\n"); }  /* udiv r0, r1, r2 */
NAKED void v7m_movw(void) { __asm__ volatile(".inst.w 0xf2412034\n bx lr\n"); }  /* movw r0, #0x1234 */
NAKED void v7m_ldrw(void) { __asm__ volatile(".inst.w 0xf8d10004\n bx lr\n"); }  /* ldr.w r0, [r1, #4] */
NAKED void v7m_cbz(void) { __asm__ volatile(".inst.n 0xb100\n bx lr\n"); }       /* cbz r0, . + 4 */
NAKED void v7m_it(void) { __asm__ volatile(".inst.n 0xbf08\n movs r0, #1\n bx lr\n"); } /* it eq */
NAKED void v7m_vldr(void) { __asm__ volatile(".inst.w 0xed9feb00\n bx lr\n"); }  /* vldr d14, [pc] */

void HardFault_Handler(void)
{
    sh_puts("HardFault\n");
    sh_exit(3);
}

static uint32_t buf[2] = {3, 0};

volatile uint32_t probe __attribute__((section(".data.probe"))) = 0;

#define SCB_VTOR (*(volatile uint32_t *)0xE000ED08u)

int main(void)
{
    if (probe == 1) {
        SCB_VTOR = 0x30000000u;
        __asm__ volatile("svc #0" ::: "memory");
    } else if (probe == 2) {
        ((void (*)(void))0xF0000001u)();
    } else if (probe >= 3 && probe <= 8) {
        static void (*const v7m[])(void) = {v7m_udiv, v7m_movw, v7m_ldrw, v7m_cbz, v7m_it, v7m_vldr};
        v7m[probe - 3]();
    }
    uint32_t (*ram)(uint32_t, uint32_t *) = loop_ram;
    volatile uint32_t m = f_mul(2); /* not printed: its cycles alone change with --load */
    (void)m;
    uint32_t a = loop_flash(100, buf);
    uint32_t b = ram(100, buf);
    uint32_t s1 = smc_target();
    smc_patch(0x3001u); /* adds r0, #1 */
    uint32_t s2 = smc_target();
    sh_puts("loops ");
    sh_print_u32(a);
    sh_puts(" ");
    sh_print_u32(b);
    sh_puts(", smc ");
    sh_print_u32(s1);
    sh_puts(" -> ");
    sh_print_u32(s2);
    sh_puts("\n");
    return a == 300 && b == 300 && s1 == 1 && s2 == 2 ? 0 : 1;
}
