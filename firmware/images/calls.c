/*
 * calls: every shape of call and return the profiler must recognise
 * (tests/test_observe.py), in hand-written Thumb so that both compilers emit
 * exactly these instructions:
 *   calls_leaf      adds, returns by BX LR
 *   calls_tail      adds, then B calls_leaf: a tail call (calls_leaf returns to
 *                   calls_tail's caller)
 *   calls_nested    PUSH {r4, lr}, BL calls_leaf, returns by POP {r4, pc}
 *   calls_pointer   BLX through a register to calls_leaf, POP {pc}
 * and, in C, a recursion (calls_fib, two calls deep per level).
 * Prints "calls: 23\n" and exits 0.
 */
#include <stdint.h>
#include "semihost.h"

uint32_t calls_leaf(uint32_t x);
uint32_t calls_tail(uint32_t x);
uint32_t calls_nested(uint32_t x);
uint32_t calls_pointer(uint32_t x);

__asm__(
    "    .section .text.calls_asm, \"ax\", %progbits\n"
    "    .syntax unified\n"
    "    .thumb\n"
    "    .p2align 1\n"
    "    .global calls_leaf\n"
    "    .type calls_leaf, %function\n"
    "    .thumb_func\n"
    "calls_leaf:\n"
    "    adds r0, r0, #1\n"
    "    bx lr\n"
    "    .size calls_leaf, . - calls_leaf\n"
    "    .global calls_tail\n"
    "    .type calls_tail, %function\n"
    "    .thumb_func\n"
    "calls_tail:\n"
    "    adds r0, r0, #2\n"
    "    b calls_leaf\n"
    "    .size calls_tail, . - calls_tail\n"
    "    .global calls_nested\n"
    "    .type calls_nested, %function\n"
    "    .thumb_func\n"
    "calls_nested:\n"
    "    push {r4, lr}\n"
    "    bl calls_leaf\n"
    "    adds r0, r0, #4\n"
    "    pop {r4, pc}\n"
    "    .size calls_nested, . - calls_nested\n"
    "    .global calls_pointer\n"
    "    .type calls_pointer, %function\n"
    "    .thumb_func\n"
    "calls_pointer:\n"
    "    push {lr}\n"
    "    ldr r1, =calls_leaf\n"
    "    blx r1\n"
    "    pop {pc}\n"
    "    .ltorg\n"
    "    .size calls_pointer, . - calls_pointer\n"
    "    .text\n");

__attribute__((noinline)) uint32_t calls_fib(uint32_t n)
{
    if (n < 2)
        return n;
    return calls_fib(n - 1) + calls_fib(n - 2);
}

int main(void)
{
    uint32_t r = calls_tail(1);       /* 4 */
    r += calls_nested(1);             /* 6: 10 */
    r += calls_pointer(2);            /* 3: 13 */
    r += calls_leaf(6);               /* 7: 20 */
    r += calls_fib(4);                /* 3: 23 */
    sh_puts("calls: ");
    sh_print_u32(r);
    sh_puts("\n");
    return r == 23 ? 0 : 1;
}
