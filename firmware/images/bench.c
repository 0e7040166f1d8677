/*
 * bench: cycle microbenchmarks, one naked function per instruction class.
 *
 * Each bench_<class> is an exact, straight-line instruction sequence (mostly
 * `.rept` blocks) ending in `bx lr`, so a test can call it with any LR and
 * count the cycles from its first instruction until it returns. Costs are
 * from ARM DDI0432C (Cortex-M0 TRM; the SC000 shares the pipeline) table 3-1,
 * zero wait states. N = registers in the list; for POP {..., pc} N counts
 * the registers other than PC (4 + N), for PUSH N counts LR if present.
 * Functions that touch memory load their own pointer to `bench_buf` (SRAM)
 * from a literal, and none uses callee-saved registers (only r0-r3, ip).
 * The same table, machine-readable, is images/bench_expected.txt.
 *
 *   function             MULS=1  MULS=32  formula
 *   bench_nop                35       35  32 x NOP (1) + bx lr (3)
 *   bench_alu                35       35  32 x ADDS/SUBS/MOVS/EORS/ANDS/ORRS/LSLS/LSRS (1) + bx lr (3)
 *   bench_extend             35       35  32 x SXTB/SXTH/UXTB/UXTH/REV/REV16/REVSH/MVNS (1) + bx lr (3)
 *   bench_muls               37     1029  2 x MOVS (1) + 32 x MULS (1 or 32) + bx lr (3)
 *   bench_ldr_imm            69       69  LDR literal (2) + 32 x LDR [rN,#imm] (2) + bx lr (3)
 *   bench_str_imm            69       69  LDR literal (2) + 32 x STR [rN,#imm] (2) + bx lr (3)
 *   bench_ldr_reg            70       70  LDR literal (2) + MOVS (1) + 32 x LDR/LDRSH/LDRSB/STR [rN,rM] (2) + bx lr (3)
 *   bench_ldr_sp             67       67  32 x LDR [sp,#imm] (2) + bx lr (3)
 *   bench_str_sp             69       69  SUB sp (1) + 32 x STR [sp,#imm] (2) + ADD sp (1) + bx lr (3)
 *   bench_ldr_lit            67       67  32 x LDR literal (2) + bx lr (3)
 *   bench_byte_half          69       69  LDR literal (2) + 32 x LDRB/LDRH/STRB/STRH [rN,#imm] (2) + bx lr (3)
 *   bench_ldm               133      133  LDR literal (2) + 32 x LDM r0!,{r1-r3} (1+3) + bx lr (3)
 *   bench_stm               133      133  LDR literal (2) + 32 x STM r0!,{r1-r3} (1+3) + bx lr (3)
 *   bench_push_pop          131      131  16 x (PUSH {r1-r3} (1+3) + POP {r1-r3} (1+3)) + bx lr (3)
 *   bench_pop_pc             83       83  8 x (MOV r2,pc (1) + ADDS (1) + PUSH {r1,r2} (1+2) + POP {r1,pc} (4+1)) + bx lr (3)
 *   bench_b                  99       99  32 x B taken (3) + bx lr (3)
 *   bench_bcc_taken         100      100  CMP (1) + 32 x BEQ taken (3) + bx lr (3)
 *   bench_bcc_not_taken      36       36  CMP (1) + 32 x BNE not taken (1) + bx lr (3)
 *   bench_bl                116      116  MOV r3,lr (1) + 16 x (BL (4) + bx lr (3)) + bx r3 (3)
 *   bench_blx               102      102  MOV r3,lr (1) + ADR (1) + ADDS (1) + 16 x (BLX r2 (3) + bx lr (3)) + bx r3 (3)
 *   bench_mov_pc             83       83  16 x (MOV r1,pc (1) + ADDS (1) + MOV pc,r1 (3)) + bx lr (3)
 *   bench_add_pc            100      100  MOVS (1) + 32 x ADD pc,r2 (3) + bx lr (3)
 *   bench_msr_mrs           131      131  16 x (MRS (4) + MSR (4)) + bx lr (3)
 *   bench_barrier           131      131  32 x DMB/DSB/ISB (4) + bx lr (3)
 *   bench_cps                35       35  16 x (CPSID i (1) + CPSIE i (1)) + bx lr (3)
 *
 * main() calls each function once and returns 0.
 */
#include <stdint.h>
#include "semihost.h"

/* Scratch SRAM for the load/store benchmarks (LDM/STM walk 384 bytes). */
uint32_t bench_buf[128] __attribute__((aligned(8), used));

#define BENCH(name, body)                                               \
    __attribute__((naked, noinline, used)) void name(void)              \
    {                                                                   \
        __asm__ volatile(".syntax unified\n" body);                     \
    }

/* 32 x NOP (1) + bx lr (3) = 35. */
BENCH(bench_nop,
    ".rept 32\n"
    "  .inst.n 0xbf00\n"     /* NOP hint; GNU as would emit MOV r8,r8 */
    ".endr\n"
    "bx lr\n")

