/*
 * verifypin: a PIN check in the style of the FISSC collection's VerifyPIN (Dureuil et
 * al., "FISSC: a Fault Injection and Simulation Secure Collection", SAFECOMP 2016),
 * the example of `pkasim faults` (docs/faults.md). Built twice from this file:
 *
 *   verifypin.elf           VerifyPIN_0: no countermeasure. The card PIN is compared
 *                           byte by byte with an early exit; the try counter is
 *                           decremented after a mismatch.
 *   verifypin_hardened.elf  (-DHARDENED=1) the classic countermeasures of FISSC's
 *                           later variants together: hardened booleans (0xAA / 0x55
 *                           instead of 1 / 0), a fixed-time comparison loop, a step
 *                           counter checked after the loop, the try counter
 *                           decremented before the comparison (and restored only on
 *                           success), and every decision taken twice (double test).
 *                           A countermeasure that fires prints "fault detected" and
 *                           exits 3 at once, from countermeasure().
 *
 * The user PIN is wrong by default, so a run without a fault prints "PIN rejected" and
 * exits 1. A fault that makes it print "PIN OK" and exit 0 is the attack FISSC's
 * oracle looks for (an authentication with a wrong PIN):
 *
 *   pkasim faults firmware/build/verifypin.elf --model skip --oracle exit=0 --detected exit=3
 *
 * Inputs are ELF symbols in .data (pkasim run --load): g_userPin, g_cardPin (4 bytes
 * each) and g_ptc (the try counter, 3). g_authenticated and g_countermeasure are the
 * outputs FISSC's oracles read. Built with the same -O2 as every image: the hardened
 * booleans and counters are volatile so that the compiler keeps the double tests.
 */
#include <stdint.h>
#include "semihost.h"

#define PIN_SIZE 4
#define PTC_INIT 3

#define DATA(name) __attribute__((section(".data." #name), used))

#ifndef HARDENED
#define HARDENED 0
#endif

#if HARDENED
typedef volatile uint8_t BOOL;
#define BOOL_TRUE 0xAAu
#define BOOL_FALSE 0x55u
#else
typedef uint8_t BOOL;
#define BOOL_TRUE 1u
#define BOOL_FALSE 0u
#endif

DATA(g_userPin) uint8_t g_userPin[PIN_SIZE] = {0, 0, 0, 0};
DATA(g_cardPin) uint8_t g_cardPin[PIN_SIZE] = {1, 2, 3, 4};
DATA(g_ptc) volatile int8_t g_ptc = PTC_INIT;
DATA(g_authenticated) BOOL g_authenticated = BOOL_FALSE;
DATA(g_countermeasure) volatile uint8_t g_countermeasure = 0;

#if HARDENED
/* A countermeasure fired: say so and stop, whatever state the fault left. */
__attribute__((noinline, noreturn)) void countermeasure(void)
{
    g_countermeasure = 1;
    sh_puts("fault detected\n");
    sh_exit(3);
}

/* Every byte compared whatever the differences (fixed time), with a step counter. */
__attribute__((noinline)) BOOL byteArrayCompare(const uint8_t *a1, const uint8_t *a2, uint8_t size)
{
    volatile uint8_t diff = 0;
    volatile int i;
    volatile int steps = 0;

    for (i = 0; i < size; i++) {
        diff |= a1[i] ^ a2[i];
        steps++;
    }
    if (i != size || steps != size)         /* step counter: the loop ran in full */
        countermeasure();
    if (diff == 0) {
        if (diff == 0)                      /* double test */
            return BOOL_TRUE;
        countermeasure();
    }
    return BOOL_FALSE;
}

__attribute__((noinline)) BOOL verify_pin(void)
{
    g_authenticated = BOOL_FALSE;
    if (g_ptc > 0) {
        g_ptc--;                            /* decrement first: a cut-off attempt still counts */
        BOOL status = byteArrayCompare(g_userPin, g_cardPin, PIN_SIZE);
        if (status == BOOL_TRUE) {
            if (status == BOOL_TRUE) {      /* double test */
                g_ptc = PTC_INIT;
                g_authenticated = BOOL_TRUE;
                return BOOL_TRUE;
            }
            countermeasure();
        } else if (status != BOOL_FALSE) {
            countermeasure();               /* neither hardened value: a corrupted boolean */
        }
    }
    return BOOL_FALSE;
}

int main(void)
{
    BOOL granted = verify_pin();

    if (granted == BOOL_TRUE) {
        if (g_authenticated == BOOL_TRUE) { /* double test, on the stored state too */
            sh_puts("PIN OK\n");
            return 0;
        }
        countermeasure();
    } else if (granted != BOOL_FALSE) {
        countermeasure();
    }
    sh_puts("PIN rejected\n");
    return 1;
}

#else /* VerifyPIN_0 */

__attribute__((noinline)) BOOL byteArrayCompare(const uint8_t *a1, const uint8_t *a2, uint8_t size)
{
    for (int i = 0; i < size; i++) {
        if (a1[i] != a2[i])
            return BOOL_FALSE;
    }
    return BOOL_TRUE;
}

__attribute__((noinline)) BOOL verify_pin(void)
{
    g_authenticated = BOOL_FALSE;
    if (g_ptc > 0) {
        if (byteArrayCompare(g_userPin, g_cardPin, PIN_SIZE) == BOOL_TRUE) {
            g_ptc = PTC_INIT;
            g_authenticated = BOOL_TRUE;
            return BOOL_TRUE;
        }
        g_ptc--;
        return BOOL_FALSE;
    }
    return BOOL_FALSE;
}

int main(void)
{
    if (verify_pin() == BOOL_TRUE) {
        sh_puts("PIN OK\n");
        return 0;
    }
    sh_puts("PIN rejected\n");
    return 1;
}
#endif
