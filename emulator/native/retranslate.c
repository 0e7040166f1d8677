/*
 * Code changes found at translation (the stock Unicorn wheel; codecache.c).
 *
 * A guest store over translated code makes the engine drop that translation, so the
 * block is translated again before it runs again. Unicorn reports a new translation
 * to UC_HOOK_EDGE_GENERATED hooks (accel/tcg/cpu-exec.c tb_find; every one after the
 * first block the engine ever ran, which precedes anything pkasim decodes), before
 * the block's first instruction and so before pkasim's block hook sees it. This hook
 * replaces the write watch, a memory hook that would send every load and store of the
 * program to the engine's slow path.
 */
#include "pkstate.h"

/* Unicorn's uc_tb (unicorn.h). */
typedef struct {
    uint64_t pc;
    uint16_t icount;
    uint16_t size;
} pk_uc_tb;

void pk_translated_hook(void *uc, const pk_uc_tb *cur, const pk_uc_tb *prev, pk_state *s) {
    (void)prev;
    uint32_t at = (uint32_t)cur->pc;
    if (pk_code_translated(s->code, uc, at, cur->size)) pk_code_changed(s, at, cur->size);
}
