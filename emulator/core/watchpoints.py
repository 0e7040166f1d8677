"""Watchpoints: stop a run at the instruction that reads or writes a memory range.

Each watchpoint is a Unicorn memory hook restricted to its range (widened
``REACH`` bytes downwards, see below), so a run pays no Python call for any access
outside it and none per instruction. When an access falls in the range, the hook
asks the engine to stop; Unicorn (2.1, measured) then leaves the block right after
that one memory access, with PC still at the accessing instruction: a load has not
written its register yet, a store has written its bytes. The run loop puts the
state back to exactly "before the instruction" (the one store undone, the block's
cycles settled up to the instruction) and then either stops there (``before``) or
executes that instruction alone and stops after it (``after``, the default): PC at
the next instruction, the cycle count the run would have had there.

An LDM/STM/PUSH/POP makes several accesses, and only the first may be the one the
engine stops after, or registers and memory would be half updated. So the hook
decides at an instruction's first access whether any of its accesses meets a
watched range (the span is computed from the instruction and its registers, which
are untouched at that point); that first access lies at most ``REACH`` bytes below
the range, hence the widening. Later accesses of the same instruction are ignored.

On the stock Unicorn wheel the hooks are, where they can be, protection hooks over a
window the watched pages are sent to (``Watchpoints``, watchwindow.c), so that the rest
of the program keeps the engine's fast path; they see the same accesses.

What is not watched: the core's own stacking and unstacking on exception entry and
return, and device registers (a device access cannot be taken back, so ranges
must lie in memory; the machine refuses others).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass, field

from unicorn import (
    UC_HOOK_MEM_READ,
    UC_HOOK_MEM_READ_PROT,
    UC_HOOK_MEM_WRITE,
    UC_HOOK_MEM_WRITE_PROT,
    UC_MEM_WRITE,
    UC_PROT_NONE,
    Uc,
    UcError,
)
from unicorn import arm_const as A
from unicorn.unicorn_py3 import unicorn as _ucmod
from unicorn.unicorn_py3.unicorn import HOOK_MEM_ACCESS_CFUNC, uccallback

from pkasim.base.errors import UsageError
from pkasim.core.cpu import REG_IDS, Core
from pkasim.native import engine

KINDS = ("write", "read", "access")
REACH = 36  # bytes: the longest multiple access (PUSH {r0-r7, lr}) starts this far below its last byte

# Modes of the hook: stop the engine at a hit, only note it (stepping), or ignore all.
STOP, RECORD, OFF = "stop", "record", "off"


class _WatchHook(ctypes.Structure):
    """cyclehook.c pk_watch_hook_t: the machine's state, the Python hook, the range's start."""

    _fields_ = [("s", ctypes.c_void_p), ("py", ctypes.c_void_p), ("first", ctypes.c_uint32)]


@dataclass(frozen=True)
class Watchpoint:
    """A watched range [address, address + size) and the accesses that trigger it."""

    address: int
    size: int
    kind: str  # write, read or access (either)

    @property
    def end(self) -> int:
        return self.address + self.size

    def triggers(self, write: bool) -> bool:
        return self.kind == "access" or self.kind == ("write" if write else "read")


@dataclass
class WatchHit:
    """One triggering access: the instruction at ``pc`` read or wrote ``address`` (the
    first byte of the watched range it touched). ``old`` is the range before the
    instruction; ``new`` after it (None while stopped before it)."""

    watchpoint: Watchpoint
    pc: int
    address: int
    write: bool
    old: bytes
    new: bytes | None = None
    undo: tuple[int, bytes] | None = field(default=None, repr=False)  # the one store to take back
    charged: int = field(default=0, repr=False)  # flash wait states the stopping access already cost

    @property
    def access(self) -> str:
        return "write" if self.write else "read"

    def describe(self, where: Callable[[int], str]) -> str:
        w = self.watchpoint
        text = (f"{w.kind} watchpoint on 0x{w.address:08x} ({w.size} bytes): {self.access} of "
                f"0x{self.address:08x} by the instruction at {where(self.pc)}")
        if self.new is not None and self.new != self.old:
            text += f"; old 0x{self.old[::-1].hex()}, new 0x{self.new[::-1].hex()}"
        return text


def data_access(hw: int, pc: int, reg: Callable[[int], int]) -> tuple[int, int, bool] | None:
    """The memory a Thumb (ARMv6-M) instruction accesses, from the registers it reads:
    (first address, bytes, write), or None if it makes no data access. ``reg(n)``
    reads register n (13 = SP)."""
    top = hw >> 11
    rt_n = (hw >> 3) & 7
    if top in (0b01100, 0b01101):  # STR/LDR Rt, [Rn, #imm5*4]
        return (reg(rt_n) + ((hw >> 6) & 31) * 4) & 0xFFFFFFFF, 4, top == 0b01100
    if top in (0b01110, 0b01111):  # STRB/LDRB Rt, [Rn, #imm5]
        return (reg(rt_n) + ((hw >> 6) & 31)) & 0xFFFFFFFF, 1, top == 0b01110
    if top in (0b10000, 0b10001):  # STRH/LDRH Rt, [Rn, #imm5*2]
        return (reg(rt_n) + ((hw >> 6) & 31) * 2) & 0xFFFFFFFF, 2, top == 0b10000
    if top in (0b10010, 0b10011):  # STR/LDR Rt, [SP, #imm8*4]
        return (reg(13) + (hw & 0xFF) * 4) & 0xFFFFFFFF, 4, top == 0b10010
    if top == 0b01001:  # LDR Rt, [PC, #imm8*4] (literal)
        return ((pc + 4) & ~3) + (hw & 0xFF) * 4, 4, False
    if hw >> 12 == 0b0101:  # register offset: STR STRH STRB LDRSB LDR LDRH LDRB LDRSH
        op = (hw >> 9) & 7
        addr = (reg(rt_n) + reg((hw >> 6) & 7)) & 0xFFFFFFFF
        return addr, (4, 2, 1, 1, 4, 2, 1, 2)[op], op < 3
    n = None
    if hw & 0xFE00 == 0xB400:  # PUSH
        n = bin(hw & 0x1FF).count("1")
        return (reg(13) - 4 * n) & 0xFFFFFFFF, 4 * n, True
    if hw & 0xFE00 == 0xBC00:  # POP
        return reg(13), 4 * bin(hw & 0x1FF).count("1"), False
    if hw & 0xF000 == 0xC000:  # STM/LDM
        return reg((hw >> 8) & 7), 4 * bin(hw & 0xFF).count("1"), bool(not hw & 0x0800)
    return None


def instruction_size(hw: int) -> int:
    return 4 if hw >> 11 in (0b11101, 0b11110, 0b11111) else 2


def access_span(halfword: int, pc_regs: Callable[[int], int], address: int, size: int) -> tuple[int, int] | None:
    """The bytes [start, end) every access of the instruction touches, if ``address``
    is its first access; None for a later access of an LDM/STM/PUSH/POP.

    ``pc_regs(n)`` reads register n (13 = SP) as it is before the instruction."""
    hw = halfword
    if hw & 0xFE00 == 0xB400:  # PUSH {list[, lr]}: stores from SP - 4n upwards
        n = bin(hw & 0x1FF).count("1")
        start = (pc_regs(13) - 4 * n) & 0xFFFFFFFF
    elif hw & 0xFE00 == 0xBC00:  # POP {list[, pc]}
        n = bin(hw & 0x1FF).count("1")
        start = pc_regs(13)
    elif hw & 0xF000 == 0xC000:  # STM/LDM Rn!, {list}
        n = bin(hw & 0xFF).count("1")
        start = pc_regs((hw >> 8) & 7)
    else:
        return address, address + size
    if address != start:
        return None
    return start, start + 4 * n


WINDOW_BASE = 1 << 33  # the stock wheel's window for watched pages (watchwindow.c), above 4 GiB
WINDOW_CODE = 0xFFFFFFFF  # watch_region of a STOP_WATCH: code was fetched from a watched page


class _Window:
    """The stock wheel's window for watched pages (watchwindow.c): mapped once, with
    its protection hooks; which pages lie behind it is set by ``Watchpoints``."""

    def __init__(self, core: Core) -> None:
        lib = core.lib
        for name, res, args in (("pk_wwin_new", ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32]),
                                ("pk_wwin_capacity", ctypes.c_uint32, []),
                                ("pk_wwin_set_page", None, [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32,
                                                            ctypes.c_void_p]),
                                ("pk_wwin_clear", None, [ctypes.c_void_p]),
                                ("pk_wwin_hot", ctypes.c_int, [ctypes.c_void_p]),
                                ("pk_wwin_free", None, [ctypes.c_void_p]),
                                ("pk_wwin_add", ctypes.c_int, [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32,
                                                               ctypes.c_uint32, ctypes.c_void_p])):
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, args
        self.core = core
        self.pages: set[int] = set()
        self.page = int(core.state.tlb_page)
        self.capacity = int(lib.pk_wwin_capacity())
        self.ptr = lib.pk_wwin_new(ctypes.addressof(core.state), WINDOW_BASE, self.page)
        if not self.ptr:
            raise MemoryError("out of host memory for the watch window")
        core.on_free.append(lambda ptr=self.ptr: lib.pk_wwin_free(ptr))
        size = self.capacity * self.page
        err = _ucmod.uclib.uc_mmio_map(core.uch, ctypes.c_uint64(WINDOW_BASE), ctypes.c_size_t(size),
                                       ctypes.cast(lib.pk_wwin_read, ctypes.c_void_p), ctypes.c_void_p(self.ptr),
                                       ctypes.cast(lib.pk_wwin_write, ctypes.c_void_p), ctypes.c_void_p(self.ptr))
        if not err:
            err = _ucmod.uclib.uc_mem_protect(core.uch, ctypes.c_uint64(WINDOW_BASE), ctypes.c_size_t(size),
                                              ctypes.c_uint32(UC_PROT_NONE))
        if err:
            raise UcError(err)
        core.add_native_hook(UC_HOOK_MEM_READ_PROT | UC_HOOK_MEM_WRITE_PROT, lib.pk_wwin_prot, WINDOW_BASE,
                             WINDOW_BASE + size - 1, ctypes.c_void_p(self.ptr))

    def show(self, pages: dict[int, int], entries: list[tuple[int, int, int, int]]) -> None:
        """Put ``pages`` (page -> its host memory) behind the window, with the
        watchpoints' (lo, hi, kinds, hook) entries; none: the window is off."""
        lib, s = self.core.lib, self.core.state
        self.pages = set(pages)
        lib.pk_wwin_clear(self.ptr)
        for slot, (page, host) in enumerate(sorted(pages.items())):
            lib.pk_wwin_set_page(self.ptr, slot, page, host)
        for lo, hi, kinds, hook in entries:
            lib.pk_wwin_add(self.ptr, lo, hi, kinds, hook)
        s.wwin = self.ptr if pages else None


