/*
 * Watchpoints on the stock Unicorn wheel without a memory hook (emulator/core/watchpoints.py).
 *
 * A watchpoint's UC_HOOK_MEM_READ/WRITE would, on Unicorn 2.1.4, send every load and
 * store of the program to the engine's slow path. Instead pkasim's TLB (tlb.c) sends
 * the data accesses of the watched pages, and nothing else, to the same offsets in an
 * MMIO window above 4 GiB (no 32-bit guest address reaches it) whose callbacks read and
 * write the pages' own memory. The window's protection is "none", so before each
 * access the engine calls the UC_HOOK_MEM_READ_PROT / _WRITE_PROT hooks over it, which
 * are not memory hooks in that sense (they never slow other pages) and, unlike an MMIO
 * callback, run with PC restored to the accessing instruction, as a memory hook does
 * (qemu/accel/tcg/cputlb.c load_helper, store_helper). pk_wwin_prot calls each
 * watchpoint's native hook (cyclehook.c pk_watch_hook) for the accesses its memory
 * hook would have seen, with the guest address, and lets the access go on.
 *
 * An instruction fetch from a watched page gets the page itself, execute only. A store
 * through the window does not drop code translated from the page, so the first fetch
 * from a watched page stops the run (STOP_WATCH, watch_region PK_WWIN_CODE): the
 * machine puts its watchpoints back on memory hooks there.
 */
#include <stdlib.h>
#include <string.h>

#include "pkstate.h"

#define WWIN_PAGES 16
#define WWIN_ENTRIES 32
#define PK_WWIN_CODE 0xFFFFFFFFu
#define HOT_SAMPLE 1024u /* accesses between two looks at the rate */
#define HOT_CYCLES 64u   /* fewer cycles than this per access: the pages are hot */

enum { MEM_READ_ = 16, MEM_WRITE_ = 17, MEM_FETCH_ = 18, MEM_WRITE_PROT_ = 22, MEM_READ_PROT_ = 23 };
enum { PROT_R = 1, PROT_W = 2, PROT_X = 4 };

typedef void (*pk_hookmem_fn)(void *uc, int type, uint64_t address, int size, int64_t value, void *user);
void pk_watch_hook(void *uc, int type, uint64_t address, int size, int64_t value, void *w);

typedef struct {
    uint32_t lo, hi;  /* the accesses starting in [lo, hi] (a memory hook's bounds) */
    uint32_t kinds;   /* 1: writes, 2: reads */
    void *hook;       /* its pk_watch_hook_t */
} wentry;

typedef struct {
    pk_state *s;
    uint64_t base;              /* the window's base */
    uint32_t page;              /* bytes per page */
    uint32_t npages;
    uint32_t vpage[WWIN_PAGES]; /* the watched pages, by window slot */
    uint8_t *host[WWIN_PAGES];  /* their memory */
    uint32_t nentries;
    wentry entry[WWIN_ENTRIES];
    uint64_t accesses, mark;    /* accesses through the window; the cycle count at the last look */
    uint32_t hot;               /* the pages are accessed too often for the window to pay */
} pk_wwin;

pk_wwin *pk_wwin_new(pk_state *s, uint64_t base, uint32_t page) {
    pk_wwin *w = calloc(1, sizeof(pk_wwin));
    if (!w) return NULL;
    w->s = s;
    w->base = base;
    w->page = page;
    return w;
}

void pk_wwin_free(pk_wwin *w) { free(w); }

uint32_t pk_wwin_capacity(void) { return WWIN_PAGES; }

/* Put the page at ``vpage`` (its memory at ``host``) behind window slot ``slot``. */
void pk_wwin_set_page(pk_wwin *w, uint32_t slot, uint32_t vpage, uint8_t *host) {
    if (slot >= WWIN_PAGES) return;
    w->vpage[slot] = vpage;
    w->host[slot] = host;
    if (slot >= w->npages) w->npages = slot + 1;
}

void pk_wwin_clear(pk_wwin *w) {
    w->npages = 0;
    w->nentries = 0;
    w->accesses = 0;
    w->hot = 0;
    w->mark = w->s->cycles;
}

