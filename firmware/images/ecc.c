/*
 * ecc: one elliptic-curve operation on the PKA (docs/ecc.md). Built twice from this
 * file: ecc.elf with the field layer on the PKA, ecc_soft.elf with the same code in
 * software (ECC_SOFT=1, no PKA).
 *
 * With no input it signs the RFC 8032 section 7.1 TEST 1 message (empty) with that
 * test's key, compares with the RFC's signature and prints
 *   ecc ed25519-sign (PKA): OK
 * exit 0; 1 on a mismatch, 2 if the operation failed.
 *
 * Inputs and outputs are ELF symbols in .data, so `pkasim run --load/--dump` (or
 * Machine.write_symbol/read_symbol) run any operation on any input without
 * rebuilding; tests call ecc_dispatch() again and again on one loaded image:
 *   ecc_op        the operation (ECC_OP_* below)
 *   ecc_key       the private key: P-256 d (big-endian), X25519 scalar, Ed25519 seed
 *   ecc_peer      the public input: P-256 point (65 bytes, 0x04 || x || y), X25519 u,
 *                 Ed25519 public key (32 bytes)
 *   ecc_msg       P-256: the 32-byte hash; Ed25519: the message, ecc_msg_len bytes
 *   ecc_msg_len   its length (at most ECC_MSG_MAX)
 *   ecc_sig       the signature to verify (64 bytes: r || s, or R || S)
 *   ecc_check     1 = compare ecc_out with ecc_expected (ecc_out_len bytes)
 *   ecc_expected  default the RFC 8032 TEST 1 signature
 *   ecc_out       the result (public key, signature, shared secret, or a new key pair:
 *                 the private key then the public key)
 *   ecc_out_len   how many bytes of ecc_out the operation wrote
 *   ecc_status    its return value (0 = success, ECC_ERR_* in src/ecc.h; -100 = not run)
 * The run takes the same time for every private key (docs/ecc.md, constant time): the
 * comparison is constant-time and the printed text depends only on its outcome.
 */
#include <stdint.h>
#include "libc_min.h"
#include "cmsis_min.h"
#include "semihost.h"
#include "ecc.h"
#include "trng.h"

#define DATA(name) __attribute__((section(".data." #name), used, aligned(4)))
#define ECC_MSG_MAX 1024u
#define ECC_OUT_MAX 128u

enum {
    ECC_OP_NONE,
    ECC_OP_P256_PUBLIC,     /* 1: ecc_out = d G (65 bytes) */
    ECC_OP_P256_SIGN,       /* 2: ecc_out = r || s */
    ECC_OP_P256_VERIFY,     /* 3: status only */
    ECC_OP_P256_ECDH,       /* 4: ecc_out = x of d Q */
    ECC_OP_X25519,          /* 5: ecc_out = X25519(k, u) */
    ECC_OP_ED25519_PUBLIC,  /* 6: ecc_out = A (32 bytes) */
    ECC_OP_ED25519_SIGN,    /* 7: ecc_out = R || S */
    ECC_OP_ED25519_VERIFY,  /* 8: status only */
    ECC_OP_RANDOM,          /* 9: ecc_out = 64 bytes from the TRNG */
    ECC_OP_P256_KEYGEN,     /* 10: ecc_out = d || d G (32 + 65 bytes), from the TRNG */
    ECC_OP_ED25519_KEYGEN,  /* 11: ecc_out = seed || A (32 + 32 bytes), from the TRNG */
};

static const char *const OP_NAMES[] = {
    "none", "p256-public", "p256-sign", "p256-verify", "p256-ecdh",
    "x25519", "ed25519-public", "ed25519-sign", "ed25519-verify", "random", "p256-keygen", "ed25519-keygen",
};

/* RFC 8032 section 7.1, TEST 1 */
#define RFC8032_T1_SEED {0x9d, 0x61, 0xb1, 0x9d, 0xef, 0xfd, 0x5a, 0x60, 0xba, 0x84, 0x4a, 0xf4, 0x92, 0xec, \
    0x2c, 0xc4, 0x44, 0x49, 0xc5, 0x69, 0x7b, 0x32, 0x69, 0x19, 0x70, 0x3b, 0xac, 0x03, 0x1c, 0xae, 0x7f, 0x60}
