"""The native code cache (codecache.c) seen from Python: which memory holds code, and
what happens when code is written.

The cycle hook decodes each block natively the first time it executes, wherever it is,
and caches its totals. Cached code must be forgotten when its bytes change, or the next
cycle count would be stale:

* writes through the debugger API (``Machine.write_memory``, ``--load``, semihosting
  reads into guest buffers) call :meth:`CodeCache.written`;
* writes by the guest, on pkasim's engine, go through a native write hook, installed
  over a writable region only once code has executed there, and only over the span
  holding that code (so firmware that never runs code from SRAM pays nothing, and
  stores to the stack and data beside a RAM function do not call the hook). The hook
  stops the run when code first executes outside the watched span;
  :meth:`CodeCache.watch` grows it;
* on the stock Unicorn wheel, where any memory hook sends every load and store of the
  program to the engine's slow path, there is no write watch: the engine drops the
  translations a guest store overwrites, and a native hook on its new translations
  (UC_HOOK_EDGE_GENERATED, retranslate.c) compares the bytes decoded from there with
  the bytes now (docs/engine.md).

Flash is read-only to the core (a store is a bus fault), so only debugger writes
change it.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import TYPE_CHECKING

from unicorn import UC_HOOK_EDGE_GENERATED, UC_HOOK_MEM_WRITE, UC_PROT_EXEC, UC_PROT_WRITE
from unicorn.unicorn_py3 import unicorn as _ucmod

from pkasim.base.errors import PkasimError
from pkasim.chip.config import ChipConfig, Region

if TYPE_CHECKING:
    from pkasim.core.cpu import Core

WATCH_ALIGN = 256  # the write watch grows in steps of this many bytes


class CodeCache:
    """One machine's code cache: its executable regions and their write watches."""

    def __init__(self, config: ChipConfig, core: Core, prot: Callable[[Region], int], *,
                 by_translation: bool = False) -> None:
        """``prot`` gives each region's Unicorn protection: the core fetches from
        UC_PROT_EXEC regions and stores to UC_PROT_WRITE ones. ``by_translation``:
        find guest writes to code from the engine's new translations, not a write
        watch (the stock wheel)."""
        self._core = core
        self._lib = core.lib
        flash = config.flash
        mem_read = ctypes.cast(_ucmod.uclib.uc_mem_read, ctypes.c_void_p).value
        code = self._lib.pk_code_new(config.core.muls_cycles, flash.wait_states, flash.base, flash.end, mem_read)
        if not code:
            raise PkasimError("out of memory: cannot allocate the code cache")
        core.state.code = code
        self.regions: list[Region] = []
        for region in config.memory.values():
            if prot(region) & UC_PROT_EXEC:
                writable = int(bool(prot(region) & UC_PROT_WRITE))
                if self._lib.pk_code_add_region(code, region.base, region.size, writable) != 0:
                    raise PkasimError(f"{config.source}: too many executable memory regions for the code cache")
                self.regions.append(region)
        self._watch_hooks: dict[int, ctypes.c_size_t] = {}
        self._flushed = False
        self.by_translation = by_translation and any(prot(r) & UC_PROT_WRITE for r in self.regions)
        if self.by_translation:
            self._lib.pk_code_track_translation(code)
            core.add_native_hook(UC_HOOK_EDGE_GENERATED, self._lib.pk_translated_hook, 1, 0)

    @property
    def handle(self) -> int:
        return int(self._core.state.code)

    def clear(self) -> None:
        """Forget every cached block (a new image was programmed)."""
        self._lib.pk_code_clear(self.handle)

    def written(self, addr: int, size: int, *, engine: bool = True) -> bool:
        """Bytes at ``addr`` changed outside the guest's own stores (the debugger,
        semihosting, exception stacking): drop stale code, ours and, with ``engine``,
        Unicorn's (which notices writes to RAM by itself, but not to read-only flash)."""
        if size <= 0 or addr >= 1 << 32:
            return False
        size = min(size, (1 << 32) - addr)
        if engine and any(r.base < addr + size and addr < r.end for r in self.regions) and self._fetched(addr, size):
            self._core.uc.ctl_remove_cache(addr, addr + size)
        return bool(self._lib.pk_code_changed(self._core.state_ref, addr, size))

    def _fetched(self, addr: int, size: int) -> bool:
        """The engine has fetched code from some page of [addr, addr + size) (tlb.c):
        only there can it hold translated code. Asking it to drop translations
        elsewhere would itself look up those pages for execution, which marks them
        as holding code and keeps stores there on the engine's slow path."""
        page = 1024
        first, last = addr - addr % page, addr + size - 1
        return any(self._lib.pk_code_page_holds_code(self.handle, p, page, 0)
                   for p in range(first, last + 1, page))

    def watch(self, index: int) -> None:
        """Grow region ``index``'s write watch over all code decoded from it so far."""
        lo, hi = ctypes.c_uint32(), ctypes.c_uint32()
        self._lib.pk_code_watch_need(self.handle, index, ctypes.byref(lo), ctypes.byref(hi))
        region = self.regions[index]
        lo_v = max(region.base, lo.value - lo.value % WATCH_ALIGN)
        hi_v = min(region.end, hi.value + (-hi.value) % WATCH_ALIGN)
        old = self._watch_hooks.pop(index, None)
        if old is not None:
            _ucmod.uclib.uc_hook_del(self._core.uch, old)
        self._watch_hooks[index] = self._core.add_native_hook(UC_HOOK_MEM_WRITE, self._lib.pk_code_write_hook,
                                                              lo_v, hi_v - 1)
        self._lib.pk_code_watch_set(self.handle, index, lo_v, hi_v)
        # Stores may have cleared a TLB entry of this span for the engine's fast path
        # before code ran here (tlb.c): fill every page again.
        self._core.flush_tlb()
        if not self._flushed:
            # Blocks translated before any write hook existed store without calling
            # hooks (Unicorn decides at translation): translate them again.
            self._core.uc.ctl_flush_tb()
            self._flushed = True

    def watched(self) -> dict[str, tuple[int, int]]:
        """The spans whose guest writes are watched now, by region name (none when
        changes are found by translation)."""
        out = {}
        for index in self._watch_hooks:
            lo, hi = ctypes.c_uint32(), ctypes.c_uint32()
            self._lib.pk_code_watch_span(self.handle, index, ctypes.byref(lo), ctypes.byref(hi))
            out[self.regions[index].name] = (lo.value, hi.value)
        return out

    def memory_bytes(self) -> int:
        """Bytes the native cache holds now (block table, alignment checks, bitmaps)."""
        return int(self._lib.pk_code_bytes(self.handle))

    def blocks(self) -> int:
        return int(self._lib.pk_code_blocks(self.handle))

