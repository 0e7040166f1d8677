/*
 * fuzz: a guest that misbehaves on purpose, to fuzz the emulator from inside.
 *
 * Each step picks, from a xorshift32 stream seeded by `fuzz_seed`, one action:
 * random register values for the PKA (operations started with random LEN,
 * pointers and opcodes, PKA RAM touched while busy), SysTick, the NVIC and the
 * SCB (pend, enable, prioritise, SLEEPONEXIT, writes to read-only registers);
 * a semihosting call with a random operation, random parameter block and
 * random lengths; WFI/WFE/SEV and PRIMASK; or a fault: unaligned or unmapped
 * accesses, UDF, BKPT, SVC, a store to flash, a call to a random address, a
 * random stack pointer. Every exception handler counts and may act again.
 *
 * HardFault_Handler either ends the run with exit code 3 (after FUZZ_MAX_FAULTS
 * faults, or at random) or resumes: the stacked PC skips the faulting
 * instruction when it is in this image's code, else returns to fuzz_resume(),
 * which carries on from the current step.
 *
 * A run ends with exit code 0 after `fuzz_steps` steps (it prints one summary
 * line), with the code of a random SYS_EXIT, with 3 from HardFault, or by the
 * emulator: the cycle budget or a sleep nothing can wake (124), a lockup
 * (125). It never ends with an internal error: that is the property the
 * fuzzer (tests/fuzz/) checks, with seeds given through
 *   pkasim run fuzz.elf --load fuzz_seed=SEED.bin --load fuzz_steps=N.bin
 */
#include <stdint.h>
#include "cmsis_min.h"
#include "pka.h"
#include "semihost.h"

#define FUZZ_MAX_FAULTS 16u
#define FLASH_BASE      0x00000000u
#define SRAM_BASE       0x20000000u
#define UNMAPPED        0x30000000u

volatile uint32_t fuzz_seed __attribute__((section(".data.fuzz_seed"))) = 1;
volatile uint32_t fuzz_steps __attribute__((section(".data.fuzz_steps"))) = 200;

volatile uint32_t fuzz_step;        /* steps done */
volatile uint32_t fuzz_exceptions;  /* handlers entered (HardFault excluded) */
volatile uint32_t fuzz_faults;      /* HardFaults */

static uint32_t rng;
static uint32_t scratch[64] __attribute__((aligned(4)));

extern const uint32_t _sidata[];     /* end of code and read-only data in flash */

__attribute__((noinline)) static uint32_t rnd(void)
{
    uint32_t x = rng;

    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    rng = x;
    return x;
}

/* A value with the shapes that find bugs: small, boundary, or anything. */
__attribute__((noinline)) static uint32_t value(void)
{
    static const uint32_t edges[] = {
        0u, 1u, 2u, 3u, 4u, 0x7Fu, 0xFFu, 0x100u, 0xFFFFu, 0x10000u, 0xFFFFFFu,
        0x1000000u, 0x7FFFFFFFu, 0x80000000u, 0xFFFFFFF0u, 0xFFFFFFFCu, 0xFFFFFFFFu,
    };
    uint32_t r = rnd();

    switch (r & 3u) {
    case 0: return (r >> 2) & 0x3Fu;
    case 1: return edges[(r >> 2) % (sizeof edges / sizeof edges[0])];
    default: return rnd();
    }
}

/* An address: mostly this image's RAM scratch buffer, sometimes anywhere. */
__attribute__((noinline)) static uint32_t address(void)
{
    uint32_t r = rnd();

    switch (r & 7u) {
    case 0: return rnd();
    case 1: return FLASH_BASE + ((r >> 3) & 0xFFFCu);
    case 2: return PKA_BASE + ((r >> 3) & 0x1FFCu);
    default: return (uint32_t)(uintptr_t)&scratch[(r >> 3) % 64u];
    }
}

/* A length for semihosting: mostly short, sometimes hostile. */
__attribute__((noinline)) static uint32_t length(void)
{
    uint32_t r = rnd();

    if ((r & 15u) == 0)
        return value();
    return (r >> 4) & 0x3Fu;
}

static void sync(void)
{
    __DSB();
    __ISB();
}

/* ---- the devices ------------------------------------------------------- */

