/*
 * card: an OpenPGP smart card behind a CCID reader on USB (docs/usb.md).
 *
 * The USB driver (src/usbd.c) enumerates and reassembles CCID messages; the CCID
 * class (src/ccid.c) answers them and hands APDUs to the OpenPGP application
 * (src/openpgp.c) over the RSA code (RSA-2048 on the PKA, RSA-4096 by xRSA).
 * The image never exits: it sleeps in WFI between messages. SysTick counts core
 * cycles (the firmware's own measure of time: card_cmd_cycles, the last APDU's).
 * The card's state is card_state (src/openpgp.h), loaded and saved by the host.
 */
#include <stdint.h>
#include "ccid.h"
#include "cmsis_min.h"
#include "openpgp.h"
#include "pka.h"
#include "usbd.h"

static volatile uint32_t systick_wraps;

void SysTick_Handler(void)
{
    systick_wraps++;
}

uint32_t card_now_cycles(void)
{
    uint32_t w, v;
    do {
        w = systick_wraps;
        v = SYST_CVR;
    } while (w != systick_wraps);
    return (w << 24) + (0xFFFFFFu - v);
}

int main(void)
{
    SYST_RVR = 0xFFFFFFu;
    SYST_CVR = 0;
    SYST_CSR = SYST_CSR_ENABLE | SYST_CSR_TICKINT | SYST_CSR_CLKSOURCE;
    pka_init();
    usbd_init();
    for (;;) {
        usbd_wait_msg();
        ccid_handle();
    }
}