#define RFC8032_T1_SIG {0xe5, 0x56, 0x43, 0x00, 0xc3, 0x60, 0xac, 0x72, 0x90, 0x86, 0xe2, 0xcc, 0x80, 0x6e, \
    0x82, 0x8a, 0x84, 0x87, 0x7f, 0x1e, 0xb8, 0xe5, 0xd9, 0x74, 0xd8, 0x73, 0xe0, 0x65, 0x22, 0x49, 0x01, \
    0x55, 0x5f, 0xb8, 0x82, 0x15, 0x90, 0xa3, 0x3b, 0xac, 0xc6, 0x1e, 0x39, 0x70, 0x1c, 0xf9, 0xb4, 0x6b, \
    0xd2, 0x5b, 0xf5, 0xf0, 0x59, 0x5b, 0xbe, 0x24, 0x65, 0x51, 0x41, 0x43, 0x8e, 0x7a, 0x10, 0x0b}

DATA(ecc_op) uint32_t ecc_op = ECC_OP_ED25519_SIGN;
DATA(ecc_key) uint8_t ecc_key[32] = RFC8032_T1_SEED;
DATA(ecc_peer) uint8_t ecc_peer[65];
DATA(ecc_msg) uint8_t ecc_msg[ECC_MSG_MAX];
DATA(ecc_msg_len) uint32_t ecc_msg_len = 0;
DATA(ecc_sig) uint8_t ecc_sig[64];
DATA(ecc_check) uint32_t ecc_check = 1;
DATA(ecc_expected) uint8_t ecc_expected[ECC_OUT_MAX] = RFC8032_T1_SIG;
DATA(ecc_out) uint8_t ecc_out[ECC_OUT_MAX];
DATA(ecc_out_len) uint32_t ecc_out_len = 0;
DATA(ecc_status) int32_t ecc_status = -100;

#if ECC_SOFT
static const char ENGINE[] = "software";
#else
static const char ENGINE[] = "PKA";
#endif

/* One operation on the ecc_* inputs; its result in ecc_out, ecc_out_len, ecc_status.
 * Harnesses stop here to time it (pkasim bench) or call it repeatedly (tests). */
__attribute__((noinline)) int ecc_dispatch(void)
{
    uint32_t len = ecc_msg_len;
    int status;

    ecc_out_len = 0;
    if (len > ECC_MSG_MAX) {
        status = ECC_ERR_LENGTH;
    } else {
        switch (ecc_op) {
        case ECC_OP_P256_PUBLIC:
            status = p256_public_key(ecc_key, ecc_out);
            ecc_out_len = 65;
            break;
        case ECC_OP_P256_SIGN:
            status = p256_sign(ecc_key, ecc_msg, ecc_out);
            ecc_out_len = 64;
            break;
        case ECC_OP_P256_VERIFY:
            status = p256_verify(ecc_peer, ecc_msg, ecc_sig);
            break;
        case ECC_OP_P256_ECDH:
            status = p256_ecdh(ecc_key, ecc_peer, ecc_out);
            ecc_out_len = 32;
            break;
        case ECC_OP_X25519:
            status = x25519(ecc_key, ecc_peer, ecc_out);
            ecc_out_len = 32;
            break;
        case ECC_OP_ED25519_PUBLIC:
            status = ed25519_public_key(ecc_key, ecc_out);
            ecc_out_len = 32;
            break;
        case ECC_OP_ED25519_SIGN:
            status = ed25519_sign(ecc_key, ecc_msg, len, ecc_out);
            ecc_out_len = 64;
            break;
        case ECC_OP_ED25519_VERIFY:
            status = ed25519_verify(ecc_peer, ecc_msg, len, ecc_sig);
            break;
        case ECC_OP_RANDOM:
            trng_init();
            status = trng_read(ecc_out, 64);
            ecc_out_len = 64;
            break;
        case ECC_OP_P256_KEYGEN:
            status = p256_keygen(ecc_out, ecc_out + 32);
            ecc_out_len = 32 + 65;
            break;
        case ECC_OP_ED25519_KEYGEN:
            status = ed25519_keygen(ecc_out, ecc_out + 32);
            ecc_out_len = 64;
            break;
        default:
            status = -100;
            break;
        }
    }
    ecc_status = status;
    return status;
}

int main(void)
{
    uint32_t op = ecc_op;
    int status = ecc_dispatch();

    sh_puts("ecc ");
    sh_puts(op < sizeof OP_NAMES / sizeof OP_NAMES[0] ? OP_NAMES[op] : "unknown-op");
    sh_puts(" (");
    sh_puts(ENGINE);
    sh_puts("): ");
    int code = 0;
    if (status != 0) {
        sh_puts("error ");
        sh_print_i32(status);
        code = 2;
    } else if (ecc_check && ecc_out_len) {
        uint8_t diff = 0;
        for (uint32_t i = 0; i < ecc_out_len; i++)
            diff |= ecc_out[i] ^ ecc_expected[i];
        sh_puts(diff == 0 ? "OK" : "MISMATCH");
        code = diff != 0;
    } else {
        sh_puts("done");
    }
    sh_puts("\n");
    return code;
}
