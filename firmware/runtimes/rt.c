/*
 * One small hosted C program, built once per C runtime (newlib + rdimon,
 * newlib-nano + rdimon, picolibc + semihost), that exercises what a C
 * runtime asks of semihosting. The first argument picks the check:
 *
 *   rt hello          printf/puts/fprintf(stderr); exit 0
 *   rt exit N         return N from main
 *   rt _exit N        exit(N) from a nested call
 *   rt args A B ...   print argc and each argv[i]; exit argc
 *   rt malloc         allocate, fill, check and free blocks; exit 0
 *   rt files          write, read back, seek, tell, rename and remove a file
 *                     in the current host directory; exit 0
 *   rt nofile NAME    fopen(NAME, "r") must fail: print errno's name; exit 0
 *   rt abort          abort()
 *   rt stdin          copy one line of stdin (to its newline or end of input) to
 *                     stdout upper-cased, count bytes; exit count % 256
 *   rt clock          clock() and time() move forward; exit 0
 *
 * An unknown check exits 100; a failed check prints why and exits 101.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__PICOLIBC__)
#include <semihost.h>
/* picolibc's semihost library has no rename(); its SYS_RENAME call does. */
static int rt_rename(const char *from, const char *to)
{
    return sys_semihost_rename(from, to) == 0 ? 0 : -1;
}
#define rename rt_rename
#else
/* newlib's rename() is link() + unlink(), and rdimon has no link() (ENOSYS);
   rdimon's _rename makes the SYS_RENAME call. */
int _rename(const char *from, const char *to);
#define rename _rename
#endif

#define FAIL(...) do { printf("FAIL: " __VA_ARGS__); putchar('\n'); return 101; } while (0)

static const char *errno_name(int e)
{
    switch (e) {
    case ENOENT: return "ENOENT";
    case EACCES: return "EACCES";
    case EBADF: return "EBADF";
    case EINVAL: return "EINVAL";
    case EISDIR: return "EISDIR";
    case ENAMETOOLONG: return "ENAMETOOLONG";
    case EEXIST: return "EEXIST";
    default: return "other";
    }
}

static int hello(void)
{
    printf("hello from %s, %d + %d = %d\n", "rt", 40, 2, 40 + 2);
    puts("puts line");
    fprintf(stderr, "to stderr\n");
    return 0;
}

static int args(int argc, char **argv)
{
    printf("argc=%d\n", argc);
    for (int i = 1; i < argc; i++)
        printf("argv[%d]=<%s>\n", i, argv[i]);
    return argc;
}

static void nested_exit(int code)
{
    exit(code);
}

static int heap(void)
{
    enum { N = 16 };
    unsigned char *blocks[N];
    unsigned sum = 0;
    for (int i = 0; i < N; i++) {
        size_t size = 32 + 48 * (size_t)i;
        blocks[i] = malloc(size);
        if (blocks[i] == NULL)
            FAIL("malloc(%u) returned NULL", (unsigned)size);
        memset(blocks[i], i + 1, size);
    }
    for (int i = 0; i < N; i += 2)
        free(blocks[i]);
    for (int i = 1; i < N; i += 2) {
        size_t size = 32 + 48 * (size_t)i;
        for (size_t j = 0; j < size; j++)
            sum += blocks[i][j];
        free(blocks[i]);
    }
    char *big = calloc(1000, 4);
    if (big == NULL)
        FAIL("calloc(1000, 4) returned NULL");
    for (int i = 0; i < 4000; i++)
        if (big[i])
            FAIL("calloc memory not zero at %d", i);
    free(big);
    printf("malloc ok, sum %u\n", sum);
    return 0;
}

