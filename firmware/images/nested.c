/*
 * nested: exception priorities, preemption, tail-chaining, SVC and PRIMASK,
 * all with software-pended exceptions (no peripheral needed).
 *
 * Priorities (lower number = more urgent; ARMv6-M keeps bits 7:6):
 *   SVCall 0x00 (reset value)  IRQ1 0x40  IRQ0 0xC0  IRQ2 0xC0  PendSV 0xC0
 *
 * Expected trace: "SABaVCMPBE"
 *   S  main executes SVC #0: SVCall (priority 0) is taken at once.
 *   A  main pends IRQ0 through NVIC_ISPR; IRQ0 is taken at once.
 *   B  IRQ0 pends IRQ1 (0x40 beats 0xC0): IRQ1 preempts IRQ0 at once.
 *   a  IRQ0 pends IRQ2 and PendSV (both 0xC0, not more urgent than the
 *      active 0xC0, so neither preempts) and logs 'a' before returning.
 *   V  on IRQ0's return both are pending at the same priority: the lower
 *      exception number wins, so PendSV (14) runs before IRQ2 (16 + 2 = 18)
 *      (tail-chained).
 *   C  then IRQ2.
 *   M  back in main (thread mode).
 *   P  main sets PRIMASK (cpsid i), pends IRQ1: it must stay pending; main
 *      logs 'P'.
 *   B  cpsie i: IRQ1 is taken at once.
 *   E  main ends.
 * The image prints the trace and returns 0 if it matches, 1 if not.
 * Tests read the globals `trace` (char[32]) and `trace_len`.
 */
#include <stdint.h>
#include "cmsis_min.h"
#include "semihost.h"

#define IRQ_LOW   0u    /* IRQ0 */
#define IRQ_HIGH  1u    /* IRQ1 */
#define IRQ_LATER 2u    /* IRQ2 */

#define PRIO_HIGH   0x40u
#define PRIO_LOW    0xC0u

static const char expected[] = "SABaVCMPBE";

volatile char trace[32];
volatile uint32_t trace_len;

static void log_char(char c)
{
    uint32_t n = trace_len;

    if (n < sizeof trace)
        trace[n] = c;
    trace_len = n + 1;
}

/* Make a pend visible to the core before the next instruction (B3.4, A3.7). */
static void sync(void)
{
    __DSB();
    __ISB();
}

void SVC_Handler(void)
{
    log_char('S');
}

void IRQ0_Handler(void)
{
    log_char('A');
    nvic_set_pending_irq(IRQ_HIGH);     /* preempts now */
    sync();
    nvic_set_pending_irq(IRQ_LATER);    /* same priority: waits */
    SCB_ICSR = SCB_ICSR_PENDSVSET;      /* same priority: waits */
    sync();
    log_char('a');
}

void IRQ1_Handler(void)
{
    log_char('B');
}

void IRQ2_Handler(void)
{
    log_char('C');
}

void PendSV_Handler(void)
{
    log_char('V');
}

int main(void)
{
    nvic_set_priority(IRQ_LOW, PRIO_LOW);
    nvic_set_priority(IRQ_HIGH, PRIO_HIGH);
    nvic_set_priority(IRQ_LATER, PRIO_LOW);
    scb_set_pendsv_priority(PRIO_LOW);
    nvic_enable_irq(IRQ_LOW);
    nvic_enable_irq(IRQ_HIGH);
    nvic_enable_irq(IRQ_LATER);

    __asm__ volatile("svc #0" ::: "memory");

    nvic_set_pending_irq(IRQ_LOW);
    sync();
    log_char('M');

    __disable_irq();
    nvic_set_pending_irq(IRQ_HIGH);
    sync();
    log_char('P');
    __enable_irq();
    __ISB();
    log_char('E');

    uint32_t n = trace_len;
    char got[sizeof trace + 1];
    int ok = n == sizeof expected - 1;

    if (n > sizeof trace)
        n = sizeof trace;
    for (uint32_t i = 0; i < n; i++) {
        got[i] = trace[i];
        if (ok && got[i] != expected[i])
            ok = 0;
    }
    got[n] = '\0';

    sh_puts("trace: ");
    sh_puts(got);
    sh_puts("\n");
    if (!ok) {
        sh_puts("expected: ");
        sh_puts(expected);
        sh_puts("\n");
        return 1;
    }
    return 0;
}
