/*
 * Minimal ARMv6-M system-register definitions (ARMv6-M ARM, DDI0419, B3):
 * SysTick, NVIC, SCB, and the CMSIS-style intrinsics the images use.
 * All System Control Space registers are word-accessible only on ARMv6-M.
 */
#ifndef PKASIM_CMSIS_MIN_H
#define PKASIM_CMSIS_MIN_H

#include <stdint.h>

#define REG32(addr) (*(volatile uint32_t *)(uintptr_t)(addr))

/* ---- SysTick (B3.3) ---------------------------------------------------- */
#define SYST_CSR   REG32(0xE000E010u)   /* control and status */
#define SYST_RVR   REG32(0xE000E014u)   /* reload value (24 bits) */
#define SYST_CVR   REG32(0xE000E018u)   /* current value; any write clears */
#define SYST_CALIB REG32(0xE000E01Cu)   /* calibration */

#define SYST_CSR_ENABLE    (1u << 0)
#define SYST_CSR_TICKINT   (1u << 1)
#define SYST_CSR_CLKSOURCE (1u << 2)    /* 1 = processor clock */
#define SYST_CSR_COUNTFLAG (1u << 16)

/* ---- NVIC (B3.4) ------------------------------------------------------- */
#define NVIC_ISER  REG32(0xE000E100u)   /* set-enable, write 1 to enable */
#define NVIC_ICER  REG32(0xE000E180u)   /* clear-enable */
#define NVIC_ISPR  REG32(0xE000E200u)   /* set-pending */
#define NVIC_ICPR  REG32(0xE000E280u)   /* clear-pending */
#define NVIC_IPR(n) REG32(0xE000E400u + 4u * (n))   /* n = 0..7, 4 IRQs each */

/* ---- SCB (B3.2) -------------------------------------------------------- */
#define SCB_CPUID  REG32(0xE000ED00u)
#define SCB_ICSR   REG32(0xE000ED04u)
#define SCB_AIRCR  REG32(0xE000ED0Cu)
#define SCB_SCR    REG32(0xE000ED10u)
#define SCB_CCR    REG32(0xE000ED14u)
#define SCB_SHPR2  REG32(0xE000ED1Cu)   /* SVCall priority in bits 31:24 */
#define SCB_SHPR3  REG32(0xE000ED20u)   /* PendSV 23:16, SysTick 31:24 */

#define SCB_ICSR_NMIPENDSET (1u << 31)
#define SCB_ICSR_PENDSVSET  (1u << 28)
#define SCB_ICSR_PENDSVCLR  (1u << 27)
#define SCB_ICSR_PENDSTSET  (1u << 26)
#define SCB_ICSR_PENDSTCLR  (1u << 25)
#define SCB_ICSR_VECTACTIVE_MASK 0x1FFu

#define SCB_AIRCR_VECTKEY       (0x05FAu << 16)
#define SCB_AIRCR_SYSRESETREQ   (1u << 2)
#define SCB_SCR_SLEEPONEXIT     (1u << 1)
#define SCB_SCR_SLEEPDEEP       (1u << 2)
#define SCB_SCR_SEVONPEND       (1u << 4)

/* Exception numbers (IPSR / VECTACTIVE values). */
#define EXC_NMI        2
#define EXC_HARDFAULT  3
#define EXC_SVCALL     11
#define EXC_PENDSV     14
#define EXC_SYSTICK    15
#define EXC_IRQ(n)     (16 + (n))

/* ARMv6-M implements the top 2 bits of each 8-bit priority field. */
#define PRIO_MASK 0xC0u

static inline void nvic_enable_irq(unsigned irq)        { NVIC_ISER = 1u << irq; }
static inline void nvic_disable_irq(unsigned irq)       { NVIC_ICER = 1u << irq; }
static inline void nvic_set_pending_irq(unsigned irq)   { NVIC_ISPR = 1u << irq; }
static inline void nvic_clear_pending_irq(unsigned irq) { NVIC_ICPR = 1u << irq; }

static inline void nvic_set_priority(unsigned irq, uint32_t prio)
{
    unsigned shift = (irq & 3u) * 8u;
    uint32_t v = NVIC_IPR(irq >> 2);

    v &= ~(0xFFu << shift);
    v |= (prio & PRIO_MASK) << shift;
    NVIC_IPR(irq >> 2) = v;             /* word access only */
}

static inline void scb_set_svcall_priority(uint32_t prio)
{
    SCB_SHPR2 = (SCB_SHPR2 & 0x00FFFFFFu) | ((prio & PRIO_MASK) << 24);
}

static inline void scb_set_pendsv_priority(uint32_t prio)
{
    SCB_SHPR3 = (SCB_SHPR3 & 0xFF00FFFFu) | ((prio & PRIO_MASK) << 16);
}

static inline void scb_set_systick_priority(uint32_t prio)
{
    SCB_SHPR3 = (SCB_SHPR3 & 0x00FFFFFFu) | ((prio & PRIO_MASK) << 24);
}

/* ---- Intrinsics ---------------------------------------------------------- */
static inline void __enable_irq(void)  { __asm__ volatile("cpsie i" ::: "memory"); }
static inline void __disable_irq(void) { __asm__ volatile("cpsid i" ::: "memory"); }
static inline void __WFI(void)         { __asm__ volatile("wfi" ::: "memory"); }
static inline void __WFE(void)         { __asm__ volatile("wfe" ::: "memory"); }
static inline void __SEV(void)         { __asm__ volatile("sev" ::: "memory"); }
static inline void __NOP(void)         { __asm__ volatile("nop"); }
static inline void __DSB(void)         { __asm__ volatile("dsb sy" ::: "memory"); }
static inline void __DMB(void)         { __asm__ volatile("dmb sy" ::: "memory"); }
static inline void __ISB(void)         { __asm__ volatile("isb sy" ::: "memory"); }

static inline uint32_t __get_PRIMASK(void)
{
    uint32_t v;
    __asm__ volatile("mrs %0, primask" : "=r"(v) :: "memory");
    return v;
}

static inline void __set_PRIMASK(uint32_t v)
{
    __asm__ volatile("msr primask, %0" :: "r"(v) : "memory");
}

static inline uint32_t __get_IPSR(void)
{
    uint32_t v;
    __asm__ volatile("mrs %0, ipsr" : "=r"(v));
    return v;
}

static inline uint32_t __get_MSP(void)
{
    uint32_t v;
    __asm__ volatile("mrs %0, msp" : "=r"(v));
    return v;
}

#endif
