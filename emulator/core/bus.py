"""The bus: the memory map, MMIO dispatch to device models, and debug access.

Memory regions come from the chip description; each device's register window is
mapped in 1 KiB pages that dispatch by address to the device's ``read``/``write``.
A device sees an access at the cycle its instruction starts (the core commits cycles
per block; ``_access_offset`` finds the accessing instruction inside the block).
Debug reads and writes (``read_memory``/``write_memory``) never have side effects.
"""

from __future__ import annotations

import ctypes
import logging
import mmap
from collections.abc import Callable

from unicorn import UC_PROT_ALL, UC_PROT_EXEC, UC_PROT_READ, UC_PROT_WRITE, Uc, UcError
from unicorn.unicorn_py3 import unicorn as _ucmod

from pkasim import native
from pkasim.base.errors import LoadError, UsageError
from pkasim.chip.config import ChipConfig, Region
from pkasim.core.cpu import Core, Now
from pkasim.core.cycles import disassemble_one
from pkasim.peripherals.base import Peripheral

guest_log = logging.getLogger("pkasim.guest")
PAGE = 1024


def region_protection(region: Region) -> int:
    """Flash is read/execute (a store is a bus fault); the peripheral region is
    execute-never; other writable memory is read/write/execute."""
    if region.name == "flash":
        return UC_PROT_READ | UC_PROT_EXEC
    if 0x40000000 <= region.base < 0x60000000:
        return UC_PROT_READ | UC_PROT_WRITE
    return UC_PROT_ALL if region.writable else UC_PROT_READ | UC_PROT_EXEC


