/* The memory functions of src/libc_min.c (the images are freestanding: no <string.h>). */
#ifndef PKASIM_LIBC_MIN_H
#define PKASIM_LIBC_MIN_H

#include <stddef.h>

void *memcpy(void *restrict dst, const void *restrict src, size_t n);
void *memmove(void *dst, const void *src, size_t n);
void *memset(void *dst, int c, size_t n);
int memcmp(const void *a, const void *b, size_t n);

#endif
