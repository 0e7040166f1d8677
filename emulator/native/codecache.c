/*
 * pkasim code cache (see codecache.h).
 *
 * Blocks live in an open-addressing table indexed by start address (linear
 * probing, at most half full), so a lookup is usually one compare,
 * and memory follows the code executed. Each executable region has a bitmap with one
 * bit per halfword, in 4 KiB pages allocated when code from that page is first
 * decoded: a write that touches a set bit means cached code changed, and the whole
 * cache is dropped (self-modifying code is rare; decoding again is cheap).
 */
#include "codecache.h"

#include <stdlib.h>
#include <string.h>

#define MAX_REGIONS 16
#define PAGE_SHIFT 12
#define PAGE_BYTES (1u << PAGE_SHIFT)
#define PAGE_MAP_BYTES (PAGE_BYTES / 16) /* one bit per halfword */
#define FIRST_CAPACITY 1024u
#define MAX_BLOCK_BYTES 8192u /* Unicorn translates at most 512 instructions per block */

typedef struct {
    uint32_t base, size, writable;
    uint32_t npages;
    uint8_t **pages;          /* per 4 KiB page: halfword bitmap, or NULL */
    uint32_t marked;          /* some bit is set */
    uint32_t need_lo, need_hi; /* span of the code and literals decoded here (for the write watch) */
    uint32_t watch_lo, watch_hi;
    uint8_t *fetched;          /* one bit per TLB_GRAIN bytes: the engine has fetched code there */
    uint8_t **shadow;          /* by_translation: per 4 KiB page, the bytes its marked halfwords held when decoded */
} region_t;

/* The engine's TLB pages are 1 KiB on an ARMv6-M core (Unicorn's ARM target without
 * ARMv7 features); the fetched bits are kept at that grain (pk_code_page_holds_code). */
#define TLB_GRAIN_SHIFT 10u

/* Access lists of cached blocks, direct-mapped by start address: where a peripheral
 * access falls in its block (cyclehook.c pk_access_offset) without decoding the block
 * again on every access. The slots are small and the lists share one pool, so a run
 * touches a few pages of them (a whole list in each slot was 780 bytes a slot: a page
 * fault every few slots on each new machine, and a cache miss at each lookup). */
#define ACC_SLOTS 1024u
#define ACC_POOL_MAX 65536u /* entries: past this the lists are built again from empty */

typedef struct {
    uint32_t start, end; /* end 0: empty (a block ends above its start) */
    uint32_t n, at;      /* the list: pool[at, at + n) */
} acc_slot;

struct pk_code {
    pk_code_table t;          /* first: the hook reads it inline (codecache.h) */
    pk_rules rules;
    pk_code_read_fn mem_read;
    uint32_t checks_used, checks_cap;
    region_t regions[MAX_REGIONS];
    uint32_t nregions;
    uint64_t map_bytes;
    acc_slot *acc;            /* ACC_SLOTS access lists (pk_code_accesses), allocated on first use */
    pk_acc *acc_pool;         /* their entries */
    uint32_t acc_used, acc_cap;
    pk_abuild *build;         /* scratch for building a program, allocated on first use */
    uint32_t by_translation;  /* guest writes to code are found when the engine translates it again */
};

pk_code *pk_code_new(uint32_t muls_cycles, uint32_t fetch_ws, uint32_t flash_base, uint32_t flash_end,
                     void *mem_read) {
    pk_code *c = calloc(1, sizeof(pk_code));
    if (!c) return NULL;
    c->rules.muls_cycles = muls_cycles;
    c->rules.fetch_ws = fetch_ws;
    c->rules.flash_base = flash_base;
    c->rules.flash_end = flash_end;
    c->mem_read = (pk_code_read_fn)mem_read;
    c->t.cap = FIRST_CAPACITY;
    c->t.table = malloc(c->t.cap * sizeof(pk_block));
    if (!c->t.table) {
        free(c);
        return NULL;
    }
    memset(c->t.table, 0xFF, c->t.cap * sizeof(pk_block));
    return c;
}

