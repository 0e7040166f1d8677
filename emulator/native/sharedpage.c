/*
 * A page of device registers that several devices share, dispatched in C.
 *
 * Why: the bus maps device windows in 1 KiB pages. A device alone in its pages can
 * take them whole in C (pka_fast.c); the System Control Space page holds SysTick, the
 * NVIC and the SCB, so every access to it went through Python, and a firmware that
 * times itself with SysTick made its register writes there on every run (rsa2048-pka:
 * five writes, 100-190 us of Python in a 4-5 ms run). Here a device of the page that
 * has a native path (its sub-window: the same read/write signature as a whole page's)
 * is called directly; an access anywhere else in the page goes to bus.py, with its
 * cycle offset in the block (pk_access_offset), as the Python page did.
 */
#include "pkstate.h"

#define PK_PAGE_SUBS 4

/* Mirrored by emulator/core/bus.py PageState. */
typedef struct {
    uint32_t lo, hi; /* [lo, hi): offsets in the page */
    pk_mmio_read_fn read;
    pk_mmio_write_fn write;
    void *state;
} pk_page_sub;

typedef struct {
    pk_state *core;
    uint32_t base, n; /* the page's address; sub-windows in use */
    pk_page_sub sub[PK_PAGE_SUBS];
    pk_py_access_fn py; /* the rest of the page: bus.py */
} pk_page;

uint32_t pk_sizeof_page(void) { return (uint32_t)sizeof(pk_page); }

static const pk_page_sub *sub_of(const pk_page *pg, uint32_t off) {
    for (uint32_t i = 0; i < pg->n; i++)
        if (off >= pg->sub[i].lo && off < pg->sub[i].hi) return &pg->sub[i];
    return NULL;
}

uint64_t pk_page_read(void *uc, uint64_t offset, unsigned size, pk_page *pg) {
    uint32_t off = (uint32_t)offset;
    const pk_page_sub *d = sub_of(pg, off);
    if (d) return d->read(uc, off - d->lo, size, d->state);
    return pg->py(off, size, 0, 0, pk_access_offset(pg->core, pg->base + off));
}

void pk_page_write(void *uc, uint64_t offset, unsigned size, uint64_t value, pk_page *pg) {
    uint32_t off = (uint32_t)offset;
    const pk_page_sub *d = sub_of(pg, off);
    if (d) {
        d->write(uc, off - d->lo, size, value, d->state);
        return;
    }
    pg->py(off, size, (uint32_t)value, 1, pk_access_offset(pg->core, pg->base + off));
}
