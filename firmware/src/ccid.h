/*
 * CCID 1.1 class on top of usbd: one slot holding the (always present) OpenPGP card.
 * ccid_handle() answers the message in usbd_msg: IccPowerOn (the ATR), IccPowerOff,
 * GetSlotStatus, XfrBlock (short and extended APDUs, to apdu_process), GetParameters,
 * SetParameters, ResetParameters; anything else gets the CCID error
 * CMD_NOT_SUPPORTED, a bad slot or length the error naming that field (CCID 6.2.6).
 * While an APDU runs, every CCID_TEXT_MS of SOFs a time extension request
 * (RDR_to_PC_DataBlock with bmCommandStatus = 2) goes to the host.
 */
#ifndef PKASIM_CCID_H
#define PKASIM_CCID_H

#include <stdint.h>

#define CCID_TEXT_MS 100u   /* a time extension every 100 ms of a running command */

void ccid_handle(void);

/* The application: process the APDU in cmd (len bytes), write the response data
 * and status word into rsp (at most rsp_max bytes); returns the response length. */
uint32_t apdu_process(const uint8_t *cmd, uint32_t len, uint8_t *rsp, uint32_t rsp_max);

/* Power off or on: PIN verification and selection are forgotten. */
void openpgp_reset(void);

/* The core cycles since start, counted by SysTick (the image's own timer). */
uint32_t card_now_cycles(void);

/* The ATR the card answers IccPowerOn with. */
extern const uint8_t card_atr[];
extern const uint32_t card_atr_len;

#endif