void pk_code_free(pk_code *c) {
    if (!c) return;
    for (uint32_t r = 0; r < c->nregions; r++) {
        region_t *g = &c->regions[r];
        if (g->pages)
            for (uint32_t p = 0; p < g->npages; p++) free(g->pages[p]);
        free(g->pages);
        if (g->shadow)
            for (uint32_t p = 0; p < g->npages; p++) free(g->shadow[p]);
        free(g->shadow);
        free(g->fetched);
    }
    free(c->t.table);
    free(c->t.checks);
    free(c->acc);
    free(c->acc_pool);
    free(c->t.prog.ops);
    pk_abuild_free(c->build);
    free(c);
}

int pk_code_add_region(pk_code *c, uint32_t base, uint32_t size, uint32_t writable) {
    if (c->nregions == MAX_REGIONS || size == 0) return -1;
    region_t *g = &c->regions[c->nregions++];
    memset(g, 0, sizeof(*g));
    g->base = base;
    g->size = size;
    g->writable = writable;
    g->npages = (uint32_t)(((uint64_t)size + PAGE_BYTES - 1) >> PAGE_SHIFT);
    g->need_lo = g->watch_lo = PK_NONE;
    g->need_hi = g->watch_hi = 0;
    g->fetched = calloc(((size_t)(((uint64_t)size + (1u << TLB_GRAIN_SHIFT) - 1) >> TLB_GRAIN_SHIFT) + 7) / 8, 1);
    if (!g->fetched) {
        c->nregions--;
        return -1;
    }
    return 0;
}

static int region_of(const pk_code *c, uint32_t a) {
    for (uint32_t r = 0; r < c->nregions; r++)
        if (a - c->regions[r].base < c->regions[r].size) return (int)r;
    return -1;
}

void pk_code_clear(pk_code *c) {
    memset(c->t.table, 0xFF, c->t.cap * sizeof(pk_block));
    if (c->acc) memset(c->acc, 0, ACC_SLOTS * sizeof(acc_slot));
    c->acc_used = 0;
    c->t.used = 0;
    c->checks_used = 0;
    c->t.prog.used = 0;
    for (uint32_t r = 0; r < c->nregions; r++) {
        region_t *g = &c->regions[r];
        if (!g->marked) continue;
        for (uint32_t p = 0; p < g->npages; p++)
            if (g->pages[p]) memset(g->pages[p], 0, PAGE_MAP_BYTES);
        g->marked = 0;
    }
}

void pk_code_undecide(pk_code *c, uint32_t start) {
    uint32_t mask = c->t.cap - 1, i = (start >> 1) & mask; /* pk_code_hit's probe sequence */
    for (;;) {
        pk_block *b = &c->t.table[i];
        if (b->start == start) b->mode = 0;
        if (b->start == start || b->start == PK_NONE) return;
        i = (i + 1) & mask;
    }
}

/* Page p of a region's lazily allocated two-level map (*top: npages pointers, each page
 * `bytes` long), allocated zeroed on first use and counted in map_bytes; NULL when
 * host memory runs out. */
static uint8_t *lazy_page(pk_code *c, uint8_t ***top, uint32_t npages, uint32_t p, uint32_t bytes) {
    if (!*top) {
        *top = calloc(npages, sizeof(uint8_t *));
        if (!*top) return NULL;
        c->map_bytes += (uint64_t)npages * sizeof(uint8_t *);
    }
    if (!(*top)[p]) {
        (*top)[p] = calloc(1, bytes);
        if (!(*top)[p]) return NULL;
        c->map_bytes += bytes;
    }
    return (*top)[p];
}

/* Set the bits of [a, end) in the region bitmaps; -1 when a page cannot be allocated. */
static int mark(pk_code *c, uint32_t a, uint32_t end) {
    a &= ~1u;
    while (a < end) {
        int r = region_of(c, a);
        if (r < 0) {
            a += 2;
            continue;
        }
        region_t *g = &c->regions[r];
        uint32_t off = a - g->base, p = off >> PAGE_SHIFT;
        uint8_t *page = lazy_page(c, &g->pages, g->npages, p, PAGE_MAP_BYTES);
        if (!page) return -1;
        uint32_t h = (off & (PAGE_BYTES - 1)) >> 1;
        page[h >> 3] |= (uint8_t)(1u << (h & 7));
        g->marked = 1;
        if (a < g->need_lo) g->need_lo = a;
        if (a + 2 > g->need_hi) g->need_hi = a + 2;
        a += 2;
    }
    return 0;
}

