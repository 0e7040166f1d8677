/*
 * OpenPGP card application (OpenPGP smart card application 3.4, ISO 7816-4 APDUs)
 * over the RSA code of rsa.h: RSA-2048 (CRT on the PKA) and RSA-4096 (xRSA), and the
 * ECC code of ecc.h: ECDSA and ECDH on NIST P-256, EdDSA on Ed25519, ECDH on Curve25519
 * (cv25519), with on-card key generation from the TRNG (docs/ecc.md, docs/usb.md).
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

#define CARD_MAGIC 0x50475032u  /* "PGP2": a card_state this firmware can read */

/* A key slot's algorithm (algorithm attributes C1-C3, OpenPGP card 3.4 4.4.3.10). */
#define CARD_ALGO_RSA      0u   /* RSA-2048 or RSA-4096 (bits[]) */
#define CARD_ALGO_P256     1u   /* ECDSA (signature, authentication) or ECDH (decryption), NIST P-256 */
#define CARD_ALGO_ED25519  2u   /* EdDSA on Ed25519 (signature, authentication) */
#define CARD_ALGO_CV25519  3u   /* ECDH on Curve25519 (decryption) */

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
    uint8_t present[3];                 /* key status (DE): 0 none, 1 generated, 2 imported */
    uint8_t pad1;
    uint32_t sig_count;
    uint8_t algo[3];                    /* CARD_ALGO_* */
    uint8_t pad2;
    uint8_t ec_priv[3][32];             /* ECC private keys: P-256 d big-endian; Ed25519 secret key;
                                           X25519 scalar as RFC 7748 (little-endian) */
    uint8_t ec_pub[3][65];              /* their public keys: 04 || x || y, or 32 bytes */
    uint8_t pad3;
    rsa_key_t keys[3];                  /* RSA keys: signature, decryption, authentication */
} card_state_t;

extern card_state_t card_state;
extern volatile uint32_t card_cmd_cycles;   /* SysTick-measured cycles of the last APDU */
extern volatile uint32_t card_cmd_count;

#endif
