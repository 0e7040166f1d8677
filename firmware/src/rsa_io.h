/*
 * The inputs and outputs of the RSA images (xrsa.elf, xrsa_opt.elf, rsa_soft.elf):
 * ELF symbols in .data, each in its own section, so a harness fills and reads them
 * by name (pkasim run --load/--dump, Machine.write_symbol/read_symbol) and the
 * values it writes before reset survive the startup copy of .data. Their defaults
 * are the built-in RSA-4096 demo key, message and signature (demo_key.h).
 */
#ifndef PKASIM_RSA_IO_H
#define PKASIM_RSA_IO_H

#include <stdint.h>
#include "rsa.h"

extern rsa_key_t rsa_input_key;                       /* default: the demo key */
extern uint8_t rsa_input_msg[RSA_N_BIT_MAX / 8];      /* nbits/8 bytes, big-endian */
extern uint8_t rsa_expected[RSA_N_BIT_MAX / 8];       /* compared when rsa_check = 1 */
extern uint8_t rsa_output[RSA_N_BIT_MAX / 8];         /* the result, big-endian */
extern uint32_t rsa_op;                               /* 0 private op, 1 public key, ... */
extern uint32_t rsa_check;                            /* 1 = compare with rsa_expected */
extern int32_t rsa_status;                            /* the function's return; -100 = not run */
extern uint32_t rsa_ms;                               /* SysTick milliseconds of the op */

#endif