__attribute__((noinline)) static void pka_action(void)
{
    uint32_t r = rnd();

    switch (r & 7u) {
    case 0:     /* any register, any value */
        REG32(PKA_BASE + ((r >> 3) & 0x3Cu)) = value();
        break;
    case 1:     /* any register read, reserved space included */
        (void)REG32(PKA_BASE + ((r >> 3) & 0x3FCu));
        break;
    case 2:     /* PKA RAM, busy or not */
        PKA_RAM[(r >> 3) % PKA_RAM_WORDS] = rnd();
        break;
    case 3:
        (void)PKA_RAM[(r >> 3) % PKA_RAM_WORDS];
        break;
    case 4:     /* a byte access: word-only registers refuse it */
        *(volatile uint8_t *)(uintptr_t)(PKA_BASE + ((r >> 3) & 0x3Fu)) = (uint8_t)r;
        break;
    default: {  /* an operation with random operands: often a valid one */
        uint32_t len = (r & 8u) ? 1u + ((r >> 4) % PKA_MAX_WORDS) : value();
        uint32_t span = PKA_RAM_BYTES;

        PKA_LEN = len;
        PKA_APTR = (r & 16u) ? value() : (rnd() % span) & ~3u;
        PKA_BPTR = (rnd() % span) & ~3u;
        PKA_NPTR = (rnd() % span) & ~3u;
        PKA_RPTR = (r & 32u) ? value() : (rnd() % span) & ~3u;
        PKA_CLRFR = PKA_SR_FLAGS;
        PKA_CR = PKA_CR_EN | PKA_CR_START | (((rnd() % 8u)) << PKA_CR_OPCODE_POS)
                 | ((r & 64u) ? (PKA_CR_PROCENDIE | PKA_CR_RAMERRIE | PKA_CR_ADDRERRIE | PKA_CR_OPERRIE) : 0u);
        if (r & 128u) {
            for (uint32_t spin = 0; spin < 4096u && (PKA_SR & PKA_SR_BUSY); spin++)
                ;
        }
        break;
    }
    }
}

__attribute__((noinline)) static void systick_action(void)
{
    uint32_t r = rnd();

    switch (r & 3u) {
    case 0: SYST_RVR = (r & 4u) ? value() : 16u + ((r >> 3) & 0xFFFu); break;
    case 1: SYST_CVR = value(); break;
    case 2: SYST_CSR = value() & ((r & 4u) ? 0xFFFFFFFFu : (SYST_CSR_ENABLE | SYST_CSR_TICKINT | SYST_CSR_CLKSOURCE)); break;
    default: (void)SYST_CALIB; (void)SYST_CSR; (void)SYST_CVR; break;
    }
}

__attribute__((noinline)) static void nvic_action(void)
{
    uint32_t r = rnd();
    uint32_t mask = (r & 8u) ? value() : 1u << ((r >> 4) & 31u);

    switch (r & 7u) {
    case 0: NVIC_ISER = mask; break;
    case 1: NVIC_ICER = mask; break;
    case 2: NVIC_ISPR = mask; break;
    case 3: NVIC_ICPR = mask; break;
    case 4: NVIC_IPR((r >> 4) & 7u) = value(); break;
    case 5: (void)REG32(0xE000E100u + ((r >> 3) & 0x3FCu)); break;
    default: REG32(0xE000E100u + ((r >> 3) & 0x3FCu)) = value(); break;
    }
    sync();
}

__attribute__((noinline)) static void scb_action(void)
{
    uint32_t r = rnd();

    switch (r & 7u) {
    case 0: SCB_ICSR = (r & 8u) ? value() : (SCB_ICSR_PENDSVSET << ((r >> 4) & 1u)); break;
    case 1: SCB_SHPR2 = value(); break;
    case 2: SCB_SHPR3 = value(); break;
    case 3: SCB_SCR = value() & ((r & 0x18u) == 0x18u ? 0xFFFFFFFFu : SCB_SCR_SEVONPEND); break;
    case 4: SCB_AIRCR = value() & ~(0xFFFFu << 16); break;   /* a wrong VECTKEY: ignored */
    case 5: SCB_CPUID = value(); break;                      /* read-only */
    case 6: (void)REG32(0xE000ED00u + ((r >> 3) & 0x3Cu)); break;
    default: REG32(0xE000ED00u + ((r >> 3) & 0x3Cu)) = value(); break;
    }
    sync();
}