int pk_wwin_hot(const pk_wwin *w) { return (int)w->hot; }

/* A watchpoint's hook: accesses starting in [lo, hi], of kinds (1 write, 2 read). */
int pk_wwin_add(pk_wwin *w, uint32_t lo, uint32_t hi, uint32_t kinds, void *hook) {
    if (w->nentries == WWIN_ENTRIES) return -1;
    wentry *e = &w->entry[w->nentries++];
    e->lo = lo;
    e->hi = hi;
    e->kinds = kinds;
    e->hook = hook;
    return 0;
}

static int slot_of(const pk_wwin *w, uint32_t page) {
    for (uint32_t i = 0; i < w->npages; i++)
        if (w->vpage[i] == page && w->host[i]) return (int)i;
    return -1;
}

int pk_wwin_fill(pk_state *s, uint32_t page, int type, uint64_t *paddr, uint32_t *perms) {
    pk_wwin *w = s->wwin;
    int slot = slot_of(w, page);
    if (slot < 0) return 0;
    if (type == MEM_FETCH_) {
        pk_code_page_holds_code(s->code, page, s->tlb_page, 1);
        *perms = PROT_X;
        s->stop_reason = STOP_WATCH;
        s->watch_region = PK_WWIN_CODE;
        s->emu_stop(s->uc);
        return 1;
    }
    *paddr = w->base + (uint64_t)slot * w->page;
    *perms = PROT_R | PROT_W;
    return 1;
}

/* The window's memory (uc_cb_mmio_read_t, uc_cb_mmio_write_t). */
uint64_t pk_wwin_read(void *uc, uint64_t offset, unsigned size, pk_wwin *w) {
    (void)uc;
    uint32_t slot = (uint32_t)(offset / w->page), off = (uint32_t)(offset % w->page), v = 0;
    if (slot < w->npages && w->host[slot] && size <= 4 && off + size <= w->page) memcpy(&v, w->host[slot] + off, size);
    return v; /* little-endian host: the guest's byte order */
}

void pk_wwin_write(void *uc, uint64_t offset, unsigned size, uint64_t value, pk_wwin *w) {
    (void)uc;
    uint32_t slot = (uint32_t)(offset / w->page), off = (uint32_t)(offset % w->page), v = (uint32_t)value;
    if (slot < w->npages && w->host[slot] && size <= 4 && off + size <= w->page) memcpy(w->host[slot] + off, &v, size);
}

/* UC_HOOK_MEM_READ_PROT | UC_HOOK_MEM_WRITE_PROT over the window: the watchpoints'
 * hooks, in the order they were added, for the accesses their memory hooks would see
 * (those starting inside their bounds); then the access goes on. */
int pk_wwin_prot(void *uc, int type, uint64_t address, int size, int64_t value, pk_wwin *w) {
    uint64_t rel = address - w->base;
    uint32_t slot = (uint32_t)(rel / w->page);
    if (address < w->base || slot >= w->npages) return 0;
    uint32_t guest = w->vpage[slot] + (uint32_t)(rel % w->page);
    if (++w->accesses % HOT_SAMPLE == 0) {
        /* Each access here is a protection hook with PC restored, an MMIO call and
         * more: far dearer than an access on the slow path every access takes under
         * a memory hook. Pages accessed more than once per HOT_CYCLES cycles go back
         * to memory hooks: the next block start stops the run (a deadline), and the
         * machine moves them (Watchpoints.settle). */
        pk_state *s = w->s;
        if (!w->hot && s->cycles - w->mark < (uint64_t)HOT_SAMPLE * HOT_CYCLES) {
            w->hot = 1;
            s->deadline = 0;
        }
        w->mark = s->cycles;
    }
    uint32_t kind = type == MEM_WRITE_PROT_ ? 1 : 2;
    for (uint32_t i = 0; i < w->nentries; i++) {
        const wentry *e = &w->entry[i];
        if ((e->kinds & kind) && e->lo <= guest && guest <= e->hi)
            pk_watch_hook(uc, kind == 1 ? MEM_WRITE_ : MEM_READ_, guest, size, value, e->hook);
    }
    return 1;
}
