/*
 * Flash data reads cost the wait states, on the stock Unicorn wheel, without a memory
 * hook.
 *
 * A UC_HOOK_MEM_READ over flash would count them, but on Unicorn 2.1.4 any memory
 * hook, whatever its range, sends every load and store of the program to the
 * engine's slow path. Instead pkasim's TLB (tlb.c) gives a flash page a different
 * entry per kind of access:
 *   - an instruction fetch: the page itself, execute only (it is marked as holding
 *     code, as tlb.c does);
 *   - a data read: the same offset in an MMIO window (uc_mmio_map at flash_alias,
 *     above 4 GiB, where no guest address reaches) whose read callback adds the wait states and reads the
 *     flash's own memory; read only;
 *   - a store: the page itself, write only, so it reaches the memory map's
 *     protection check and faults as before.
 * An entry holds one kind, so the next access of another kind fills it again (a
 * translation lookup misses there, not an executing block). Every data read of flash
 * goes through the window, and only those: the reads the hook saw (an unaligned one
 * faults first, before the block, and reaches neither). Everything else keeps the
 * fast path. Memory hooks see the window's address for those reads, so the machine
 * goes back to the hook while any memory hook over flash exists
 * (emulator/core/flashreads.py).
 */
#include <string.h>

#include "pkstate.h"

enum { MEM_READ_ = 16, MEM_FETCH_ = 18 };
enum { PROT_R = 1, PROT_W = 2, PROT_X = 4 };

int pk_flash_alias_fill(pk_state *s, uint32_t page, int type, uint64_t *paddr, uint32_t *perms) {
    if (page - s->flash_base >= s->flash_end - s->flash_base) return 0;
    if (type == MEM_FETCH_) {
        pk_code_page_holds_code(s->code, page, s->tlb_page, 1);
        *perms = PROT_X;
    } else if (type == MEM_READ_) {
        *paddr = s->flash_alias + (page - s->flash_base);
        *perms = PROT_R;
    } else {
        *perms = PROT_W;
    }
    return 1;
}

/* The window's read callback (uc_cb_mmio_read_t): one guest data read of flash. */
uint64_t pk_flash_alias_read(void *uc, uint64_t offset, unsigned size, pk_state *s) {
    (void)uc;
    uint32_t v = 0;
    s->cycles += s->fetch_ws;
    if (offset + size <= (uint64_t)(s->flash_end - s->flash_base) && size <= 4) memcpy(&v, s->flash_host + offset, size);
    return v; /* little-endian host (x86-64, aarch64): the guest's byte order */
}
