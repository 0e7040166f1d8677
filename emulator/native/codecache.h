/*
 * pkasim code cache: per-block totals of the cycle model, built natively the first
 * time a block executes, for code anywhere (flash, SRAM, any executable region).
 *
 * The cache maps a block's start address to its cost, instruction count, last
 * instruction's flags, alignment checks and first UNDEFINED instruction. It is filled
 * from guest memory through Unicorn (uc_mem_read) and thumb.c, and it forgets code
 * that is written: each executable region keeps a bitmap of the halfwords cached
 * blocks were decoded from (and of the literal words they read), and a write that
 * touches one drops the cache. Memory grows with the code executed, not with the
 * size of the flash.
 */
#ifndef PK_CODECACHE_H
#define PK_CODECACHE_H

#include <stddef.h>
#include <stdint.h>

#include "unaligned.h"
#include "thumb.h"

#define PK_NONE 0xFFFFFFFFu

/* Unicorn's uc_mem_read (uc_err uc_mem_read(uc_engine *, uint64_t, void *, uint64_t)). */
typedef int (*pk_code_read_fn)(void *uc, uint64_t address, void *bytes, uint64_t size);

typedef struct { /* 32 bytes: two to a cache line */
    uint32_t start;       /* block start address; PK_NONE for a free slot */
    uint16_t size;        /* bytes (at most MAX_BLOCK_BYTES) */
    uint16_t check_n;
    uint32_t cost;        /* cycles, zero-wait-state table plus flash fetch wait states */
    uint32_t insns;
    uint32_t check_first; /* alignment checks: [check_first, check_first + check_n) */
    uint8_t last_flags;   /* flags of the block's last instruction */
    uint8_t program;      /* 1: the checks are an alignment program (unaligned.h), check_n operations */
    uint8_t mode;         /* 0 not yet known, 1 plain, 2 inside a loop the idle check follows */
    uint8_t pad;
    uint32_t undef_off;   /* byte offset of the first UNDEFINED instruction, or PK_NONE */
    uint32_t trust_tag;   /* with mode 2: the one such loop it lies in (idle.c), or 0 */
} pk_block;

/* One alignment check: address = reg a + reg b + off at block entry (-1: no register;
 * never PC, r15: such an address is an alignment program's). */
typedef struct {
    int8_t a, b;
    uint8_t mask;
    uint8_t partial; /* 1: an operand known aligned was left out (unaligned.h CHECK_PARTIAL) */
    int32_t off;
    uint32_t pc; /* address of the accessing instruction */
} pk_check;

typedef struct pk_code pk_code;

/* One register-addressed word or halfword access of a block (pk_code_accesses). */
#define PK_ACC_MAX 64  /* unrolled copy loops of the ECC firmware have 32 or more */
typedef struct {
    uint32_t cost;    /* cycles of the block before the accessing instruction */
    int8_t rn, rm;    /* address = rn + rm (-1: none) + imm, from the live registers */
    uint8_t multiple; /* LDM/STM/PUSH/POP: any word of the next 64 bytes */
    uint8_t pad;
    int32_t imm;
} pk_acc;

/* Results of pk_code_block besides the block. */
enum { PK_OK = 0, PK_NOMEM = 1, PK_UNREADABLE = 2 };

pk_code *pk_code_new(uint32_t muls_cycles, uint32_t fetch_ws, uint32_t flash_base, uint32_t flash_end,
                     void *mem_read);
void pk_code_free(pk_code *c);
/* Declare an executable memory region; writable regions get their writes watched. */
int pk_code_add_region(pk_code *c, uint32_t base, uint32_t size, uint32_t writable);
/* Forget every cached block (a new image, or code that changed). */
void pk_code_clear(pk_code *c);
/* The cached block starting at ``start``, if any, gets its mode back to "not yet known"
 * (0), so that the stock wheel's block hook sends its next start to block_start, where
 * the mode is decided again (cyclehook.c: how a call probe sees the block it awaits). */
void pk_code_undecide(pk_code *c, uint32_t start);
/* Memory written at [addr, addr + len): drop the cache if cached code came from there.
 * Returns 1 if it did. */
int pk_code_written(pk_code *c, uint32_t addr, uint32_t len);

/* The block [start, start + size): from the cache, or decoded now. A block seen with
 * another size than the cached one (a run that stopped mid-block) is decoded into
 * *scratch and not cached. Returns NULL and sets *err on failure. *watch is set to the
 * index of a writable region whose write watch no longer covers its cached code. */
