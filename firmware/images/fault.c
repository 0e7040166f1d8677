/*
 * fault: one fault path per run, chosen by `fault_kind`.
 *
 *   0  no fault: prints "no fault", returns 0
 *   1  LDR of a word at an odd SRAM address      (unaligned access)
 *   2  LDR from unmapped 0x30000000               (bus error on read)
 *   3  UDF #0                                     (undefined instruction)
 *   4  STR to unmapped 0x30000000                 (bus error on write)
 *   5  call to 0x30000001: fetch from unmapped, non-executable memory
 *   6  STRH of a halfword at an odd SRAM address  (unaligned access)
 *   7  plain C `*(int *)(p + 1)`, p read from memory (unaligned access
 *      through a pointer the faulting block loads and adds to itself)
 * Every kind is a HardFault on ARMv6-M. Each faulting instruction carries a
 * global label fault_insn_<kind> (fault_insn_1 ... fault_insn_6; for kind 5
 * the fault is at the fetch of 0x30000000 and fault_insn_5 labels the BLX).
 *
 * `fault_handler_mode` picks what HardFault_Handler does:
 *   0  BKPT #0 (no debugger: a fault inside HardFault, so the core locks up)
 *   1  prints "HardFault caught\n" and exits with code 3
 * Before either, it stores the stacked PC in `fault_stacked_pc` and the
 * EXC_RETURN value in `fault_exc_return`.
 *
 * fault_kind and fault_handler_mode live in .data, so a test can patch their
 * initial values in the image (at their load address in flash:
 * LOADADDR = _sidata + (symbol - _sdata)) before reset.
 * An unknown kind prints "unknown fault_kind" and returns 2; a fault that
 * does not trap prints "fault did not trap" and returns 1.
 */
#include <stdint.h>
#include "semihost.h"

volatile uint32_t fault_kind __attribute__((section(".data.fault_kind"))) = 0;
volatile uint32_t fault_handler_mode __attribute__((section(".data.fault_handler_mode"))) = 0;

volatile uint32_t fault_stacked_pc;
volatile uint32_t fault_exc_return;

/* Target of the unaligned accesses. */
uint32_t fault_buf[4] __attribute__((aligned(4)));

#define UNMAPPED 0x30000000u

/* Each trigger is one asm block so the compiler can neither split nor move
 * the faulting access; noinline keeps each label defined once. */

__attribute__((noinline)) static void fault_unaligned_ldr(void)
{
    uint32_t v;
    __asm__ volatile(
        ".global fault_insn_1\n"
        "fault_insn_1:\n"
        "ldr %0, [%1]\n"
        : "=l"(v) : "l"((uintptr_t)fault_buf + 1u) : "memory");
    (void)v;
}

__attribute__((noinline)) static void fault_unmapped_read(void)
{
    uint32_t v;
    __asm__ volatile(
        ".global fault_insn_2\n"
        "fault_insn_2:\n"
        "ldr %0, [%1]\n"
        : "=l"(v) : "l"(UNMAPPED) : "memory");
    (void)v;
}

__attribute__((noinline)) static void fault_undefined(void)
{
    __asm__ volatile(
        ".global fault_insn_3\n"
        "fault_insn_3:\n"
        "udf #0\n" ::: "memory");
}

__attribute__((noinline)) static void fault_unmapped_write(void)
{
    __asm__ volatile(
        ".global fault_insn_4\n"
        "fault_insn_4:\n"
        "str %0, [%1]\n"
        :: "l"(0xDEADBEEFu), "l"(UNMAPPED) : "memory");
}

__attribute__((noinline)) static void fault_execute_unmapped(void)
{
    __asm__ volatile(
        ".global fault_insn_5\n"
        "fault_insn_5:\n"
        "blx %0\n"
        :: "l"(UNMAPPED | 1u) : "r0", "r1", "r2", "r3", "r12", "lr", "cc", "memory");
}

__attribute__((noinline)) static void fault_unaligned_strh(void)
{
    __asm__ volatile(
        ".global fault_insn_6\n"
        "fault_insn_6:\n"
        "strh %0, [%1]\n"
        :: "l"(0xBEEFu), "l"((uintptr_t)fault_buf + 1u) : "memory");
}

/* Where kind 7 points: the word buffer above (.data: read at run time, so the
 * compiler loads it, adds 1 and dereferences it in one block). */
char *volatile fault_ptr = (char *)fault_buf;

__attribute__((noinline)) static int fault_unaligned_loaded_ptr(void)
{
    return *(volatile int *)(fault_ptr + 1);
}

/*
 * HardFault entry: pass the exception frame (on MSP or PSP, per EXC_RETURN
 * bit 2) and EXC_RETURN to the C part.
 */
__attribute__((naked)) void HardFault_Handler(void)
{
    __asm__ volatile(
        ".syntax unified\n"
        "movs r0, #4\n"
        "mov r1, lr\n"
        "tst r0, r1\n"
        "beq 1f\n"
        "mrs r0, psp\n"
        "b 2f\n"
        "1:\n"
        "mrs r0, msp\n"
        "2:\n"
        "ldr r2, =hardfault_report\n"
        "bx r2\n"
        ".ltorg\n");
}

/* frame: r0, r1, r2, r3, r12, lr, pc, xpsr */
__attribute__((used, noreturn)) void hardfault_report(const uint32_t *frame, uint32_t exc_return)
{
    fault_stacked_pc = frame[6];
    fault_exc_return = exc_return;
    if (fault_handler_mode == 1) {
        sh_puts("HardFault caught\n");
        sh_exit(3);
    }
    for (;;)
        __asm__ volatile("bkpt #0");
}

int main(void)
{
    switch (fault_kind) {
    case 0:
        sh_puts("no fault\n");
        return 0;
    case 1: fault_unaligned_ldr();    break;
    case 2: fault_unmapped_read();    break;
    case 3: fault_undefined();        break;
    case 4: fault_unmapped_write();   break;
    case 5: fault_execute_unmapped(); break;
    case 6: fault_unaligned_strh();   break;
    case 7: fault_unaligned_loaded_ptr(); break;
    default:
        sh_puts("unknown fault_kind\n");
        return 2;
    }
    sh_puts("fault did not trap\n");
    return 1;
}
