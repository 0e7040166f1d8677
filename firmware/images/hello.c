/*
 * hello: semihosted output on every path the other images use.
 *   stdout: "Hello from pkasim: ARM SC000 (ARMv6-M) at 48 MHz\n"  (SYS_WRITE0)
 *   stderr: "hello: this line goes to stderr\n"                   (SYS_WRITE, fd 2)
 *   stdout: "!" then "\n"                                          (SYS_WRITEC)
 * Returns 0 (exit code 0 through SYS_EXIT_EXTENDED).
 */
#include "semihost.h"

static const char stderr_line[] = "hello: this line goes to stderr\n";

int main(void)
{
    sh_puts("Hello from pkasim: ARM SC000 (ARMv6-M) at 48 MHz\n");
    sh_write(SH_STDERR, stderr_line, sizeof stderr_line - 1);
    sh_putc('!');
    sh_putc('\n');
    return 0;
}