const pk_block *pk_code_block(pk_code *c, void *uc, uint32_t start, uint32_t size, int align,
                              pk_block *scratch, int *err, int *watch);
/* What the block hook reads at nearly every block start, the first member of every
 * pk_code (public so that the reads below are inline in the hook): the block table
 * (open addressing by the start's halfword index, linear probing, at most half full),
 * the register alignment checks, the alignment programs and the memory they read. */
typedef struct {
    pk_block *table;
    uint32_t cap, used;
    pk_check *checks;
    pk_aprog prog;  /* alignment programs of the blocks that need one (unaligned.h) */
    pk_amap memory; /* guest memory the programs read */
} pk_code_table;

/* The cached block [start, start + size), or NULL: nothing decoded, nothing changed. */
static inline const pk_block *pk_code_hit(const pk_code *c, uint32_t start, uint32_t size) {
    const pk_code_table *t = (const pk_code_table *)(const void *)c;
    uint32_t mask = t->cap - 1, i = (start >> 1) & mask;
    for (;;) {
        const pk_block *b = &t->table[i];
        if (b->start == start) return b->size == size ? b : NULL;
        if (b->start == PK_NONE) return NULL;
        i = (i + 1) & mask;
    }
}
/* A block's register alignment checks; its alignment program (b->program set), and the
 * memory programs read. */
static inline const pk_check *pk_code_checks(const pk_code *c, const pk_block *b) {
    return &((const pk_code_table *)(const void *)c)->checks[b->check_first];
}
static inline const pk_aop *pk_code_program(const pk_code *c, const pk_block *b) {
    return &((const pk_code_table *)(const void *)c)->prog.ops[b->check_first];
}
int pk_code_read(pk_code *c, void *uc, uint32_t addr, void *out, uint32_t n);
static inline pk_amap *pk_code_memory(pk_code *c) { return &((pk_code_table *)(void *)c)->memory; }
/* Guest memory at [base, base + size) is the host memory at host (RAM and flash, for
 * the alignment programs; never a peripheral). -1 when the table is full. */
int pk_code_add_memory(pk_code *c, uint32_t base, uint32_t size, const void *host);

/* The accesses of the cached block [start, end), in program order, decoded once;
 * NULL when the block is not cached as such or has more than PK_ACC_MAX of them. */
const pk_acc *pk_code_accesses(pk_code *c, void *uc, uint32_t start, uint32_t end, uint32_t *n);

/* Cycles and instructions of [start, stop) decoded from memory (a partial block). */
uint32_t pk_code_cost_range(pk_code *c, void *uc, uint32_t start, uint32_t stop, uint32_t *insns);

/* Decode the instructions of [start, end) from memory into out[], at most max of
 * them (literal loads resolved when resolve is set); returns how many. */
uint32_t pk_code_decode_range(pk_code *c, void *uc, uint32_t start, uint32_t end, pk_insn *out, uint32_t max,
                              int resolve);

/* The span a region's write watch must cover (lo >= hi: nothing cached there). */
void pk_code_watch_need(const pk_code *c, uint32_t region, uint32_t *lo, uint32_t *hi);
/* Record the span the caller now watches for writes in that region; read it back. */
void pk_code_watch_set(pk_code *c, uint32_t region, uint32_t lo, uint32_t hi);
void pk_code_watch_span(const pk_code *c, uint32_t region, uint32_t *lo, uint32_t *hi);

/* The engine's TLB (tlb.c): with fetch set, note that code is fetched from the page
 * [addr, addr + size); without, whether code was ever fetched from any of it (never
 * forgotten: a page once holding code keeps its stores on the engine's checked path).
 * Addresses outside every executable region hold no code. */
int pk_code_page_holds_code(pk_code *c, uint32_t addr, uint32_t size, int fetch);

/* A writable region whose cached code its write watch does not cover yet, or -1. */
int pk_code_watch_needed(const pk_code *c);

/* Find guest writes to code by translation instead of a write watch (the stock wheel,
 * retranslate.c): keep the bytes decoded from writable regions, and take literals there
 * as variables. */
void pk_code_track_translation(pk_code *c);
/* The engine translated [start, start + len) again: 1 if bytes decoded from there
 * changed since (the cache is stale), else 0. */
int pk_code_translated(pk_code *c, void *uc, uint32_t start, uint32_t len);

/* Bytes the cache holds now (tables, checks, bitmaps), for reports and benchmarks. */
uint64_t pk_code_bytes(const pk_code *c);
uint32_t pk_code_blocks(const pk_code *c);

#endif