/* 32 x ALU (1) + bx lr (3) = 35 */
BENCH(bench_alu,
    ".rept 4\n"
    "  adds r0, r0, r1\n"
    "  subs r1, #1\n"
    "  movs r2, #7\n"
    "  eors r3, r3, r2\n"
    "  ands r3, r3, r0\n"
    "  orrs r2, r2, r1\n"
    "  lsls r0, r0, #1\n"
    "  lsrs r1, r1, #2\n"
    ".endr\n"
    "bx lr\n")

/* 32 x extend/reverse/MVNS (1) + bx lr (3) = 35 */
BENCH(bench_extend,
    ".rept 4\n"
    "  sxtb r1, r0\n"
    "  sxth r1, r0\n"
    "  uxtb r1, r0\n"
    "  uxth r1, r0\n"
    "  rev r1, r0\n"
    "  rev16 r1, r0\n"
    "  revsh r1, r0\n"
    "  mvns r1, r0\n"
    ".endr\n"
    "bx lr\n")

/* 2 x MOVS (1) + 32 x MULS (1 or 32) + bx lr (3) = 37 or 1029 */
BENCH(bench_muls,
    "movs r0, #3\n"
    "movs r1, #5\n"
    ".rept 32\n"
    "  muls r0, r1, r0\n"
    ".endr\n"
    "bx lr\n")

/* LDR literal (2) + 32 x LDR [rN,#imm] (2) + bx lr (3) = 69 */
BENCH(bench_ldr_imm,
    "ldr r0, =bench_buf\n"
    ".rept 32\n"
    "  ldr r1, [r0, #4]\n"
    ".endr\n"
    "bx lr\n"
    ".ltorg\n")

/* LDR literal (2) + 32 x STR [rN,#imm] (2) + bx lr (3) = 69 */
BENCH(bench_str_imm,
    "ldr r0, =bench_buf\n"
    ".rept 32\n"
    "  str r1, [r0, #8]\n"
    ".endr\n"
    "bx lr\n"
    ".ltorg\n")

/* LDR literal (2) + MOVS (1) + 32 x register-offset load/store (2) + bx lr (3) = 70 */
BENCH(bench_ldr_reg,
    "ldr r0, =bench_buf\n"
    "movs r2, #12\n"
    ".rept 8\n"
    "  ldr r1, [r0, r2]\n"
    "  ldrsh r3, [r0, r2]\n"
    "  ldrsb r3, [r0, r2]\n"
    "  str r1, [r0, r2]\n"
    ".endr\n"
    "bx lr\n"
    ".ltorg\n")

/* 32 x LDR [sp,#imm] (2) + bx lr (3) = 67 (reads the caller's stack top) */
BENCH(bench_ldr_sp,
    ".rept 32\n"
    "  ldr r1, [sp, #0]\n"
    ".endr\n"
    "bx lr\n")

/* SUB sp (1) + 32 x STR [sp,#imm] (2) + ADD sp (1) + bx lr (3) = 69 */
BENCH(bench_str_sp,
    "sub sp, #8\n"
    ".rept 32\n"
    "  str r1, [sp, #4]\n"
    ".endr\n"
    "add sp, #8\n"
    "bx lr\n")

/* 32 x LDR literal (2) + bx lr (3) = 67 */
BENCH(bench_ldr_lit,
    ".rept 32\n"
    "  ldr r1, =0x12345678\n"
    ".endr\n"
    "bx lr\n"
    ".ltorg\n")

/* LDR literal (2) + 32 x LDRB/LDRH/STRB/STRH [rN,#imm] (2) + bx lr (3) = 69 */
BENCH(bench_byte_half,
    "ldr r0, =bench_buf\n"
    ".rept 8\n"
    "  ldrb r1, [r0, #1]\n"
    "  ldrh r2, [r0, #2]\n"
    "  strb r1, [r0, #5]\n"
    "  strh r2, [r0, #6]\n"
    ".endr\n"
    "bx lr\n"
    ".ltorg\n")

/* LDR literal (2) + 32 x LDM r0!,{r1-r3} (1+3) + bx lr (3) = 133 */
BENCH(bench_ldm,
    "ldr r0, =bench_buf\n"
    ".rept 32\n"
    "  ldm r0!, {r1, r2, r3}\n"
    ".endr\n"
    "bx lr\n"
    ".ltorg\n")

/* LDR literal (2) + 32 x STM r0!,{r1-r3} (1+3) + bx lr (3) = 133 */
BENCH(bench_stm,
    "ldr r0, =bench_buf\n"
    ".rept 32\n"
    "  stm r0!, {r1, r2, r3}\n"
    ".endr\n"
    "bx lr\n"
    ".ltorg\n")

/* 16 x (PUSH {r1-r3} (1+3) + POP {r1-r3} (1+3)) + bx lr (3) = 131 */
BENCH(bench_push_pop,
    ".rept 16\n"
    "  push {r1, r2, r3}\n"
    "  pop {r1, r2, r3}\n"
    ".endr\n"
    "bx lr\n")

