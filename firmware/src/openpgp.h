/*
 * OpenPGP card application (OpenPGP smart card application 3.4, ISO 7816-4 APDUs)
 * over the RSA code of rsa.h: RSA-2048 (CRT on the PKA) and RSA-4096 (xRSA).
 *
 * Everything the card keeps across runs is card_state, one object in .data: a
 * harness loads it from a card-state file before reset and saves it after the
 * session (pkasim's usb host does; docs/usb.md "Card state"). Flash programming
 * itself (erase, program times) is not modeled.
 */
#ifndef PKASIM_OPENPGP_H
#define PKASIM_OPENPGP_H

#include <stdint.h>
#include "rsa.h"

#define CARD_MAGIC 0x50475031u  /* "PGP1": a card_state this firmware can read */

typedef struct {
    uint32_t magic;
    uint8_t pw1[32], pw3[32];
    uint8_t pw1_len, pw3_len;
    uint8_t pw1_tries, pw3_tries;       /* remaining tries, 3 when unblocked */
    uint8_t pw1_multi;                  /* C4 byte 1: PW1 valid for several PSO:CDS */
    uint8_t sex;
    uint8_t name_len, lang_len, url_len, pad0;
    uint8_t name[40], lang[8], url[64];
    uint8_t fpr[3][20], cafpr[3][20], gentime[3][4];
    uint16_t bits[3];                   /* algorithm attributes: 2048 or 4096 */
    uint8_t present[3];                 /* key status (DE): 0 none, 2 imported */
    uint8_t pad1;
    uint32_t sig_count;
    rsa_key_t keys[3];                  /* signature, decryption, authentication */
} card_state_t;

extern card_state_t card_state;
extern volatile uint32_t card_cmd_cycles;   /* SysTick-measured cycles of the last APDU */
extern volatile uint32_t card_cmd_count;

#endif
