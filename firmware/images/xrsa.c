/*
 * xrsa: one RSA private-key operation (or public-key computation) on the PKA, by the
 * xRSA method (docs/xrsa.md). Built twice from this file: xrsa.elf links the paper
 * variant of src/rsa.c, xrsa_opt.elf the optimized one (rsa_variant says which).
 *
 * With no input it signs the built-in demo message with the built-in RSA-4096 demo
 * key (demo_key.h), compares with the expected signature and prints
 *   xRSA RSA-4096 private-key operation (paper variant): signature OK
 *   firmware-measured: N ms
 * exit 0; 1 on a mismatch, 2 if the operation failed.
 *
 * Inputs and outputs are ELF symbols, all in .data, so `pkasim run --load/--dump`
 * (or Machine.write_symbol/read_symbol) use any key without rebuilding:
 *   rsa_input_key   rsa_key_t (src/rsa.h), default the demo key
 *   rsa_input_msg   nbits/8 bytes big-endian, default the demo message
 *   rsa_op          0 = rsa_private(key, msg), 1 = rsa_get_public_key(key)
 *   rsa_check       1 = compare the result with rsa_expected (nbits/8 bytes)
 *   rsa_expected    default the demo signature
 *   rsa_output      the result, nbits/8 bytes big-endian
 *   rsa_status      the function's return value (0 = success; -100 = not run)
 *   rsa_ms          the operation's time in SysTick ticks of 1 ms
 *   core_clock_hz   the core clock SysTick is set up from (default 48 MHz)
 * The run itself is data-independent: the comparison is constant-time and the
 * printed text depends on its outcome only.
 */
#include <stdint.h>
#include "cmsis_min.h"
#include "semihost.h"
#include "stopwatch.h"
#include "rsa.h"
#include "rsa_io.h"


int main(void)
{
    uint32_t op = rsa_op;
    uint32_t nbytes = rsa_input_key.nbits / 8u;

    if (nbytes > sizeof rsa_output)
        nbytes = sizeof rsa_output;

    stopwatch_start();  /* SysTick at 1 ms from the core clock, as the paper measured (IV-B) */

    int status;
    if (op == 0)
        status = rsa_private(&rsa_input_key, rsa_input_msg, rsa_output);
    else if (op == 1)
        status = rsa_get_public_key(&rsa_input_key, rsa_output);
    else
        status = -100;

    rsa_ms = stopwatch_stop();
    rsa_status = status;

    sh_puts("xRSA RSA-");
    sh_print_u32(rsa_input_key.nbits);
    sh_puts(op == 0 ? " private-key operation (" : op == 1 ? " public key n = p*q (" : " unknown rsa_op (");
    sh_puts(rsa_variant);
    sh_puts(" variant): ");

    int code = 0;
    if (status != 0) {
        sh_puts("error ");
        sh_print_i32(status);
        code = 2;
    } else if (rsa_check) {
        uint8_t diff = 0;
        for (uint32_t i = 0; i < nbytes; i++)
            diff |= rsa_output[i] ^ rsa_expected[i];
        sh_puts(op == 0 ? "signature " : "result ");
        sh_puts(diff == 0 ? "OK" : "MISMATCH");
        code = diff != 0;
    } else {
        sh_puts("done");
    }
    sh_puts("\nfirmware-measured: ");
    sh_print_u32(rsa_ms);
    sh_puts(" ms\n");
    return code;
}