class Watchpoints:
    """The watchpoints of one core and their hooks; ``on_hit`` stops the engine.

    On the stock wheel, watchpoints over RAM pages that hold no code are found through
    a window of pkasim's TLB instead of memory hooks (watchwindow.c): a memory hook
    there sends every access of the program to the engine's slow path. All of them
    go back to memory hooks when one cannot use the window (its range reaches flash or
    a page code ran from, too many pages) or another memory hook exists (it would see
    the window's addresses)."""

    def __init__(self, core: Core, on_hit: Callable[[], None],
                 page_host: Callable[[int, int], int | None] | None = None) -> None:
        """``page_host(page, size)``: where a RAM page lies in this process, None if
        it is not wholly RAM (the window serves RAM pages only)."""
        self.core = core
        self.on_hit = on_hit
        self._page_host = page_host
        self._window: _Window | None = None
        self._windowed = False  # the watchpoints are behind the window now (else memory hooks)
        self._deciding = False
        self._hot_pages: set[int] = set()  # pages found accessed too often for the window to pay
        self.mode = STOP
        self.hit: WatchHit | None = None
        # Resuming from a stop before an instruction: (its address, the instruction
        # count there); its accesses pass while the count has not moved on.
        self.skip: tuple[int, int] | None = None
        self._hooks: dict[Watchpoint, list[object]] = {}  # its _WatchHook, then its native hooks
        self._py_hook = uccallback(core.uc, HOOK_MEM_ACCESS_CFUNC)(
            lambda uc, access, address, size, value, _key: self._hook(uc, access, address, size, value, None))
        core.mem_hook_listeners.append(self._hooks_changed)

    @property
    def all(self) -> list[Watchpoint]:
        return list(self._hooks)

    @property
    def watches_reads(self) -> bool:
        """Some watchpoint triggers on reads (idle loops must then really execute)."""
        return any(w.kind != "write" for w in self._hooks)

    def add(self, address: int, size: int, kind: str) -> Watchpoint:
        if kind not in KINDS:
            raise UsageError(f"watchpoint kind '{kind}': expected one of {', '.join(KINDS)}")
        if size <= 0 or address < 0 or address + size > 1 << 32:
            raise UsageError(f"watchpoint range 0x{address:x} + {size} is not a range of the 32-bit address space")
        w = Watchpoint(address, size, kind)
        self.skip = None  # watchpoints changed (gdb re-inserts them at every resume): no pass
        if w in self._hooks:
            return w
        # A native hook (cyclehook.c pk_watch_hook) calls _hook, except for an access
        # below the range in a block without LDM/STM/PUSH/POP.
        data = _WatchHook(ctypes.addressof(self.core.state), ctypes.cast(self._py_hook, ctypes.c_void_p), address)
        self._hooks[w] = [data]
        self._reinstall()
        return w

    def remove(self, address: int, size: int, kind: str) -> bool:
        """Remove the watchpoint with exactly that range and kind; False if there is none."""
        self.skip = None
        if Watchpoint(address, size, kind) not in self._hooks:
            return False
        self._uninstall()
        del self._hooks[Watchpoint(address, size, kind)]
        self._install()
        self.core.uc.ctl_flush_tb()  # code translated with its hook would still stop for it
        return True

    @property
    def windowed(self) -> bool:
        """The watchpoints are found through the stock wheel's window (no memory hook)."""
        return self._windowed

    def settle(self) -> None:
        """Between runs: the window found its pages accessed too often to pay (it
        stopped the run at a block start): they go back to memory hooks, for as long
        as they are watched."""
        if self._windowed and self._window.core.lib.pk_wwin_hot(self._window.ptr):
            self._hot_pages |= set(self._window.pages)
            self._reinstall()

    def code_fetched(self) -> None:
        """Code was fetched from a watched page behind the window (a STOP_WATCH with
        WINDOW_CODE): a store there must drop translated code, which only the engine's
        own RAM path does, so the watchpoints go back to memory hooks."""
        self._reinstall()

    def _bounds(self, w: Watchpoint) -> tuple[int, int]:
        """The accesses a watchpoint's hook sees: those starting in [lo, hi]."""
        return max(0, w.address - REACH), w.end - 1

    def _window_pages(self) -> dict[int, int] | None:
        """The pages to put behind the window (page -> host memory), or None when the
        watchpoints must use memory hooks."""
        core = self.core
        if self._page_host is None or engine.patched() or core.code is None:
            return None
        foreign = [k for k in core.mem_hooks if k not in self._hooks]
        if foreign or not self._hooks:
            return None
        page = int(core.state.tlb_page)
        pages: dict[int, int] = {}
        for w in self._hooks:
            lo, hi = self._bounds(w)
            for p in range(lo - lo % page, hi + 1, page):
                host = self._page_host(p, page)
                if host is None or p in self._hot_pages or core.lib.pk_code_page_holds_code(core.code.handle, p,
                                                                                             page, 0):
                    return None
                pages[p] = host
        if self._window is None:
            self._window = _Window(core)
        return pages if len(pages) <= self._window.capacity else None

    def _install(self) -> None:
        """Place every watchpoint: behind the window when all can be, else memory hooks
        (each after the flash read hook, so a flash read is charged before it runs)."""
        if self._deciding:
            return
        self._deciding = True
        try:
            pages = self._window_pages()
            if pages is not None:
                entries = []
                for w, hooks in self._hooks.items():
                    lo, hi = self._bounds(w)
                    kinds = (1 if w.kind != "read" else 0) | (2 if w.kind != "write" else 0)
                    entries.append((lo, hi, kinds, ctypes.addressof(hooks[0])))
                self._window.show(pages, entries)
                self._windowed = True
                self.core.flush_tlb()
                return
            self._windowed = False
            # A memory hook over code keeps the engine from marking the page "not dirty"
            # again when it translates from it (translate-all.c tb_gen_code): fill every
            # page again, so stores there drop the code they overwrite.
            self.core.flush_tlb()
            for w, hooks in self._hooks.items():
                lo, hi = self._bounds(w)
                self.core.memory_hook_placed(w, True, lo, hi)
                for htype in (([UC_HOOK_MEM_WRITE] if w.kind != "read" else []) +
                              ([UC_HOOK_MEM_READ] if w.kind != "write" else [])):
                    hooks.append(self.core.add_native_hook(htype, self.core.lib.pk_watch_hook, lo, hi,
                                                           ctypes.cast(ctypes.byref(hooks[0]), ctypes.c_void_p)))
        finally:
            self._deciding = False

    def _reinstall(self) -> None:
        """Place the watchpoints again, as they are now; code translated before would
        neither stop nor sync PC for a new hook, so it goes."""
        self._uninstall()
        self._install()
        self.core.uc.ctl_flush_tb()

    def _uninstall(self) -> None:
        if self._deciding:
            return
        self._deciding = True
        try:
            if self._windowed:
                self._window.show({}, [])
                self._windowed = False
                self.core.flush_tlb()
            for w, hooks in self._hooks.items():
                for h in hooks[1:]:
                    self.core.remove_native_hook(h)
                del hooks[1:]
                self.core.memory_hook_placed(w, False)
        finally:
            self._deciding = False

    def _hooks_changed(self) -> None:
        """Another memory hook came or went: the window may no longer (or again) serve."""
        if self._deciding or not self._hooks:
            return
        if self._windowed != (self._window_pages() is not None):
            self._reinstall()

    def take(self) -> WatchHit | None:
        hit, self.hit = self.hit, None
        return hit

    def accessing_instruction(self, uc: Uc, address: int, write: bool) -> tuple[int, int]:
        """The instruction making this access, and its first halfword (from a memory
        hook: the watchpoints', and the run loop's for a bad access).

        Unicorn's PC inside a memory hook is exact only where it was last written
        (measured: often the start of the translated block), so the instruction is
        found in the block the native hook recorded (``cur_start``..``cur_end``), from
        that PC on: the first load or store whose address, from the registers as they
        are now, covers ``address``. The accessing instruction has not written its
        registers back yet, so its address is computed right; one before it that
        computed the same address with unchanged registers would have made this
        access first."""
        core = self.core
        s = core.state
        pc = core.pc
        if not s.cur_valid:
            return pc, self._halfword(uc, pc)
        if not s.cur_start <= pc < s.cur_end:
            pc = s.cur_start  # PC left by an earlier exit: the access is still this block's
        try:
            code = bytes(uc.mem_read(pc, s.cur_end - pc + 2))
        except Exception:  # noqa: BLE001 - unreadable code: judge the access at PC alone
            return pc, self._halfword(uc, pc)

        def reg(n: int) -> int:
            return core.rd(A.UC_ARM_REG_SP if n == 13 else REG_IDS[n])

        at = pc
        while at < s.cur_end:
            hw = int.from_bytes(code[at - pc:at - pc + 2], "little")
            acc = data_access(hw, at, reg)
            if acc is not None and acc[2] == write and acc[0] <= address < acc[0] + acc[1]:
                return at, hw
            at += instruction_size(hw)
        return pc, self._halfword(uc, pc)

    @staticmethod
    def _halfword(uc: Uc, addr: int) -> int:
        try:
            return int.from_bytes(uc.mem_read(addr, 2), "little")
        except Exception:  # noqa: BLE001 - code the debugger cannot read: judge the access alone
            return 0

    def _hook(self, uc: Uc, access: int, address: int, size: int, value: int, _: object) -> None:
        if self.mode == OFF or self.hit is not None:
            return
        core = self.core
        write = access == UC_MEM_WRITE
        pc, hw = self.accessing_instruction(uc, address, write)
        if self.skip is not None:
            if self.skip == (pc, core.instructions):
                return
            self.skip = None
        span = access_span(hw, lambda n: core.rd(A.UC_ARM_REG_SP if n == 13 else REG_IDS[n]), address, size)
        if span is None:
            return
        lo, hi = span
        for w in self._hooks:
            if w.triggers(write) and lo < w.end and w.address < hi:
                old = bytes(uc.mem_read(w.address, w.size))  # the hook runs before the access
                undo = (address, bytes(uc.mem_read(address, size))) if write else None
                # A read from flash has been charged its wait states before the hooks run
                # (machine.py: a hook added first, or the engine's generated code): the
                # run loop takes them back with the rest of the instruction.
                st = self.core.state
                charged = st.fetch_ws if not write and st.flash_base <= address < st.flash_end else 0
                self.hit = WatchHit(w, pc, max(lo, w.address), write, old, undo=undo, charged=charged)
                if self.mode == STOP:
                    self.on_hit()
                return
