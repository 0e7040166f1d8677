"""Flash data reads' wait states on the stock Unicorn wheel, without a memory hook.

On pkasim's engine the generated code counts them (patch 10, ``Core.count_reads``).
On the stock wheel a read hook over flash would, but any memory hook sends every
load and store of the program to the engine's slow path. So pkasim's TLB sends the
data reads of flash, and nothing else, to an MMIO window whose native callback adds
the wait states and reads flash's own memory (emulator/native/flashalias.c). The
window lies above 4 GiB, where no 32-bit guest address reaches it.

A memory hook over flash (a watchpoint there, the ct-check hash over everything, the
time-travel search's watch hooks) would see the window's address for those reads
instead of the flash address: while one exists (``Core.memory_hook_placed``), the
reads go to flash itself again and the read hook counts them, as before.
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING

from unicorn import UC_HOOK_MEM_READ
from unicorn.unicorn_py3 import unicorn as _ucmod
from unicorn.unicorn_py3.unicorn import UcError

from pkasim.chip.config import Region

if TYPE_CHECKING:
    from pkasim.core.cpu import Core

WINDOW_BASE = 1 << 32  # above every 32-bit guest address


class FlashReads:
    """One machine's count of flash data reads: through the window, or a read hook."""

    def __init__(self, core: Core, flash: Region, host: int) -> None:
        """``host``: the address of the memory behind flash (the bus maps it)."""
        self.core = core
        self.flash = flash
        self._holders: set[object] = set()
        self._hook: ctypes.c_size_t | None = None
        s = core.state
        err = _ucmod.uclib.uc_mmio_map(core.uch, ctypes.c_uint64(WINDOW_BASE), ctypes.c_size_t(flash.size),
                                       ctypes.cast(core.lib.pk_flash_alias_read, ctypes.c_void_p),
                                       ctypes.cast(core.state_ref, ctypes.c_void_p), None, None)
        if err:
            raise UcError(err)
        s.flash_host = host
        s.flash_alias = WINDOW_BASE
        core.mem_hook_listeners.append(self._hooks_changed)
        self._hooks_changed()

    @property
    def by_window(self) -> bool:
        """Data reads go through the window now (no memory hook)."""
        return not self._holders

    def _hooks_changed(self) -> None:
        """The machine's memory hooks changed (``Core.memory_hook_placed``): only one
        over flash makes the reads go to flash itself."""
        self._holders = {key for key, (lo, hi) in self.core.mem_hooks.items()
                         if lo < self.flash.end and self.flash.base <= hi}
        self._apply()

    def _apply(self) -> None:
        core, s = self.core, self.core.state
        window = not self._holders
        if window == bool(s.flash_alias_on) and (window or self._hook is not None):
            return
        if window:
            if self._hook is not None:
                core.remove_native_hook(self._hook)
                self._hook = None
            s.flash_alias_on = 1
            core.flush_tlb()
        else:
            s.flash_alias_on = 0
            self._hook = core.add_native_hook(UC_HOOK_MEM_READ, core.lib.pk_flash_read_hook, self.flash.base,
                                              self.flash.end - 1)
            core.flush_tlb()
            core.uc.ctl_flush_tb()  # blocks translated without a memory hook would read flash uncounted