int pk_code_written(pk_code *c, uint32_t addr, uint32_t len) {
    if (!len) return 0;
    uint64_t end = (uint64_t)addr + len;
    for (uint32_t r = 0; r < c->nregions; r++) {
        region_t *g = &c->regions[r];
        if (!g->marked) continue;
        uint64_t lo = addr > g->base ? addr : g->base;
        uint64_t hi = end < (uint64_t)g->base + g->size ? end : (uint64_t)g->base + g->size;
        for (uint64_t a = lo & ~1ull; a < hi; a += 2) {
            uint32_t off = (uint32_t)(a - g->base), p = off >> PAGE_SHIFT;
            if (!g->pages[p]) {
                a = ((uint64_t)(p + 1) << PAGE_SHIFT) + g->base - 2; /* skip the page */
                continue;
            }
            uint32_t h = (off & (PAGE_BYTES - 1)) >> 1;
            if (g->pages[p][h >> 3] & (1u << (h & 7))) {
                pk_code_clear(c);
                return 1;
            }
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- changes found at translation
 *
 * On the stock Unicorn wheel a write watch is a memory hook, and any memory hook sends
 * every load and store of the program to the engine's slow path. The engine itself
 * drops the translations a guest store overwrites (a page it translated code from keeps
 * its stores on the checked path), so a block whose bytes changed is translated again
 * before it runs again: pkasim is told (UC_HOOK_EDGE_GENERATED, retranslate.c) and
 * compares the bytes decoded from there with the bytes now. A literal in writable
 * memory is no constant then (a store changes it without a new translation): the
 * alignment program reads it when the block runs. */

void pk_code_track_translation(pk_code *c) { c->by_translation = 1; }

/* Keep the bytes of [a, end) (buf holds them from a) beside their marks. */
static int keep_bytes(pk_code *c, uint32_t a, uint32_t end, const uint8_t *buf) {
    for (uint32_t at = a & ~1u; at < end; at += 2) {
        int r = region_of(c, at);
        if (r < 0 || !c->regions[r].writable) continue;
        region_t *g = &c->regions[r];
        uint32_t off = at - g->base, p = off >> PAGE_SHIFT;
        uint8_t *page = lazy_page(c, &g->shadow, g->npages, p, PAGE_BYTES);
        if (!page) return -1;
        uint32_t from = at < a ? a : at;
        for (uint32_t b = from; b < at + 2 && b < end; b++) page[(b - g->base) & (PAGE_BYTES - 1)] = buf[b - a];
    }
    return 0;
}

int pk_code_translated(pk_code *c, void *uc, uint32_t start, uint32_t len) {
    uint8_t now[MAX_BLOCK_BYTES];
    if (!c->by_translation || !len || len > MAX_BLOCK_BYTES) return len > MAX_BLOCK_BYTES;
    int r = region_of(c, start);
    if (r < 0 || !c->regions[r].writable || !c->regions[r].marked || !c->regions[r].shadow) return 0;
    region_t *g = &c->regions[r];
    uint32_t end = start + len;
    if (end - g->base > g->size || end < start) end = g->base + g->size;
    int read = 0;
    for (uint32_t at = start & ~1u; at < end; at += 2) {
        uint32_t off = at - g->base, p = off >> PAGE_SHIFT, h = (off & (PAGE_BYTES - 1)) >> 1;
        if (!g->pages[p] || !(g->pages[p][h >> 3] & (1u << (h & 7)))) continue;
        if (!read) {
            if (c->mem_read(uc, start & ~1u, now, end - (start & ~1u)) != 0) return 1;
            read = 1;
        }
        if (!g->shadow[p] || memcmp(&g->shadow[p][off & (PAGE_BYTES - 1)], &now[at - (start & ~1u)], 2) != 0)
            return 1;
    }
    return 0;
}

/* ---------------------------------------------------------------- the block table */

/* Slot by the start address's halfword index: blocks of the same code sit side by
 * side in the table, so a hot loop's blocks share cache lines (a multiplicative hash
 * scattered them, and the lookup was mostly a cache miss). */
static uint32_t slot_of(const pk_code *c, uint32_t start) {
    uint32_t mask = c->t.cap - 1, i = (start >> 1) & mask;
    while (c->t.table[i].start != PK_NONE && c->t.table[i].start != start) i = (i + 1) & mask;
    return i;
}

static int grow(pk_code *c) {
    uint32_t old_cap = c->t.cap, cap = old_cap * 2;
    pk_block *old = c->t.table, *t = malloc((size_t)cap * sizeof(pk_block));
    if (!t) return -1;
    memset(t, 0xFF, (size_t)cap * sizeof(pk_block));
    c->t.table = t;
    c->t.cap = cap;
    for (uint32_t i = 0; i < old_cap; i++)
        if (old[i].start != PK_NONE) c->t.table[slot_of(c, old[i].start)] = old[i];
    free(old);
    return 0;
}

int pk_code_add_memory(pk_code *c, uint32_t base, uint32_t size, const void *host) {
    if (c->t.memory.n == PK_AMEM_MAX || !host) return -1;
    pk_amem *m = &c->t.memory.mem[c->t.memory.n++];
    m->base = base;
    m->size = size;
    m->host = host;
    return 0;
}

/* ---------------------------------------------------------------- decoding a block */

/* Representation of a register during the walk of a block: entry values plus const. */
typedef struct {
    int8_t a, b;
    uint8_t ok;
    int32_t off;
} rep_t;

/* Whether an earlier check of the block (from ``first``) implies this one: the same
 * registers, an alignment no smaller, an offset that differs by a multiple of this
 * check's alignment. If the earlier one passes this one does; if it fails, the block
 * stops there first. */
static int implied(const pk_code *c, uint32_t first, const rep_t *r, int32_t off, uint8_t mask) {
    for (uint32_t i = first; i < c->checks_used; i++) {
        const pk_check *k = &c->t.checks[i];
        int same = (k->a == r->a && k->b == r->b) || (k->a == r->b && k->b == r->a);
        if (same && (k->mask & mask) == mask && !((uint32_t)(k->off - off) & mask)) return 1;
    }
    return 0;
}

static int add_check(pk_code *c, const rep_t *r, int32_t off, uint8_t mask, uint32_t pc) {
    if (c->checks_used == c->checks_cap) {
        uint32_t cap = c->checks_cap ? c->checks_cap * 2 : 1024;
        pk_check *n = realloc(c->t.checks, cap * sizeof(pk_check));
        if (!n) return -1;
        c->t.checks = n;
        c->checks_cap = cap;
    }
    pk_check *k = &c->t.checks[c->checks_used++];
    k->a = r->a;
    k->b = r->b;
    k->mask = mask;
    k->partial = 0;
    k->off = r->off + off;
    k->pc = pc;
    return 0;
}

static rep_t rep_add(rep_t x, rep_t y) {
    rep_t r = {-1, -1, 0, 0};
    if (!x.ok || !y.ok) return r;
    if (x.b >= 0 && (y.a >= 0 || y.b >= 0)) return r;
    if (y.b >= 0 && (x.a >= 0 || x.b >= 0)) return r;
    r.ok = 1;
    r.off = x.off + y.off;
    int8_t regs[4] = {x.a, x.b, y.a, y.b};
    int n = 0;
    for (int i = 0; i < 4; i++) {
        if (regs[i] < 0) continue;
        if (n == 0) r.a = regs[i];
        else if (n == 1) r.b = regs[i];
        else {
            r.ok = 0;
            return r;
        }
        n++;
    }
    return r;
}

/* Guest memory [addr, addr + n) from the host memory behind its region (RAM and flash:
 * what uc_mem_read returns, without its memory-map walk), else through Unicorn; 0 on
 * success, as uc_mem_read. */
int pk_code_read(pk_code *c, void *uc, uint32_t addr, void *out, uint32_t n) {
    const uint8_t *src = pk_amap_host(&c->t.memory, addr, n);
    if (!src) return c->mem_read(uc, addr, out, n);
    memcpy(out, src, n);
    return 0;
}

/* The guest bytes of [start, end) into buf (which holds end - start + 2 bytes); the
 * halfword after end is read too when it exists (a 32-bit instruction may straddle). */
static int read_code(pk_code *c, void *uc, uint32_t start, uint32_t end, uint8_t *buf) {
    if (end > start && pk_code_read(c, uc, start, buf, end - start) != 0) return -1;
    if (pk_code_read(c, uc, end, buf + (end - start), 2) != 0) buf[end - start] = buf[end - start + 1] = 0;
    return 0;
}

static uint32_t hw_at(const uint8_t *buf, uint32_t off) { return (uint32_t)buf[off] | (uint32_t)buf[off + 1] << 8; }

static int resolve_literal(pk_code *c, void *uc, pk_insn *in, int track, uint32_t *word) {
    uint8_t w[4];
    uint32_t lit = (uint32_t)in->desc.imm;
    int ok = pk_code_read(c, uc, lit, w, 4) == 0;
    *word = (uint32_t)w[0] | (uint32_t)w[1] << 8 | (uint32_t)w[2] << 16 | (uint32_t)w[3] << 24;
    pk_resolve_literal(&in->desc, ok, *word);
    if (ok && track) mark(c, lit, lit + 4);
    return ok;
}

/* A literal in a writable executable region. */
static int literal_writable(const pk_code *c, uint32_t lit) {
    int r = region_of(c, lit);
    return r >= 0 && c->regions[r].writable;
}

/* A literal the block cannot change under itself: in read-only code memory. */
static int literal_const(const pk_code *c, uint32_t lit) {
    int r = region_of(c, lit);
    return r >= 0 && !c->regions[r].writable;
}

/* A program made of checks of the registers the block received only (its other
 * operations folded away: constants, shifted indexes, implied checks) becomes the
 * cheaper register checks. */
static int as_register_checks(pk_code *c, pk_block *blk) {
    const pk_aop *ops = &c->t.prog.ops[blk->check_first];
    uint32_t n = blk->check_n, first = c->checks_used;
    int a, b, partial;
    int32_t off;
    uint8_t mask;
    for (uint32_t i = 1; i < n; i++)
        if (!pk_aop_entry_check(&ops[i], &a, &b, &off, &mask, &partial)) return 0;
    for (uint32_t i = 1; i < n; i++) {
        rep_t r = {-1, -1, 1, 0};
        pk_aop_entry_check(&ops[i], &a, &b, &off, &mask, &partial);
        r.a = (int8_t)a;
        r.b = (int8_t)b;
        if (add_check(c, &r, off, mask, ops[i].pc) != 0) return -1;
        c->t.checks[c->checks_used - 1].partial = (uint8_t)partial;
    }
    c->t.prog.used = blk->check_first; /* the program was the last one appended */
    blk->program = 0;
    blk->check_first = first;
    blk->check_n = n ? (uint16_t)(n - 1) : 0;
    return 0;
}

/* Walk the block once: totals, alignment checks, the first UNDEFINED instruction.
 * Accesses whose address is a register the block received plus constants get a
 * pk_check; when some access is not of that form (or the block sets SP from a
 * register), the block's checks are an alignment program instead (unaligned.h). */
static int fill(pk_code *c, void *uc, uint32_t start, uint32_t size, int align, pk_block *blk) {
    uint8_t local[1024 + 2], *buf = local;
    uint32_t end = start + size, a = start, cost = 0, insns = 0, last_flags = 0;
    rep_t reg[16];
    int err = PK_OK;
    if (align) {
        if (!c->build && !(c->build = pk_abuild_new())) return PK_NOMEM;
        pk_abuild_start(c->build);
    }
    if (size > sizeof(local) - 2) {
        if (size > MAX_BLOCK_BYTES || !(buf = malloc(size + 2))) return PK_NOMEM;
    }
    if (read_code(c, uc, start, end, buf) != 0) {
        err = PK_UNREADABLE;
        goto out;
    }
    for (int i = 0; i < 16; i++) {
        reg[i].a = (int8_t)i;
        reg[i].b = -1;
        reg[i].ok = 1;
        reg[i].off = 0;
    }
    blk->start = start;
    blk->mode = 0;
    blk->trust_tag = 0;
    blk->check_first = c->checks_used;
    blk->check_n = 0;
    blk->program = 0;
    blk->undef_off = PK_NONE;
    while (a < end) {
        pk_insn in;
        pk_decode(a, hw_at(buf, a - start), hw_at(buf, a - start + 2), &c->rules, &in);
        if (in.undefined) {
            blk->undef_off = a - start;
            break;
        }
        uint32_t lit_word = 0, lit = (uint32_t)in.desc.imm;
        int lit_ok = 0;
        if (in.desc.kind == K_LITERAL && c->by_translation && literal_writable(c, lit))
            pk_resolve_literal(&in.desc, 0, 0); /* a store can change it without a new translation */
        else if (in.desc.kind == K_LITERAL)
            lit_ok = resolve_literal(c, uc, &in, 1, &lit_word);
        if (align && pk_abuild_insn(c->build, a, hw_at(buf, a - start), hw_at(buf, a - start + 2), lit_ok, lit_word,
                                    lit_ok && literal_const(c, lit)) != 0) {
            err = PK_NOMEM;
            goto out;
        }
        cost += in.cost;
        insns += 1;
        last_flags = in.flags;
        const pk_desc *d = &in.desc;
        if (align) {
            rep_t zero = {-1, -1, 1, 0};
            switch (d->kind) {
            case K_CONST: {
                rep_t r = {-1, -1, 1, d->imm};
                reg[d->rd] = r;
                break;
            }
            case K_ADDI: {
                rep_t r = reg[d->rn];
                r.off += d->imm;
                reg[d->rd] = r;
                break;
            }
            case K_ADDR:
                reg[d->rd] = rep_add(reg[d->rn], reg[d->rm]);
                break;
            case K_ACCESS: {
                rep_t base = rep_add(reg[d->rn], d->rm >= 0 ? reg[d->rm] : zero);
                /* SP at block entry plus an aligned constant (ADD Rd, SP then an access
                 * through Rd) is aligned: the core keeps SP bits [1:0] zero, as for an
                 * SP-relative access */
                if (base.ok && ((base.a == 13 && base.b < 0) || (base.b == 13 && base.a < 0)) &&
                    !((uint32_t)(base.off + d->imm) & d->amask))
                    break;
                if (!base.ok || base.a == 15 || base.b == 15) blk->program = 1; /* (a check never names PC) */
                else if (implied(c, blk->check_first, &base, base.off + d->imm, d->amask)) {
                    /* nothing to add */
                } else if (add_check(c, &base, d->imm, d->amask, a) != 0) {
                    err = PK_NOMEM;
                    goto out;
                }
                else blk->check_n++;
                break;
            }
            default:
                break;
            }
            if (d->kind != K_CONST && d->kind != K_ADDI && d->kind != K_ADDR) {
                for (int r = 0; r < 16; r++)
                    if (d->wmask & (1u << r)) reg[r].ok = 0;
            }
        }
        a += in.size;
    }
    if (align && (blk->program || pk_abuild_needed(c->build))) {
        uint32_t first, n;
        c->checks_used = blk->check_first; /* the program checks every access */
        if (pk_abuild_finish(c->build, &c->t.prog, &first, &n) != 0 || n > 0xFFFF) {
            err = PK_NOMEM;
            goto out;
        }
        blk->program = 1;
        blk->check_first = first;
        blk->check_n = (uint16_t)n;
        if (as_register_checks(c, blk) != 0) {
            err = PK_NOMEM;
            goto out;
        }
    }
    blk->size = (uint16_t)size; /* (size <= MAX_BLOCK_BYTES, above) */
    blk->cost = cost;
    blk->insns = insns;
    blk->last_flags = (uint8_t)last_flags;
    if (mark(c, start, end) != 0 || (c->by_translation && keep_bytes(c, start, end, buf) != 0)) err = PK_NOMEM;
out:
    if (buf != local) free(buf);
    return err;
}

/* A writable region holding decoded code (or a literal read) its watch does not cover. */
static int watch_needed(const pk_code *c) {
    if (c->by_translation) return -1; /* no write watch: pk_code_translated */
    for (uint32_t r = 0; r < c->nregions; r++) {
        const region_t *g = &c->regions[r];
        if (g->writable && g->need_lo < g->need_hi && (g->need_lo < g->watch_lo || g->need_hi > g->watch_hi))
            return (int)r;
    }
    return -1;
}

int pk_code_watch_needed(const pk_code *c) { return watch_needed(c); }

const pk_block *pk_code_block(pk_code *c, void *uc, uint32_t start, uint32_t size, int align,
                              pk_block *scratch, int *err, int *watch) {
    *err = PK_OK;
    *watch = -1;
    if (size == 0) {
        memset(scratch, 0, sizeof(*scratch));
        scratch->start = start;
        scratch->undef_off = PK_NONE;
        return scratch;
    }
    uint32_t i = slot_of(c, start);
    pk_block *b = &c->t.table[i];
    if (b->start == start) {
        if (b->size == size) return b;
        /* Same start, other length (a run that stopped mid-block): decode it without
         * replacing the usual entry; its checks stay readable until the next fill. */
        uint32_t used = c->checks_used, prog_used = c->t.prog.used;
        *err = fill(c, uc, start, size, align, scratch);
        c->checks_used = used;
        c->t.prog.used = prog_used;
        if (*err) return NULL;
        *watch = watch_needed(c);
        return scratch;
    }
    pk_block blk;
    *err = fill(c, uc, start, size, align, &blk);
    if (*err) return NULL;
    if (2 * (c->t.used + 1) > c->t.cap) {
        if (grow(c) != 0) {
            *err = PK_NOMEM;
            return NULL;
        }
        i = slot_of(c, start);
    }
    c->t.table[i] = blk;
    c->t.used++;
    *watch = watch_needed(c);
    return &c->t.table[i];
}

/* ---------------------------------------------------------------- partial blocks */

uint32_t pk_code_decode_range(pk_code *c, void *uc, uint32_t start, uint32_t end, pk_insn *out, uint32_t max,
                              int resolve) {
    uint8_t local[1024 + 2], *buf = local;
    uint32_t n = 0, a = start;
    if (end <= start) return 0;
    if (end - start > sizeof(local) - 2) {
        if (end - start > MAX_BLOCK_BYTES || !(buf = malloc(end - start + 2))) return 0;
    }
    if (read_code(c, uc, start, end, buf) == 0) {
        while (a < end && n < max) {
            pk_insn *in = &out[n++];
            pk_decode(a, hw_at(buf, a - start), hw_at(buf, a - start + 2), &c->rules, in);
            uint32_t word;
            if (resolve && in->desc.kind == K_LITERAL) resolve_literal(c, uc, in, 0, &word);
            a += in->size;
        }
    }
    if (buf != local) free(buf);
    return n;
}

const pk_acc *pk_code_accesses(pk_code *c, void *uc, uint32_t start, uint32_t end, uint32_t *n) {
    if (!c->acc) {
        c->acc = calloc(ACC_SLOTS, sizeof(acc_slot));
        if (!c->acc) return NULL;
    }
    acc_slot *e = &c->acc[(start >> 1) & (ACC_SLOTS - 1)];
    if (e->start == start && e->end == end) {
        *n = e->n;
        return c->acc_pool + e->at;
    }
    /* Only blocks the table holds as they are: their code is marked, so a write to it
     * clears these lists with the table (pk_code_clear). */
    const pk_block *b = &c->t.table[slot_of(c, start)];
    if (b->start != start || b->start + b->size != end) return NULL;
    pk_insn insn[512];
    uint32_t count = pk_code_decode_range(c, uc, start, end, insn, 512, 0), k = 0, cost = 0;
    for (uint32_t i = 0; i < count; i++) k += insn[i].desc.kind == K_ACCESS;
    if (k > PK_ACC_MAX) return NULL;
    if (c->acc_used + k > c->acc_cap) {
        if (c->acc_used + k > ACC_POOL_MAX) { /* lists of blocks long gone fill it: from empty */
            memset(c->acc, 0, ACC_SLOTS * sizeof(acc_slot));
            c->acc_used = 0;
        }
        uint32_t cap = c->acc_cap ? c->acc_cap : 256;
        while (cap < c->acc_used + k) cap *= 2;
        if (cap != c->acc_cap) {
            pk_acc *pool = realloc(c->acc_pool, cap * sizeof(pk_acc));
            if (!pool) return NULL;
            c->acc_pool = pool;
            c->acc_cap = cap;
        }
    }
    pk_acc *list = c->acc_pool + c->acc_used;
    k = 0;
    for (uint32_t i = 0; i < count; i++) {
        const pk_desc *d = &insn[i].desc;
        if (d->kind == K_ACCESS) {
            pk_acc *a = &list[k++];
            a->cost = cost;
            a->rn = d->rn;
            a->rm = d->rm;
            a->multiple = d->rm < 0 && d->imm == 0 && d->amask == 3;
            a->imm = d->imm;
        }
        cost += insn[i].cost;
    }
    e->start = start;
    e->end = end;
    e->n = k;
    e->at = c->acc_used;
    c->acc_used += k;
    *n = k;
    return list;
}

uint32_t pk_code_cost_range(pk_code *c, void *uc, uint32_t start, uint32_t stop, uint32_t *insns) {
    uint8_t local[1024 + 2], *buf = local;
    uint32_t cost = 0, n = 0, a = start;
    if (stop > start) {
        if (stop - start > sizeof(local) - 2) {
            if (stop - start > MAX_BLOCK_BYTES || !(buf = malloc(stop - start + 2))) buf = NULL;
        }
        if (buf && read_code(c, uc, start, stop, buf) == 0) {
            while (a < stop) {
                pk_insn in;
                pk_decode(a, hw_at(buf, a - start), hw_at(buf, a - start + 2), &c->rules, &in);
                cost += in.cost;
                n++;
                a += in.size;
            }
        }
        if (buf && buf != local) free(buf);
    }
    *insns = n;
    return cost;
}

/* ---------------------------------------------------------------- write watch, memory */

void pk_code_watch_need(const pk_code *c, uint32_t region, uint32_t *lo, uint32_t *hi) {
    *lo = *hi = 0;
    if (region >= c->nregions) return;
    *lo = c->regions[region].need_lo;
    *hi = c->regions[region].need_hi;
}

void pk_code_watch_set(pk_code *c, uint32_t region, uint32_t lo, uint32_t hi) {
    if (region >= c->nregions) return;
    c->regions[region].watch_lo = lo;
    c->regions[region].watch_hi = hi;
}

void pk_code_watch_span(const pk_code *c, uint32_t region, uint32_t *lo, uint32_t *hi) {
    *lo = *hi = 0;
    if (region >= c->nregions) return;
    *lo = c->regions[region].watch_lo;
    *hi = c->regions[region].watch_hi;
}

uint64_t pk_code_bytes(const pk_code *c) {
    return sizeof(pk_code) + (uint64_t)c->t.cap * sizeof(pk_block) + (uint64_t)c->checks_cap * sizeof(pk_check) +
           (uint64_t)c->t.prog.cap * sizeof(pk_aop) + c->map_bytes;
}

uint32_t pk_code_blocks(const pk_code *c) { return c->t.used; }

/* ---------------------------------------------------------------- pages holding code */

int pk_code_page_holds_code(pk_code *c, uint32_t addr, uint32_t size, int fetch) {
    int r = region_of(c, addr), held = 0;
    if (r < 0) return 0;
    region_t *g = &c->regions[r];
    uint64_t end = (uint64_t)addr + (size ? size : 1), region_end = (uint64_t)g->base + g->size;
    if (end > region_end) end = region_end;
    for (uint64_t a = addr; a < end; a += 1u << TLB_GRAIN_SHIFT) {
        uint32_t bit = (uint32_t)(a - g->base) >> TLB_GRAIN_SHIFT;
        uint8_t m = (uint8_t)(1u << (bit & 7));
        if (fetch) g->fetched[bit >> 3] |= m;
        else if (g->fetched[bit >> 3] & m) held = 1;
    }
    return fetch || held;
}