/*
 * 8 x (MOV r2,pc (1) + ADDS (1) + PUSH {r1,r2} (1+2) + POP {r1,pc} (4+1))
 * + bx lr (3) = 83. Each POP returns to the next group: MOV reads
 * PC = its address + 4, and the next group starts 8 bytes after the MOV,
 * so r2 = PC + 5 (thumb bit set).
 */
BENCH(bench_pop_pc,
    ".rept 8\n"
    "  mov r2, pc\n"
    "  adds r2, #5\n"
    "  push {r1, r2}\n"
    "  pop {r1, pc}\n"
    ".endr\n"
    "bx lr\n")

/* 32 x B taken (3) + bx lr (3) = 99 */
BENCH(bench_b,
    ".rept 32\n"
    "  b 1f\n"
    "1:\n"
    ".endr\n"
    "bx lr\n")

/* CMP (1) + 32 x BEQ taken (3) + bx lr (3) = 100 */
BENCH(bench_bcc_taken,
    "cmp r0, r0\n"
    ".rept 32\n"
    "  beq 1f\n"
    "1:\n"
    ".endr\n"
    "bx lr\n")

/* CMP (1) + 32 x BNE not taken (1) + bx lr (3) = 36 */
BENCH(bench_bcc_not_taken,
    "cmp r0, r0\n"
    ".rept 32\n"
    "  bne 1f\n"
    "1:\n"
    ".endr\n"
    "bx lr\n")

/* MOV r3,lr (1) + 16 x (BL (4) + bx lr (3)) + bx r3 (3) = 116 */
BENCH(bench_bl,
    "mov r3, lr\n"
    ".rept 16\n"
    "  bl .Lbench_bl_ret\n"
    ".endr\n"
    "bx r3\n"
    ".Lbench_bl_ret:\n"
    "bx lr\n")

/* MOV r3,lr (1) + ADR (1) + ADDS (1) + 16 x (BLX r2 (3) + bx lr (3)) + bx r3 (3) = 102 */
BENCH(bench_blx,
    "mov r3, lr\n"
    "adr r2, .Lbench_blx_ret\n"
    "adds r2, #1\n"
    ".rept 16\n"
    "  blx r2\n"
    ".endr\n"
    "bx r3\n"
    ".balign 4\n"
    ".Lbench_blx_ret:\n"
    "bx lr\n")

/*
 * 16 x (MOV r1,pc (1) + ADDS (1) + MOV pc,r1 (3)) + bx lr (3) = 83.
 * MOV reads PC = its address + 4; the next group starts 6 bytes after it.
 */
BENCH(bench_mov_pc,
    ".rept 16\n"
    "  mov r1, pc\n"
    "  adds r1, #2\n"
    "  mov pc, r1\n"
    ".endr\n"
    "bx lr\n")

/*
 * MOVS (1) + 32 x ADD pc,r2 (3) + bx lr (3) = 100.
 * With r2 = 0, ADD PC jumps to its address + 4, over a UDF that never runs.
 */
BENCH(bench_add_pc,
    "movs r2, #0\n"
    ".rept 32\n"
    "  add pc, r2\n"
    "  udf #0\n"
    ".endr\n"
    "bx lr\n")

/* 16 x (MRS (4) + MSR (4)) + bx lr (3) = 131 (PRIMASK written back unchanged) */
BENCH(bench_msr_mrs,
    ".rept 16\n"
    "  mrs r0, primask\n"
    "  msr primask, r0\n"
    ".endr\n"
    "bx lr\n")

/* 32 x DMB/DSB/ISB (4) + bx lr (3) = 131 */
BENCH(bench_barrier,
    ".rept 8\n"
    "  dmb sy\n"
    "  dsb sy\n"
    "  isb sy\n"
    "  dsb sy\n"
    ".endr\n"
    "bx lr\n")

/* 16 x (CPSID i (1) + CPSIE i (1)) + bx lr (3) = 35; leaves PRIMASK = 0 */
BENCH(bench_cps,
    ".rept 16\n"
    "  cpsid i\n"
    "  cpsie i\n"
    ".endr\n"
    "bx lr\n")

typedef void (*bench_fn)(void);

static const bench_fn benches[] = {
    bench_nop, bench_alu, bench_extend, bench_muls,
    bench_ldr_imm, bench_str_imm, bench_ldr_reg, bench_ldr_sp, bench_str_sp,
    bench_ldr_lit, bench_byte_half, bench_ldm, bench_stm,
    bench_push_pop, bench_pop_pc,
    bench_b, bench_bcc_taken, bench_bcc_not_taken, bench_bl, bench_blx,
    bench_mov_pc, bench_add_pc,
    bench_msr_mrs, bench_barrier, bench_cps,
};

int main(void)
{
    for (unsigned i = 0; i < sizeof benches / sizeof benches[0]; i++)
        benches[i]();
    sh_puts("bench: ");
    sh_print_u32(sizeof benches / sizeof benches[0]);
    sh_puts(" benchmarks run\n");
    return 0;
}
