/*
 * pkasim ct-check, the native half: a running hash of what a run did that its timing
 * may depend on, and on request a record of a window of it (docs/ct-check.md).
 *
 * Three streams, each hashed on its own (FNV-1a over 64-bit words) and all together
 * in the order they happen:
 *   flow  every block that starts executing (start address and size), every idle loop
 *         fast-forwarded or WFI sleep (its cycles), every exception taken or returned
 *         from (its number): the control flow;
 *   mem   every CPU load and store (address, size, read or write; never the value);
 *   pka   every PKA operation started (opcode, length, busy cycles).
 * Blocks come from a Unicorn block hook installed after the cycle hook (cyclehook.c),
 * which counts a block only when the cycle hook let it start, as observe.c does;
 * accesses from a UC_HOOK_MEM_READ | UC_HOOK_MEM_WRITE hook; PKA operations, sleeps,
 * spins and exceptions from the observer's events (observe.c calls pk_ct_event for
 * every pk_obs_emit). Nothing here calls Python.
 *
 * Every 2^ck_shift events of the merged stream the hashes and the cycle count are kept
 * as a checkpoint: two runs whose final hashes differ first differ within the window
 * after their last equal checkpoint. Given the checkpoints of a reference run, a run
 * sets ``diverged`` at its first checkpoint that differs (Python then stops it: a
 * leaky firmware costs one full run, not one per input). A second run records the
 * events of that window only (rec_from <= index < rec_to), with the PC of each
 * access, so the first difference is found without recording a whole run.
 */
#include <stdlib.h>
#include <string.h>

#include "pkstate.h"

enum { CT_FLOW = 0, CT_MEM = 1, CT_PKA = 2, CT_ALL = 3 };
enum { REC_BLOCK = 1, REC_READ = 2, REC_WRITE = 3, REC_PKA = 4, REC_SPIN = 5, REC_SLEEP = 6, REC_EXC = 7,
       REC_EXC_RETURN = 8 };

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull
#define CK_WORDS 5
#define UC_MEM_WRITE_TYPE 17 /* uc_mem_type: UC_MEM_READ = 16, UC_MEM_WRITE = 17 */

/* One recorded event: 32 bytes, the layout emulator/analysis/cthash.py unpacks. */
typedef struct {
    uint64_t index; /* its place in the merged stream */
    uint64_t cycle; /* model time: a block's start, the cycle of the event */
    uint32_t kind;  /* REC_* */
    uint32_t addr;  /* block start, access address, PKA opcode | LEN << 8, exception number */
    uint32_t arg;   /* block size, access size, PKA busy cycles, cycles spun or slept */
    uint32_t pc;    /* the instruction: an access's own, the block's start, a PKA start's store */
} pk_ct_rec;

typedef struct {
    /* read by Python: emulator/analysis/cthash.py mirrors these fields, in this order */
    uint64_t hash[4];  /* flow, mem, pka, all */
    uint64_t count[4];
    uint64_t *ck;      /* checkpoints: CK_WORDS each (hash of all, cycle, hash of flow, mem, pka) */
    uint32_t ck_n, ck_cap;
    uint32_t ck_shift, nomem;
    uint64_t rec_from, rec_to;
    pk_ct_rec *rec;
    uint32_t rec_n, rec_cap;
    int32_t pc_regid, pad;
    const uint64_t *ref; /* a reference run's checkpoints, or NULL */
    uint32_t ref_n;
    uint32_t diverged;   /* a checkpoint differs from the reference's */
    /* the cycle hook's state */
    pk_state *s;
    uint32_t last_pc; /* the last access's instruction (recording only) */
} pk_ct;

static inline uint64_t mix(uint64_t h, uint64_t x) { return (h ^ x) * FNV_PRIME; }

static void checkpoint(pk_ct *c) {
    if (c->ck_n == c->ck_cap) {
        uint32_t cap = c->ck_cap ? c->ck_cap * 2 : 1024;
        uint64_t *n = realloc(c->ck, (size_t)cap * CK_WORDS * sizeof(uint64_t));
        if (!n) {
            c->nomem = 1;
            return;
        }
        c->ck = n;
        c->ck_cap = cap;
    }
    uint64_t *e = &c->ck[(size_t)CK_WORDS * c->ck_n];
    e[0] = c->hash[CT_ALL];
    e[1] = c->s->cycles;
    e[2] = c->hash[CT_FLOW];
    e[3] = c->hash[CT_MEM];
    e[4] = c->hash[CT_PKA];
    if (c->ref && (c->ck_n >= c->ref_n || c->ref[(size_t)CK_WORDS * c->ck_n] != e[0])) c->diverged = 1;
    c->ck_n++;
}