class Bus:
    """Memory and device windows of one chip, as the core and a debugger see them."""

    def __init__(self, core: Core, config: ChipConfig, peripherals: dict[str, Peripheral], now: Now,
                 on_code_write: Callable[[int, int], None]) -> None:
        self.core = core
        self.config = config
        self.peripherals = peripherals
        self.now = now
        self._on_code_write = on_code_write
        self.irq_exception: dict[str, int] = {}  # device name -> exception its IRQ line pends
        self._keep: list[object] = []  # C callbacks handed to native devices
        self._host: list[tuple[mmap.mmap, ctypes.Array]] = []  # memory behind the regions
        # What a device model raised inside a C-called access (a ctypes callback cannot
        # raise): the engine is stopped there and the run loop raises it after emu_start,
        # as the Unicorn binding does for its own callbacks.
        self.callback_error: BaseException | None = None

    def map(self) -> None:
        """Memory regions in host memory the bus owns (the native alignment checks read
        the words a block loads pointers from there: docs/cycle-model.md, Alignment),
        then the peripheral windows."""
        for region in self.config.memory.values():
            host = mmap.mmap(-1, region.size)
            view = (ctypes.c_ubyte * region.size).from_buffer(host)
            self._host.append((host, view))
            ptr = ctypes.addressof(view)
            err = _ucmod.uclib.uc_mem_map_ptr(self.core.uch, region.base, region.size, region_protection(region), ptr)
            if err:
                raise UcError(err)
            if self.core.code is not None:
                self.core.lib.pk_code_add_memory(self.core.code.handle, region.base, region.size, ptr)
        self._map_peripherals()

    def host_address(self, region: Region) -> int:
        """Where the memory behind ``region`` lies in this process (after ``map``)."""
        for r, (_, view) in zip(self.config.memory.values(), self._host):
            if r.base == region.base:
                return ctypes.addressof(view)
        raise KeyError(region.name)

    def host_bytes(self, addr: int, size: int) -> bytes | None:
        """The bytes [addr, addr + size) when they lie in one memory region, read from the
        host memory behind it (what uc.mem_read returns, without its ctypes buffer: the
        first read of each new size builds a ctypes type, tens of microseconds); None
        elsewhere."""
        for r, (host, _) in zip(self.config.memory.values(), self._host):
            if r.base <= addr and addr + size <= r.end:
                return host[addr - r.base:addr - r.base + size]
        return None

    def ram_page_host(self, page: int, size: int) -> int | None:
        """Where the page [page, page + size) lies in this process when it is wholly in a
        writable memory region (RAM), else None."""
        for r, (_, view) in zip(self.config.memory.values(), self._host):
            if region_protection(r) & UC_PROT_WRITE and r.base <= page and page + size <= r.end:
                return ctypes.addressof(view) + page - r.base
        return None

    def _map_peripherals(self) -> None:
        """Map each peripheral's 1 KiB pages once; dispatch by address inside."""
        windows: dict[int, list[Peripheral]] = {}
        for dev in self.peripherals.values():
            for p in range(dev.base // PAGE, (dev.base + dev.size + PAGE - 1) // PAGE):
                windows.setdefault(p, []).append(dev)
        for region in self.config.memory.values():
            for p in range(region.base // PAGE, region.end // PAGE):
                if p in windows:
                    raise LoadError(f"{self.config.source}: memory.{region.name} overlaps peripheral {windows[p][0].name}")
        for dev in self.peripherals.values():
            pages = range(dev.base // PAGE, (dev.base + dev.size + PAGE - 1) // PAGE)
            if hasattr(dev, "attach_native") and dev.base % PAGE == 0 and all(windows[p] == [dev] for p in pages):
                self._map_native(dev, len(pages) * PAGE)
                for p in pages:
                    del windows[p]
        for p, devs in sorted(windows.items()):
            base = p * PAGE
            if any(hasattr(dev, "shared_window") for dev in devs):
                self._map_shared(base, devs)
            else:
                self.core.uc.mmio_map(base, PAGE, self._mmio_read, (base, devs), self._mmio_write, (base, devs))

    def _slow_path(self, dev: Peripheral) -> int:
        """A C-callable function through which a device's fast path hands an access
        back to its Python model (offsets in the device's window)."""
        core = self.core

        def slow_path(offset: int, size: int, value: int, write: int, time_offset: int) -> int:
            self.now.offset = time_offset
            try:
                if write:
                    dev.write(offset, size, value)
                    return 0
                state = core.state
                state.py_reads += 1
                state.py_read_at = state.cycles  # (idle.c: was it made in the block before a loop?)
                return dev.read(offset, size) & ((1 << (8 * size)) - 1)
            finally:
                self.now.offset = 0

        return self._c_callable(slow_path)

    def _c_callable(self, access: Callable[[int, int, int, int, int], int]) -> int:
        """``access`` as a C-callable DEVICE_ACCESS function (kept alive by the bus) that
        never raises into C: an exception stops the engine and waits in
        ``callback_error`` for the run loop."""
        def call(offset: int, size: int, value: int, write: int, time_offset: int) -> int:
            try:
                return access(offset, size, value, write, time_offset)
            except BaseException as exc:  # noqa: BLE001 (re-raised by the run loop)
                if self.callback_error is None:
                    self.callback_error = exc
                self.core.uc.emu_stop()
                return 0

        callback = native.DEVICE_ACCESS(call)
        self._keep.append(callback)
        return ctypes.cast(callback, ctypes.c_void_p).value

    def _map_native(self, dev: Peripheral, size: int) -> None:
        """A device with a native fast path: its window dispatches in C (the device
        hands back what the fast path does not serve, through its slow path)."""
        core = self.core
        window = dev.attach_native(core.lib, ctypes.addressof(core.state), self.irq_exception.get(dev.name, 0),
                                   self._slow_path(dev))
        native.add_device(core.state, core.lib, window.state, window.next_fn, window.due_fn)
        self._uc_mmio_map(dev.base, size, window.read, window.state, window.write, window.state)

    def _map_shared(self, base: int, devs: list[Peripheral]) -> None:
        """A page several devices share, one of them at least with a native path
        (SysTick in the System Control Space): the page dispatches in C
        (sharedpage.c), to those paths for their windows and to ``_mmio_read`` /
        ``_mmio_write``'s dispatch for the rest of the page."""
        core = self.core
        page = native.PageState(core=ctypes.addressof(core.state), base=base)
        for dev in devs:
            if hasattr(dev, "shared_window") and page.n < native.PAGE_SUBS:
                window = dev.shared_window(core.lib, ctypes.addressof(core.state), self._slow_path(dev))
                sub = page.sub[page.n]
                sub.lo, sub.hi = dev.base - base, min(dev.base + dev.size, base + PAGE) - base
                sub.read = ctypes.cast(window.read, ctypes.c_void_p).value
                sub.write = ctypes.cast(window.write, ctypes.c_void_p).value
                sub.state = window.state
                page.n += 1

        def rest(offset: int, size: int, value: int, write: int, time_offset: int) -> int:
            addr = base + offset
            dev = self._find_dev(devs, addr)
            if write:
                self._serve_write(dev, addr, size, value, time_offset)
                return 0
            return self._serve_read(dev, addr, size, time_offset)

        page.py = self._c_callable(rest)
        self._keep.append(page)
        self._uc_mmio_map(base, PAGE, core.lib.pk_page_read, ctypes.addressof(page), core.lib.pk_page_write,
                          ctypes.addressof(page))

    def _uc_mmio_map(self, base: int, size: int, read: object, read_state: int, write: object,
                     write_state: int) -> None:
        """Map a window whose callbacks are C functions (not Python ones: the binding's
        mmio_map would wrap them)."""
        err = _ucmod.uclib.uc_mmio_map(self.core.uch, ctypes.c_uint64(base), ctypes.c_size_t(size),
                                       ctypes.cast(read, ctypes.c_void_p), ctypes.c_void_p(read_state),
                                       ctypes.cast(write, ctypes.c_void_p), ctypes.c_void_p(write_state))
        if err:
            raise UcError(err)

    def outside_ram(self) -> list[tuple[int, int]]:
        """The address ranges [lo, hi] (inclusive) outside every writable memory
        region: where a guest access can be invalid (unmapped, read-only,
        execute-never)."""
        ram = sorted((r.base, r.end) for r in self.config.memory.values()
                     if region_protection(r) & UC_PROT_WRITE)
        out, at = [], 0
        for base, end in ram:
            if base > at:
                out.append((at, base - 1))
            at = max(at, end)
        if at <= 0xFFFFFFFF:
            out.append((at, 0xFFFFFFFF))
        return out

    # ------------------------------------------------------------------ guest accesses
    @staticmethod
    def _find_dev(devs: list[Peripheral], addr: int) -> Peripheral | None:
        for dev in devs:
            if dev.base <= addr < dev.base + dev.size:
                return dev
        return None

    def _mmio_read(self, uc: Uc, offset: int, size: int, window: tuple[int, list[Peripheral]]) -> int:
        base, devs = window
        addr = base + offset
        dev = self._find_dev(devs, addr)
        return self._serve_read(dev, addr, size, None if dev is None else self._access_offset(addr))

    def _mmio_write(self, uc: Uc, offset: int, size: int, value: int, window: tuple[int, list[Peripheral]]) -> None:
        base, devs = window
        addr = base + offset
        dev = self._find_dev(devs, addr)
        self._serve_write(dev, addr, size, value, None if dev is None else self._access_offset(addr))

    def _serve_read(self, dev: Peripheral | None, addr: int, size: int, time_offset: int | None) -> int:
        """A guest read of ``dev`` (None: no device there) at ``time_offset`` cycles
        into the block."""
        if dev is None:
            guest_log.warning("read of unassigned peripheral address 0x%08x (reads as zero)", addr)
            return 0
        state = self.core.state
        state.py_reads += 1  # a Python device may change by itself: no idle fast-forward
        state.py_read_at = state.cycles  # (idle.c: was it made in the block before a loop?)
        self.now.offset = time_offset
        try:
            return dev.read(addr - dev.base, size) & ((1 << (8 * size)) - 1)
        finally:
            self.now.offset = 0

    def _serve_write(self, dev: Peripheral | None, addr: int, size: int, value: int, time_offset: int | None) -> None:
        if dev is None:
            guest_log.warning("write of unassigned peripheral address 0x%08x (ignored)", addr)
            return
        self.now.offset = time_offset
        try:
            dev.write(addr - dev.base, size, value & ((1 << (8 * size)) - 1))
        finally:
            self.now.offset = 0

    def _access_offset(self, addr: int) -> int:
        """Cycles the current block spent before the instruction making this access
        (pk_access_offset in cyclehook.c; docs/cycle-model.md)."""
        return self.core.lib.pk_access_offset(self.core.state_ref, addr)

    # ------------------------------------------------------------------ debug access
    def device_at(self, addr: int) -> Peripheral | None:
        for dev in self.peripherals.values():
            if dev.base <= addr < dev.base + dev.size:
                return dev
        return None

    def read_memory(self, addr: int, size: int) -> bytes:
        """Bytes as the debugger sees them (no side effects on peripherals)."""
        dev = self.device_at(addr)
        if dev is not None:
            n = min(size, dev.base + dev.size - addr)
            head = dev.debug_read(addr - dev.base, n)
            return head + (self.read_memory(addr + n, size - n) if n < size else b"")
        data = self.host_bytes(addr, size)
        if data is not None:
            return data
        uc = self.core.uc
        try:
            return bytes(uc.mem_read(addr, size))
        except UcError:
            out = bytearray()
            for a in range(addr, addr + size):
                try:
                    out += uc.mem_read(a, 1)
                except UcError:
                    raise UsageError(f"address 0x{a:08x} is not mapped") from None
            return bytes(out)

    def write_memory(self, addr: int, data: bytes) -> None:
        """A debugger write: into memory (flash included), or a device that takes it."""
        dev = self.device_at(addr)
        if dev is not None:
            if not dev.debug_write(addr - dev.base, bytes(data)):
                raise UsageError(f"cannot write {len(data)} bytes at 0x{addr:08x}: {dev.name} registers are not memory")
            return
        try:
            self.core.uc.mem_write(addr, bytes(data))
        except UcError:
            raise UsageError(f"cannot write {len(data)} bytes at 0x{addr:08x}: not mapped") from None
        self._on_code_write(addr, len(data))  # code cached from these bytes is stale now

    def instruction_text(self, addr: int) -> str:
        """The instruction at ``addr`` as text, from as many of its bytes as are mapped."""
        for size in (4, 2):
            try:
                return disassemble_one(self.read_memory(addr, size), addr)
            except UsageError:
                continue
        return "(not readable)"

    def read_u32(self, addr: int) -> int:
        return int.from_bytes(self.read_memory(addr, 4), "little")
