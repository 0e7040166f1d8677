/*
 * rsa_soft: one RSA private-key operation (or public-key computation) in software,
 * no PKA: the xRSA paper's "naive method", Mbed TLS-style bignum (src/bn.c,
 * src/rsa_soft.c; docs/software-rsa.md). The software baseline of `pkasim bench`.
 *
 * With no input it signs the built-in demo message with the built-in RSA-4096 demo
 * key (demo_key.h, shared with xrsa.elf), compares with the expected signature and
 * prints
 *   software RSA-4096 private-key operation: signature OK
 *   firmware-measured: N ms
 * exit 0; 1 on a mismatch, 2 if the operation failed.
 *
 * Inputs and outputs are the xrsa image's ELF symbols, all in .data, so
 * `pkasim run --load/--dump` (or Machine.write_symbol/read_symbol) use any key
 * without rebuilding:
 *   rsa_input_key   rsa_key_t (src/rsa.h), default the demo key
 *   rsa_input_msg   nbits/8 bytes big-endian, default the demo message
 *   rsa_op          0 = private operation (key, msg), 1 = public key n = p*q,
 *                   2 = one bignum operation for tests (soft_rsa_bn_call on
 *                   rsa_input_msg as words, result in rsa_output)
 *   rsa_check       1 = compare the result with rsa_expected (nbits/8 bytes)
 *   rsa_expected    default the demo signature
 *   rsa_output      the result, nbits/8 bytes big-endian
 *   rsa_status      the function's return value (0 = success; -100 = not run)
 *   rsa_ms          the operation's time in SysTick ticks of 1 ms
 *   core_clock_hz   the core clock SysTick is set up from (default 48 MHz)
 * and one of its own:
 *   rsa_montmuls    Montgomery multiplications of the operation (.bss, read after)
 *
 * rsa_private and rsa_get_public_key (rsa.h's names, where harnesses such as
 * pkasim bench stop to time the operation) are defined here as calls of
 * src/rsa_soft.c's soft_rsa_private and soft_rsa_get_public_key. They are strong
 * definitions on purpose: were src/rsa.c ever linked into this image too, the link
 * fails instead of the PKA version silently standing in for the software one.
 * Like xrsa.elf, the run time is the same for every key and message of a size
 * (fixed window, constant-time bignum; `pkasim ct-check` checks it).
 */
#include <stdint.h>
#include "cmsis_min.h"
#include "semihost.h"
#include "stopwatch.h"
#include "bn.h"
#include "rsa_io.h"


uint32_t rsa_montmuls;

__attribute__((noinline)) int rsa_private(const rsa_key_t *key, const uint8_t *in, uint8_t *out)
{
    return soft_rsa_private(key, in, out);
}

__attribute__((noinline)) int rsa_get_public_key(rsa_key_t *key, uint8_t *n)
{
    return soft_rsa_get_public_key(key, n);
}

int main(void)
{
    uint32_t op = rsa_op;
    uint32_t nbytes = rsa_input_key.nbits / 8u;

    if (nbytes > sizeof rsa_output)
        nbytes = sizeof rsa_output;

    stopwatch_start();  /* SysTick at 1 ms from the core clock, as the paper measured (IV-B) */

    bn_montmul_count = 0;
    int status;
    if (op == 0)
        status = rsa_private(&rsa_input_key, rsa_input_msg, rsa_output);
    else if (op == 1)
        status = rsa_get_public_key(&rsa_input_key, rsa_output);
    else if (op == 2)
        status = soft_rsa_bn_call((const uint32_t *)(uintptr_t)rsa_input_msg,
                                  (uint32_t *)(uintptr_t)rsa_output);
    else
        status = -100;

    rsa_ms = stopwatch_stop();
    rsa_montmuls = bn_montmul_count;
    rsa_status = status;

    sh_puts("software RSA-");
    sh_print_u32(rsa_input_key.nbits);
    sh_puts(op == 0 ? " private-key operation: " : op == 1 ? " public key n = p*q: "
            : op == 2 ? " bignum probe: " : " unknown rsa_op: ");

    int code = 0;
    if (status != 0) {
        sh_puts("error ");
        sh_print_i32(status);
        code = 2;
    } else if (rsa_check && op != 2) {
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