static void record(pk_ct *c, uint64_t index, uint32_t kind, uint32_t addr, uint32_t arg, uint32_t pc,
                   uint64_t cycle) {
    if (c->rec_n == c->rec_cap) {
        uint32_t cap = c->rec_cap ? c->rec_cap * 2 : 4096;
        pk_ct_rec *n = realloc(c->rec, (size_t)cap * sizeof(pk_ct_rec));
        if (!n) {
            c->nomem = 1;
            return;
        }
        c->rec = n;
        c->rec_cap = cap;
    }
    pk_ct_rec *r = &c->rec[c->rec_n++];
    r->index = index;
    r->cycle = cycle;
    r->kind = kind;
    r->addr = addr;
    r->arg = arg;
    r->pc = pc;
}

/* One event of a stream; ``x`` is what it hashes. */
static inline void event(pk_ct *c, int stream, uint64_t x, uint32_t kind, uint32_t addr, uint32_t arg,
                         uint32_t pc, uint64_t cycle) {
    uint64_t index = c->count[CT_ALL];
    c->hash[stream] = mix(c->hash[stream], x);
    c->count[stream]++;
    c->hash[CT_ALL] = mix(c->hash[CT_ALL], x ^ ((uint64_t)kind << 56));
    c->count[CT_ALL] = index + 1;
    if (index >= c->rec_from && index < c->rec_to) record(c, index, kind, addr, arg, pc, cycle);
    if (((index + 1) & ((1ull << c->ck_shift) - 1)) == 0) checkpoint(c);
}

void pk_ct_block_hook(void *uc, uint64_t address, uint32_t size, pk_ct *c) {
    (void)uc;
    uint32_t a = (uint32_t)address;
    pk_state *s = c->s;
    if (!s->cur_valid || s->cur_start != a) return; /* the cycle hook stopped before it */
    event(c, CT_FLOW, (uint64_t)a << 32 | size, REC_BLOCK, a, size, a, s->cycles);
}

void pk_ct_mem_hook(void *uc, int type, uint64_t address, int size, int64_t value, pk_ct *c) {
    (void)value;
    uint32_t kind = type == UC_MEM_WRITE_TYPE ? REC_WRITE : REC_READ;
    uint32_t pc = 0;
    uint64_t index = c->count[CT_ALL];
    if (index >= c->rec_from && index < c->rec_to) {
        c->s->reg_read(uc, c->pc_regid, &pc);
        c->last_pc = pc;
    }
    event(c, CT_MEM, (uint64_t)(uint32_t)address << 32 | (uint64_t)(uint32_t)size << 8 | kind, kind,
          (uint32_t)address, (uint32_t)size, pc, c->s->cycles);
}

/* Called by observe.c for every event it is given (pk_obs_emit). */
void pk_ct_event(void *ctx, uint32_t kind, uint64_t cycle, uint32_t a, uint64_t b) {
    pk_ct *c = ctx;
    switch (kind) {
    case PK_EV_PKA_START:
        event(c, CT_PKA, (uint64_t)a << 32 | (uint32_t)b, REC_PKA, a, (uint32_t)b, c->last_pc, cycle);
        break;
    case PK_EV_SPIN:
        event(c, CT_FLOW, b << 4 | REC_SPIN, REC_SPIN, 0, (uint32_t)b, c->s->cur_start, cycle);
        break;
    case PK_EV_SLEEP:
        event(c, CT_FLOW, b << 4 | REC_SLEEP, REC_SLEEP, 0, (uint32_t)b, c->s->cur_start, cycle);
        break;
    case PK_EV_EXC_ENTRY:
        event(c, CT_FLOW, (uint64_t)a << 4 | REC_EXC, REC_EXC, a, (uint32_t)b, (uint32_t)b, cycle);
        break;
    case PK_EV_EXC_RETURN:
        event(c, CT_FLOW, (uint64_t)a << 4 | REC_EXC_RETURN, REC_EXC_RETURN, a, 0, 0, cycle);
        break;
    default:
        break;
    }
}

pk_ct *pk_ct_new(pk_state *s, uint32_t ck_shift, uint64_t rec_from, uint64_t rec_to, int32_t pc_regid) {
    pk_ct *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    for (int i = 0; i < 4; i++) c->hash[i] = FNV_OFFSET;
    c->s = s;
    c->ck_shift = ck_shift;
    c->rec_from = rec_from;
    c->rec_to = rec_to;
    c->pc_regid = pc_regid;
    return c;
}

/* Compare the checkpoints with a reference run's (``n`` of them, CK_WORDS words each;
 * the caller keeps them alive). */
void pk_ct_set_reference(pk_ct *c, const uint64_t *ref, uint32_t n) {
    c->ref = ref;
    c->ref_n = n;
}

void pk_ct_free(pk_ct *c) {
    if (!c) return;
    free(c->ck);
    free(c->rec);
    free(c);
}

uint32_t pk_ct_sizeof_rec(void) { return (uint32_t)sizeof(pk_ct_rec); }
