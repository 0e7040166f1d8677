/*
 * kernels: a speed benchmark in the spirit of Embench-IoT (small integer kernels of
 * the kind embedded code runs), written for pkasim's emulator benchmarks
 * (benchmarks/engine_speed.py): CRC-32 over a buffer, a 16x16 integer matrix
 * multiply, a shell sort, a 16-tap FIR filter, a table-driven state machine and a
 * string search. Each runs `iterations` times on the same input; the combined
 * checksum does not depend on `iterations` (a benchmark may patch it: it lives in
 * .data) and is printed and left in `kernels_checksum`:
 *   "kernels: <iterations> rounds, checksum 0x........\n"
 * Returns 0, or 1 when a kernel's self-check fails.
 */
#include <stdint.h>
#include "semihost.h"

volatile uint32_t iterations = 10;
volatile uint32_t kernels_checksum;

#define BUF 512u
#define MAT 16u
#define SORT 128u
#define TAPS 16u
#define SAMPLES 256u

static uint8_t buf[BUF];
static int32_t ma[MAT][MAT], mb[MAT][MAT], mc[MAT][MAT];
static int32_t sorted[SORT], unsorted[SORT];
static int16_t samples[SAMPLES], filtered[SAMPLES];
static const int16_t taps[TAPS] = {3, -7, 12, -20, 31, -44, 60, 90, 90, 60, -44, 31, -20, 12, -7, 3};
static const char haystack[] = "the quick brown fox jumps over the lazy dog while the cat sleeps on a warm mat";

static uint32_t rng_state = 0x9E3779B9u;

static uint32_t rng(void)
{
    uint32_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    rng_state = x;
    return x;
}

static uint32_t crc32(const uint8_t *p, uint32_t n)
{
    uint32_t crc = 0xFFFFFFFFu;
    for (uint32_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

static uint32_t matmult(void)
{
    uint32_t sum = 0;
    for (unsigned i = 0; i < MAT; i++)
        for (unsigned j = 0; j < MAT; j++) {
            int32_t acc = 0;
            for (unsigned k = 0; k < MAT; k++)
                acc += ma[i][k] * mb[k][j];
            mc[i][j] = acc;
            sum += (uint32_t)acc;
        }
    return sum;
}

static uint32_t shellsort(void)
{
    for (unsigned i = 0; i < SORT; i++)
        sorted[i] = unsorted[i];
    for (unsigned gap = SORT / 2; gap > 0; gap /= 2)
        for (unsigned i = gap; i < SORT; i++) {
            int32_t v = sorted[i];
            unsigned j = i;
            while (j >= gap && sorted[j - gap] > v) {
                sorted[j] = sorted[j - gap];
                j -= gap;
            }
            sorted[j] = v;
        }
    uint32_t bad = 0;
    for (unsigned i = 1; i < SORT; i++)
        bad += sorted[i - 1] > sorted[i];
    return bad ? 0xBADu : (uint32_t)sorted[SORT / 2];
}

static uint32_t fir(void)
{
    uint32_t sum = 0;
    for (unsigned n = TAPS; n < SAMPLES; n++) {
        int32_t acc = 0;
        for (unsigned k = 0; k < TAPS; k++)
            acc += taps[k] * samples[n - k];
        filtered[n] = (int16_t)(acc >> 8);
        sum = (sum << 1 | sum >> 31) ^ (uint16_t)filtered[n];
    }
    return sum;
}

/* A small protocol parser: a table-driven state machine over the buffer's bytes. */
static uint32_t state_machine(void)
{
    static const uint8_t next[4][4] = {{1, 0, 2, 0}, {1, 3, 0, 2}, {3, 2, 1, 0}, {0, 1, 3, 2}};
    uint32_t state = 0, counts[4] = {0, 0, 0, 0};
    for (unsigned i = 0; i < BUF; i++) {
        state = next[state][buf[i] & 3u];
        counts[state]++;
        if (state == 3 && (buf[i] & 0x80u))
            state = 0;
    }
    return counts[0] * 7u + counts[1] * 5u + counts[2] * 3u + counts[3];
}

static uint32_t search(void)
{
    static const char *const needles[] = {"fox", "lazy", "warm", "cat", "zebra", "the"};
    uint32_t found = 0;
    for (unsigned w = 0; w < sizeof needles / sizeof needles[0]; w++) {
        const char *n = needles[w];
        for (unsigned i = 0; haystack[i]; i++) {
            unsigned k = 0;
            while (n[k] && haystack[i + k] == n[k])
                k++;
            if (!n[k])
                found = found * 31u + i;
        }
    }
    return found;
}

int main(void)
{
    for (unsigned i = 0; i < BUF; i++)
        buf[i] = (uint8_t)rng();
    for (unsigned i = 0; i < MAT; i++)
        for (unsigned j = 0; j < MAT; j++) {
            ma[i][j] = (int32_t)(rng() & 0xFF) - 128;
            mb[i][j] = (int32_t)(rng() & 0xFF) - 128;
        }
    for (unsigned i = 0; i < SORT; i++)
        unsorted[i] = (int32_t)(rng() >> 8);
    for (unsigned i = 0; i < SAMPLES; i++)
        samples[i] = (int16_t)rng();

    uint32_t n = iterations, sum = 0;
    for (uint32_t it = 0; it < n; it++) {
        uint32_t round = crc32(buf, BUF);
        round ^= matmult() * 3u;
        round ^= shellsort() * 5u;
        round ^= fir() * 7u;
        round ^= state_machine() * 11u;
        round ^= search() * 13u;
        sum = round; /* every round computes the same value */
    }
    kernels_checksum = sum;
    sh_puts("kernels: ");
    sh_print_u32(n);
    sh_puts(" rounds, checksum ");
    sh_print_hex(sum);
    sh_puts("\n");
    return shellsort() == 0xBADu;
}