__attribute__((noinline)) static void semihosting_action(void)
{
    static const uint32_t ops[] = {
        0x01u, 0x02u, 0x03u, 0x04u, 0x05u, 0x06u, 0x09u, 0x10u, 0x11u, 0x13u, 0x16u,
        0x30u, 0x31u, 0x0Au, 0x0Cu, 0x12u, 0x15u, 0x33u, 0x18u, 0x20u,
    };
    uint32_t r = rnd();
    uint32_t op = (r & 1u) ? ops[(r >> 1) % (sizeof ops / sizeof ops[0])] : value();

    /* Ending the run is rare, so most seeds go on to their other actions. */
    if ((op == SH_SYS_EXIT || op == SH_SYS_EXIT_EXTENDED) && (rnd() & 63u))
        op = SH_SYS_WRITEC;
    for (unsigned i = 0; i < 4u; i++)
        scratch[i] = (i == 0) ? (r & 6u) : (i == 2 ? length() : address());
    scratch[8] = 0x6863203au;   /* a short string for SYS_WRITE0 / SYS_OPEN */
    scratch[9] = 0;
    const void *arg = (r & 8u) ? (const void *)&scratch[0]
                    : (r & 16u) ? (const void *)&scratch[8]
                    : (const void *)(uintptr_t)address();
    scratch[63] = sh_call(op, arg);
}

/* ---- faults ---------------------------------------------------------------- */

__attribute__((noinline)) static void fault_action(void)
{
    uint32_t r = rnd();
    uint32_t v;

    switch (r % 10u) {
    case 0:     /* unaligned word load */
        __asm__ volatile("ldr %0, [%1]" : "=l"(v) : "l"((uintptr_t)scratch + 1u + (r >> 8 & 2u)) : "memory");
        (void)v;
        break;
    case 1:     /* unmapped read */
        __asm__ volatile("ldr %0, [%1]" : "=l"(v) : "l"(UNMAPPED + (r >> 8 & 0xFFFCu)) : "memory");
        (void)v;
        break;
    case 2:     /* any store anywhere */
        *(volatile uint32_t *)(uintptr_t)(address() & ~3u) = value();
        break;
    case 3:
        __asm__ volatile("udf #0" ::: "memory");
        break;
    case 4:     /* BKPT that is not semihosting: no debugger, so HardFault */
        __asm__ volatile("bkpt #1" ::: "memory");
        break;
    case 5:
        __asm__ volatile("svc #0" ::: "memory");
        break;
    case 6:     /* store to flash */
        *(volatile uint32_t *)(uintptr_t)(FLASH_BASE + (r >> 8 & 0xFFCu)) = r;
        break;
    case 7: {   /* a call to a random address, mostly not code */
        uint32_t target = (r & 0x300u) ? UNMAPPED + (r >> 12 & 0xFFEu) : value();
        ((void (*)(void))(uintptr_t)(target | 1u))();
        break;
    }
    case 8:     /* a halfword store to an odd address */
        __asm__ volatile("strh %0, [%1]" :: "l"(r), "l"((uintptr_t)scratch + 1u) : "memory");
        break;
    default: {  /* a random main stack pointer, then an exception on it */
        uint32_t saved = __get_MSP();
        uint32_t sp = (r & 0x300u) == 0x300u ? value() & ~3u : saved - 64u;

        __asm__ volatile("msr msp, %0\n svc #0\n msr msp, %1" :: "r"(sp), "r"(saved) : "memory");
        break;
    }
    }
}

/* ---- the loop ----------------------------------------------------------------- */

__attribute__((noinline)) static void action(void)
{
    uint32_t r = rnd() % 100u;

    if (r < 20u)
        pka_action();
    else if (r < 32u)
        systick_action();
    else if (r < 46u)
        nvic_action();
    else if (r < 58u)
        scb_action();
    else if (r < 78u)
        semihosting_action();
    else if (r < 84u)
        __set_PRIMASK(rnd() & 1u);
    else if (r < 88u) {
        uint32_t w = rnd() & 7u;
        if (w != 0) {       /* mostly with a SysTick interrupt to wake the core */
            SYST_RVR = 100u + (rnd() & 0x3FFu);
            SYST_CVR = 0;
            SYST_CSR = SYST_CSR_ENABLE | SYST_CSR_TICKINT | SYST_CSR_CLKSOURCE;
        }
        if (w & 1u) __WFI();
        else if (w & 2u) __WFE();
        else __SEV();
    } else if (r < 93u)
        fault_action();
    else
        scratch[rnd() % 64u] = value();
}

