#include "semihost.h"

uint32_t sh_call(uint32_t op, const void *arg)
{
    register uint32_t r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    /* "memory": the host reads the parameter block and may write buffers. */
    __asm__ volatile("bkpt #0xAB" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

void sh_putc(char c)
{
    sh_call(SH_SYS_WRITEC, &c);
}

void sh_puts(const char *s)
{
    sh_call(SH_SYS_WRITE0, s);
}

void sh_write(int fd, const void *buf, unsigned len)
{
    uint32_t block[3] = { (uint32_t)fd, (uint32_t)(uintptr_t)buf, len };
    sh_call(SH_SYS_WRITE, block);
}

void sh_print_u32(uint32_t v)
{
    char buf[11];
    unsigned i = sizeof buf - 1;

    buf[i] = '\0';
    do {
        buf[--i] = (char)('0' + v % 10u);
        v /= 10u;
    } while (v != 0);
    sh_puts(&buf[i]);
}

void sh_print_hex(uint32_t v)
{
    static const char digits[] = "0123456789abcdef";
    char buf[11];

    buf[0] = '0';
    buf[1] = 'x';
    for (unsigned i = 0; i < 8; i++)
        buf[2 + i] = digits[(v >> (28 - 4 * i)) & 0xFu];
    buf[10] = '\0';
    sh_puts(buf);
}

void sh_exit(int code)
{
    uint32_t block[2] = { SH_ADP_STOPPED_APPLICATION_EXIT, (uint32_t)code };

    sh_call(SH_SYS_EXIT_EXTENDED, block);
    /* A host without SYS_EXIT_EXTENDED returns: use the plain form. */
    sh_call(SH_SYS_EXIT, (const void *)(uintptr_t)SH_ADP_STOPPED_APPLICATION_EXIT);
    for (;;)
        __asm__ volatile("" ::: "memory");
}

void sh_print_i32(int32_t v)
{
    if (v < 0) {
        sh_putc('-');
        sh_print_u32(0u - (uint32_t)v);
    } else {
        sh_print_u32((uint32_t)v);
    }
}
