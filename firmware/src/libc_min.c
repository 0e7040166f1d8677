/*
 * The four memory functions compilers may emit calls to even in freestanding
 * code (structure copies, large initialisers, loop idioms).
 *
 * GCC must not turn these loops back into calls to themselves: the Makefile
 * builds this file with -fno-tree-loop-distribute-patterns for GCC (clang
 * already skips loop-idiom recognition inside functions with these names).
 */
#include <stddef.h>
#include <stdint.h>

#define WORD_ALIGNED(p) (((uintptr_t)(p) & 3u) == 0)

void *memcpy(void *restrict dst, const void *restrict src, size_t n)
{
    unsigned char *d = dst;
    const unsigned char *s = src;

    if (WORD_ALIGNED(d) && WORD_ALIGNED(s)) {
        uint32_t *dw = (uint32_t *)(void *)d;
        const uint32_t *sw = (const uint32_t *)(const void *)s;
        for (; n >= 4; n -= 4)
            *dw++ = *sw++;
        d = (unsigned char *)dw;
        s = (const unsigned char *)sw;
    }
    while (n--)
        *d++ = *s++;
    return dst;
}

void *memmove(void *dst, const void *src, size_t n)
{
    unsigned char *d = dst;
    const unsigned char *s = src;

    if (d == s || n == 0)
        return dst;
    if (d < s) {
        while (n--)
            *d++ = *s++;
        return dst;
    }
    /* dst above src: copy backwards so an overlap is read before written. */
    d += n;
    s += n;
    while (n--)
        *--d = *--s;
    return dst;
}

void *memset(void *dst, int c, size_t n)
{
    unsigned char *d = dst;
    unsigned char b = (unsigned char)c;

    while (n && !WORD_ALIGNED(d)) {
        *d++ = b;
        n--;
    }
    if (n >= 4) {
        uint32_t w = b * 0x01010101u;
        uint32_t *dw = (uint32_t *)(void *)d;
        for (; n >= 4; n -= 4)
            *dw++ = w;
        d = (unsigned char *)dw;
    }
    while (n--)
        *d++ = b;
    return dst;
}

int memcmp(const void *a, const void *b, size_t n)
{
    const unsigned char *p = a, *q = b;

    for (; n; n--, p++, q++)
        if (*p != *q)
            return *p - *q;
    return 0;
}
