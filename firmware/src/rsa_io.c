#include "rsa_io.h"
#include "../images/demo_key.h"

#define DATA(name) __attribute__((section(".data." #name), used, aligned(4)))

DATA(rsa_input_key) rsa_key_t rsa_input_key = {
    .nbits = DEMO_NBITS,
    .e = DEMO_E,
    .p = DEMO_P,
    .q = DEMO_Q,
    .dp = DEMO_DP,
    .dq = DEMO_DQ,
    .qinv = DEMO_QINV,
};
DATA(rsa_input_msg) uint8_t rsa_input_msg[RSA_N_BIT_MAX / 8] = DEMO_MSG;
DATA(rsa_expected) uint8_t rsa_expected[RSA_N_BIT_MAX / 8] = DEMO_SIG;
DATA(rsa_output) uint8_t rsa_output[RSA_N_BIT_MAX / 8];
DATA(rsa_op) uint32_t rsa_op = 0;
DATA(rsa_check) uint32_t rsa_check = 1;
DATA(rsa_status) int32_t rsa_status = -100;
DATA(rsa_ms) uint32_t rsa_ms = 0;
