/*
 * The engine's own TLB: pkasim fills Unicorn's TLB itself (UC_TLB_VIRTUAL and a
 * UC_HOOK_TLB_FILL hook, installed by emulator/core.py), so that stores to RAM take
 * the engine's fast path.
 *
 * Why: Unicorn 2.1.4 marks every writable TLB entry "not dirty" (its dirty-memory
 * tracking is stubbed to "clean"), so a store goes through the slow store helper
 * until the entry is cleared, and it clears it only for an entry that is not
 * executable (qemu/accel/tcg/cputlb.c notdirty_write). With the CPU's own fill, every
 * page of an M-profile core without an MPU is executable: every STR, PUSH and STM to
 * SRAM took the slow helper, two memory-map lookups and a translated-code check.
 *
 * The fill here maps addresses one to one and gives a page:
 *   - read, write and execute when the access is an instruction fetch, and notes
 *     that the page holds code (codecache.c pk_code_page_holds_code);
 *   - read, write and execute for a data access to a page code was ever fetched
 *     from, so stores there keep the checked path that drops translated code they
 *     overwrite (code in SRAM, self-modifying code);
 *   - read and write for any other data access: stores to plain data go fast.
 * The memory map's own protections still apply on top (flash stays read-only: a
 * store to it reaches the engine's protection check and faults; a fetch from the
 * peripheral region still faults as execute-never), because the engine checks
 * them whenever an entry is not a plain RAM hit.
 *
 * The map is one to one, so physical and virtual addresses agree everywhere.
 */
#include "pkstate.h"

/* Unicorn's uc_mem_type and uc_prot values (unicorn/unicorn.h). */
enum { UC_MEM_FETCH_ = 18 };
enum { PROT_R = 1, PROT_W = 2, PROT_X = 4 };

/* Unicorn's uc_tlb_entry. */
typedef struct {
    uint64_t paddr;
    uint32_t perms;
} pk_tlb_entry;

/* The UC_HOOK_TLB_FILL callback: bool (*)(uc_engine *, uint64_t vaddr, uc_mem_type,
 * uc_tlb_entry *, void *user_data). ``vaddr`` is the page's first address. */
int pk_tlb_fill(void *uc, uint64_t vaddr, int type, pk_tlb_entry *e, pk_state *s) {
    (void)uc;
    uint32_t page = (uint32_t)vaddr;
    e->paddr = vaddr;
    if (s->flash_alias_on && pk_flash_alias_fill(s, page, type, &e->paddr, &e->perms)) return 1;
    if (s->wwin && pk_wwin_fill(s, page, type, &e->paddr, &e->perms)) return 1;
    if (type == UC_MEM_FETCH_) {
        pk_code_page_holds_code(s->code, page, s->tlb_page, 1);
        e->perms = PROT_R | PROT_W | PROT_X;
    } else if (pk_code_page_holds_code(s->code, page, s->tlb_page, 0)) {
        e->perms = PROT_R | PROT_W | PROT_X;
    } else {
        e->perms = PROT_R | PROT_W;
    }
    return 1;
}
