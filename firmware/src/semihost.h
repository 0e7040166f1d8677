/*
 * ARM semihosting (ARM "Semihosting for AArch32 and AArch64", v2.0) for
 * ARMv6-M: the request is a BKPT #0xAB with r0 = operation number and
 * r1 = parameter (usually a pointer to a parameter block); the result comes
 * back in r0.
 */
#ifndef PKASIM_SEMIHOST_H
#define PKASIM_SEMIHOST_H

#include <stdint.h>

#define SH_SYS_WRITEC        0x03u  /* r1 -> one character */
#define SH_SYS_WRITE0        0x04u  /* r1 -> NUL-terminated string */
#define SH_SYS_WRITE         0x05u  /* r1 -> {handle, ptr, len}; r0 = bytes NOT written */
#define SH_SYS_EXIT          0x18u  /* r1 = reason code (32-bit form: no exit code) */
#define SH_SYS_EXIT_EXTENDED 0x20u  /* r1 -> {reason, subcode} */

#define SH_ADP_STOPPED_APPLICATION_EXIT 0x20026u

#define SH_STDOUT 1
#define SH_STDERR 2

/* Raw request: returns r0. */
uint32_t sh_call(uint32_t op, const void *arg);

void sh_putc(char c);                               /* SYS_WRITEC */
void sh_puts(const char *s);                        /* SYS_WRITE0, no newline added */
void sh_write(int fd, const void *buf, unsigned len); /* SYS_WRITE */
void sh_print_u32(uint32_t v);                      /* decimal, no newline */
void sh_print_i32(int32_t v);  /* signed decimal */
void sh_print_hex(uint32_t v);                      /* "0x" + 8 hex digits, no newline */
/* SYS_EXIT_EXTENDED {ADP_Stopped_ApplicationExit, code}; falls back to
 * SYS_EXIT if the host returns, then spins. */
void sh_exit(int code) __attribute__((noreturn));

#endif