static void finish(void) __attribute__((noreturn));
static void finish(void)
{
    __set_PRIMASK(1u);
    SYST_CSR = 0;
    sh_puts("fuzz: seed ");
    sh_print_hex(fuzz_seed);
    sh_puts(" steps ");
    sh_print_u32(fuzz_step);
    sh_puts(" exceptions ");
    sh_print_u32(fuzz_exceptions);
    sh_puts(" faults ");
    sh_print_u32(fuzz_faults);
    sh_puts("\n");
    sh_exit(0);
}

static void loop(void) __attribute__((noreturn));
static void loop(void)
{
    while (fuzz_step < fuzz_steps) {
        fuzz_step = fuzz_step + 1u;
        action();
    }
    finish();
}

/* Where HardFault sends a fault whose PC is not this image's code. */
void fuzz_resume(void)
{
    loop();
}

/* ---- exception handlers --------------------------------------------------------- */

__attribute__((noinline)) static void handler(void)
{
    fuzz_exceptions = fuzz_exceptions + 1u;
    uint32_t r = rnd() & 15u;

    if (r == 0)
        nvic_action();
    else if (r == 1)
        scb_action();
    else if (r == 2)
        pka_action();
    else if (r == 3)
        PKA_CLRFR = PKA_SR_FLAGS;   /* acknowledge, or the PKA line stays up */
    else if (r == 4)
        SYST_CSR = 0;               /* stop an interrupt storm */
}

void NMI_Handler(void)     { handler(); }
void SVC_Handler(void)     { handler(); }
void PendSV_Handler(void)  { handler(); }
void SysTick_Handler(void) { handler(); }

/* Every IRQ line: count, maybe act, sometimes clear the line's own pending bit. */
void fuzz_irq(void)
{
    handler();
    if ((rng & 3u) == 0)
        NVIC_ICPR = 1u << ((__get_IPSR() - 16u) & 31u);
}

#define IRQ(n) void IRQ##n##_Handler(void) __attribute__((alias("fuzz_irq")));
IRQ(0) IRQ(1) IRQ(2) IRQ(3) IRQ(4) IRQ(5) IRQ(6) IRQ(7)
IRQ(8) IRQ(9) IRQ(10) IRQ(11) IRQ(12) IRQ(13) IRQ(14) IRQ(15)
IRQ(16) IRQ(17) IRQ(18) IRQ(19) IRQ(20) IRQ(21) IRQ(22) IRQ(23)
IRQ(24) IRQ(25) IRQ(26) IRQ(27) IRQ(28) IRQ(29) IRQ(30) IRQ(31)

/* frame: the stacked r0-r3, r12, lr, pc, xPSR of the faulting context. */
void fuzz_hardfault(uint32_t *frame)
{
    fuzz_faults = fuzz_faults + 1u;
    if (fuzz_faults >= FUZZ_MAX_FAULTS || (rnd() & 15u) == 0) {
        sh_puts("fuzz: HardFault, stopping\n");
        sh_exit(3);
    }
    uint32_t pc = frame[6];
    if (pc >= FLASH_BASE + 0xC0u && pc + 4u <= (uint32_t)(uintptr_t)_sidata && !(pc & 1u)) {
        uint16_t hw = *(const uint16_t *)(uintptr_t)pc;
        frame[6] = pc + (((hw >> 11) >= 0x1Du) ? 4u : 2u);   /* skip it (32-bit if 0b111x1/0b11110) */
    } else {
        frame[6] = (uint32_t)(uintptr_t)fuzz_resume & ~1u;
        frame[7] = 1u << 24;                                  /* xPSR: Thumb, no IPSR, no flags */
    }
}

/* Finds the frame (MSP or PSP, from EXC_RETURN bit 2) and hands it over; the
 * C function returns with LR still holding EXC_RETURN. */
__attribute__((naked)) void HardFault_Handler(void)
{
    __asm__ volatile(
        "movs r0, #4\n"
        "mov r1, lr\n"
        "tst r0, r1\n"
        "beq 1f\n"
        "mrs r0, psp\n"
        "b 2f\n"
        "1:\n"
        "mrs r0, msp\n"
        "2:\n"
        "ldr r2, =fuzz_hardfault\n"
        "bx r2\n"
        ".ltorg\n");
}

int main(void)
{
    rng = fuzz_seed ? fuzz_seed : 0x9E3779B9u;
    sh_puts("fuzz: start\n");
    loop();
}