static int files(void)
{
    FILE *f = fopen("rt_out.txt", "w");
    if (f == NULL)
        FAIL("fopen for writing: errno %d %s", errno, errno_name(errno));
    for (int i = 0; i < 100; i++)
        fprintf(f, "line %03d\n", i);
    if (fclose(f) != 0)
        FAIL("fclose");
    f = fopen("rt_out.txt", "r");
    if (f == NULL)
        FAIL("fopen for reading: errno %d %s", errno, errno_name(errno));
    char line[32];
    int lines = 0;
    while (fgets(line, sizeof line, f) != NULL)
        lines++;
    if (fseek(f, 0, SEEK_END) != 0)
        FAIL("fseek SEEK_END");
    long size = ftell(f);
    if (fseek(f, 50, SEEK_SET) != 0 || fgets(line, sizeof line, f) == NULL)
        FAIL("fseek 50");
    fclose(f);
    printf("read %d lines, %ld bytes, at 50: %s", lines, size, line);
    f = fopen("rt_out.txt", "a");
    if (f == NULL)
        FAIL("fopen for appending");
    fputs("appended\n", f);
    fclose(f);
    if (rename("rt_out.txt", "rt_renamed.txt") != 0)
        FAIL("rename: errno %d %s", errno, errno_name(errno));
    f = fopen("rt_renamed.txt", "rb");
    if (f == NULL)
        FAIL("fopen renamed file");
    fseek(f, 0, SEEK_END);
    printf("after append: %ld bytes\n", ftell(f));
    fclose(f);
    if (fopen("rt_out.txt", "r") != NULL)
        FAIL("old name still opens after rename");
    if (remove("rt_renamed.txt") != 0)
        FAIL("remove: errno %d %s", errno, errno_name(errno));
    if (fopen("rt_renamed.txt", "r") != NULL)
        FAIL("removed file still opens");
    puts("files ok");
    return 0;
}

static int nofile(const char *name)
{
    errno = 0;
    FILE *f = fopen(name, "r");
    if (f != NULL)
        FAIL("fopen(%s) succeeded", name);
    printf("fopen(%s): errno %s\n", name, errno_name(errno));
    return 0;
}

static int upper_stdin(void)
{
    int c;
    unsigned count = 0;
    /* One line, not all of stdin: picolibc reads the console with SYS_READC,
       which has no end-of-input answer, so its getchar() never returns EOF. */
    while ((c = getchar()) != EOF) {
        putchar(toupper(c));
        count++;
        if (c == '\n')
            break;
    }
    printf("\n%u bytes\n", count);
    return (int)(count % 256);
}

static int clocks(void)
{
    clock_t c0 = clock();
    time_t t0 = time(NULL);
    volatile unsigned spin = 0;
    for (unsigned i = 0; i < 200000; i++)
        spin += i;
    clock_t c1 = clock();
    if (c1 < c0 || t0 == (time_t)-1)
        FAIL("clock went backwards or time() failed");
    puts("clock ok");
    return 0;
}

int main(int argc, char **argv)
{
#if defined(__PICOLIBC__)
    /* picolibc's crt0 puts "program-name" in front of the whole command line,
       whose first word already is the program: drop its own name. */
    argc--, argv++;
#endif
    if (argc < 2) {
        puts("usage: rt CHECK [ARGS]");
        return 100;
    }
    const char *check = argv[1];
    if (!strcmp(check, "hello"))
        return hello();
    if (!strcmp(check, "exit") && argc > 2)
        return atoi(argv[2]);
    if (!strcmp(check, "_exit") && argc > 2)
        nested_exit(atoi(argv[2]));
    if (!strcmp(check, "args"))
        return args(argc - 1, argv + 1);
    if (!strcmp(check, "malloc"))
        return heap();
    if (!strcmp(check, "files"))
        return files();
    if (!strcmp(check, "nofile") && argc > 2)
        return nofile(argv[2]);
    if (!strcmp(check, "abort"))
        abort();
    if (!strcmp(check, "stdin"))
        return upper_stdin();
    if (!strcmp(check, "clock"))
        return clocks();
    printf("unknown check %s\n", check);
    return 100;
}
