"""The observation API: what a run did, as an ordered stream of events.

Observers (the profiler, the trace writers, later the debugger) attach to a Machine
with ``Machine.observe(observer)`` and receive, in order and in batches, every
function entry and exit (BL/BLX, BX LR, POP {..., pc}, tail calls), exception entry
and return, WFI sleep span, PKA operation start and finish, SysTick wrap and IRQ
pend/clear, each stamped with the model's cycle and instruction counts. docs/api.md
("Observing a run") is the reference.

How it stays cheap: nothing of this exists until something observes. Then a second
native block hook (observe.c) finds calls and returns from per-halfword tables built
here once per image, and buffers events natively; events from outside blocks come
from whoever models them (the machine's exception code, SysTick, the NVIC, the PKA)
through ``emit``. Python reads the buffer when it fills and when run() returns: no
Python call per instruction or per block.
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from unicorn import UC_HOOK_BLOCK, UcError
from unicorn.unicorn_py3 import unicorn as _ucmod

from pkasim import native
from pkasim.base.kinds import Kind

if TYPE_CHECKING:
    from pkasim.chip.config import ChipConfig
    from pkasim.chip.loader import Image


class Event(NamedTuple):
    """One event. ``cycle`` never decreases along the stream; ``fn`` and ``depth`` are
    the call stack's top function (an index into ``ObservedImage.functions``) and
    depth just after the event."""

    cycle: int
    insns: int
    b: int
    kind: int
    a: int
    fn: int
    depth: int


EVENT = struct.Struct("<QQQIIII")  # pk_obs_event
NO_FUNCTION = "[no symbol]"  # function index 0: code outside every function symbol

CLS_CALL, CLS_RET = 0x01, 0x02


@dataclass(frozen=True)
class ObservedImage:
    """What an observer needs to name things: functions by index, the clock."""

    path: str
    chip: str
    config: str
    clock_hz: int
    functions: tuple[str, ...]  # index 0 is NO_FUNCTION
    addresses: tuple[int, ...]  # start address of each function (0 for index 0)
    irqs: dict[str, int]  # device name -> its NVIC line, for devices wired to one

    def seconds(self, cycles: int) -> float:
        return cycles / self.clock_hz


class Observer:
    """Base class of observers; override what you need.

    ``start`` is called when the observer is attached (and again after a new image
    is loaded), ``events`` with each batch in order, ``stopped`` each time a run()
    or step() returns, ``close`` when it is detached. Events are only delivered
    while the machine runs (run(), step(), call()); every run() ends its batch with
    a ``STOP`` event at the run's final counts. An observer that sets
    ``wants_events = False`` gets no batches (the native side then buffers nothing
    for it) and reads ``observation.call_tree()`` instead: the profiler does.
    ``observation`` is set when it is attached.
    """

    wants_events = True
    observation: Observation | None = None

    def start(self, info: ObservedImage) -> None:
        """The image and chip being observed."""

    def events(self, batch: Sequence[Event]) -> None:
        """The next events, in order."""

    def stopped(self) -> None:
        """A run() or step() returned (every event up to it was delivered)."""

    def close(self) -> None:
        """No more events will come."""


def functions_of(image: Image) -> tuple[tuple[str, ...], tuple[int, ...], list[tuple[int, int]]]:
    """Function names (index 0 = none), start addresses, and each one's address range.

    Aliases (several names at one address) take the name fault reports use; a name
    that two functions share gets the address appended, so names stay unique."""
    funcs = sorted(image._funcs, key=lambda s: s.address)
    by_addr: dict[int, object] = {}
    for sym in funcs:
        by_addr[sym.address] = sym  # the last of equal addresses, as Image.describe picks
    chosen = [by_addr[a] for a in sorted(by_addr)]
    counts: dict[str, int] = {}
    for sym in chosen:
        counts[sym.name] = counts.get(sym.name, 0) + 1
    names, addrs, spans = [NO_FUNCTION], [0], [(0, 0)]
    for i, sym in enumerate(chosen):
        size = sym.size
        if not size:
            nxt = chosen[i + 1].address if i + 1 < len(chosen) else sym.address + 2
            size = max(2, nxt - sym.address)
        names.append(sym.name if counts[sym.name] == 1 else f"{sym.name}@0x{sym.address:08x}")
        addrs.append(sym.address)
        spans.append((sym.address, sym.address + size))
    return tuple(names), tuple(addrs), spans


def classify(code: bytes, base: int, cls: ctypes.Array, table_base: int) -> None:
    """Mark calls and return-capable branches at each instruction's last halfword
    (ARMv6-M encodings, ARM DDI0419 A6.7): BL (32-bit), BLX Rm are calls; BX Rm,
    POP {..., pc}, MOV pc, Rm and ADD pc, Rm may return."""
    n = len(code) // 2
    hws = memoryview(code[: 2 * n]).cast("H")
    off = (base - table_base) >> 1
    i = 0
    while i < n:
        hw = hws[i]
        if hw >> 11 in (0x1D, 0x1E, 0x1F):  # a 32-bit encoding
            if i + 1 < n and hw >> 11 == 0x1E and hws[i + 1] & 0xD000 == 0xD000:
                cls[off + i + 1] = CLS_CALL  # BL
            i += 2
            continue
        if hw & 0xFF87 == 0x4780:
            cls[off + i] = CLS_CALL  # BLX Rm
        elif hw & 0xFF87 == 0x4700 or hw & 0xFF00 == 0xBD00 or hw & 0xFF87 in (0x4687, 0x4487):
            cls[off + i] = CLS_RET  # BX Rm, POP {..., pc}, MOV pc, Rm, ADD pc, Rm
        i += 1


class _Head(ctypes.Structure):
    """The first fields of observe.c's struct pk_obs (Python reads them)."""

    _fields_ = [
        ("events", ctypes.c_void_p),
        ("used", ctypes.c_uint32),
        ("cap", ctypes.c_uint32),
        ("soft", ctypes.c_uint32),
        ("depth", ctypes.c_uint32),
        ("overflow", ctypes.c_uint64),
        ("nodes", ctypes.c_void_p),
        ("nnodes", ctypes.c_uint32),
        ("nodes_cap", ctypes.c_uint32),
        ("record", ctypes.c_uint32),
        ("pad", ctypes.c_uint32),
    ]


class NativeNode(ctypes.Structure):
    """observe.c's pk_obs_node: one call path of the native call tree."""

    _fields_ = [
        ("fn", ctypes.c_int32),
        ("parent", ctypes.c_uint32),
        ("child", ctypes.c_uint32),
        ("sibling", ctypes.c_uint32),
        ("calls", ctypes.c_uint64),
        ("cycles", ctypes.c_uint64),
        ("insns", ctypes.c_uint64),
        ("wait", ctypes.c_uint64),
        ("pka_busy", ctypes.c_uint64),
        ("pka_ops", ctypes.c_uint64),
    ]


SOFT_LIMIT = 1 << 16  # events buffered before the run stops briefly to hand them over


def _lib() -> ctypes.CDLL:
    lib = native.load()
    if not getattr(lib, "_obs_ready", False):
        lib.pk_obs_new.restype = ctypes.c_void_p
        lib.pk_obs_new.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_uint32]
        lib.pk_obs_add_range.restype = ctypes.c_int
        lib.pk_obs_add_range.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_void_p,
                                         ctypes.c_void_p]
        lib.pk_obs_clear_ranges.argtypes = [ctypes.c_void_p]
        lib.pk_obs_drained.argtypes = [ctypes.c_void_p]
        lib.pk_obs_free.argtypes = [ctypes.c_void_p]
        lib.pk_obs_emit.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_uint32,
                                    ctypes.c_uint64]
        lib.pk_obs_emit.restype = None
        lib.pk_obs_sizeof_event.restype = ctypes.c_uint32
        lib.pk_obs_sizeof_node.restype = ctypes.c_uint32
        if lib.pk_obs_sizeof_event() != EVENT.size or lib.pk_obs_sizeof_node() != ctypes.sizeof(NativeNode):
            from pkasim.base.errors import PkasimError

            raise PkasimError("the native observer does not match this pkasim: rebuild with 'pip install -e .'")
        lib._obs_ready = True
    return lib


class Observation:
    """The native observer of one machine and the observers it feeds.

    Built by ``Machine.observe``; it installs the native block hook, builds the
    tables for the loaded image, and hands the buffered events to each observer.
    """

    def __init__(self, uc: object, state: native.PkState, image: Image, config: ChipConfig) -> None:
        self._lib = _lib()
        self._uc = uc
        self._state = state
        self.config = config
        addr = ctypes.addressof(state)
        fields = native.PkState
        ptr = self._lib.pk_obs_new(addr + fields.cycles.offset, addr + fields.insns.offset,
                                   addr + fields.deadline.offset, addr + fields.cur_valid.offset,
                                   addr + fields.cur_start.offset, SOFT_LIMIT)
        if not ptr:
            raise MemoryError("cannot allocate the native observer")
        self.ptr = ctypes.c_void_p(ptr)
        self._head = _Head.from_address(ptr)
        self.observers: list[Observer] = []
        self._tables: list[ctypes.Array] = []
        self.info: ObservedImage | None = None
        self.load(image)
        self._hook = ctypes.c_size_t()
        err = _ucmod.uclib.uc_hook_add(uc._uch, ctypes.byref(self._hook), UC_HOOK_BLOCK,
                                       ctypes.cast(self._lib.pk_obs_block_hook, ctypes.c_void_p), self.ptr,
                                       ctypes.c_uint64(1), ctypes.c_uint64(0))
        if err:
            raise UcError(err)
        if "obs" in dict(native.PkState._fields_):  # native exception/PKA paths emit too
            state.obs = ptr
        uc.ctl_flush_tb()  # blocks translated before the hook existed get it too

    # ------------------------------------------------------------------ image
    def load(self, image: Image) -> None:
        """Tables for a (new) image: a function index and a class per halfword of each
        memory region that holds code."""
        self._lib.pk_obs_clear_ranges(self.ptr)
        names, addrs, spans = functions_of(image)
        self.info = ObservedImage(path=image.path, chip=self.config.chip, config=self.config.source,
                                  clock_hz=self.config.core.clock_hz, functions=names, addresses=addrs,
                                  irqs={p.name: p.irq for p in self.config.peripherals.values()
                                        if isinstance(p.irq, int) and not isinstance(p.irq, bool)})
        regions = []
        for region in self.config.memory.values():
            if any(region.base <= base < region.end for base, _ in image.code):
                regions.append(region)
        self._tables = []
        for region in regions[:4]:
            n = region.size // 2
            cls = (ctypes.c_uint8 * n)()
            fn = (ctypes.c_uint16 * n)()
            for i, (lo, hi) in enumerate(spans):
                if i and region.base <= lo < region.end:
                    first = (lo - region.base) >> 1
                    last = min(n, (min(hi, region.end) - region.base + 1) >> 1)
                    fn[first:last] = [i & 0xFFFF] * (last - first)
            for base, data in image.code:
                if region.base <= base < region.end:
                    classify(data, base, cls, region.base)
            self._tables += [cls, fn]
            self._lib.pk_obs_add_range(self.ptr, region.base, n, ctypes.addressof(cls), ctypes.addressof(fn))
        for obs in self.observers:
            obs.start(self.info)

    # ------------------------------------------------------------------ observers
    def add(self, observer: Observer) -> None:
        self.drain()
        self.observers.append(observer)
        self._head.record = int(any(o.wants_events for o in self.observers))
        observer.observation = self
        observer.start(self.info)

    def remove(self, observer: Observer) -> None:
        self.drain()
        self.observers.remove(observer)
        self._head.record = int(any(o.wants_events for o in self.observers))
        observer.close()

    def call_tree(self) -> list[tuple[int, int, int, int, int, int, int, int]]:
        """The native calling-context tree: per node (fn, parent, calls, cycles,
        insns, wait, pka_busy, pka_ops); node 0 is the root, parents come first.
        ``fn`` is a function index, or minus an exception number."""
        n = self._head.nnodes
        nodes = (NativeNode * n).from_address(self._head.nodes)
        return [(x.fn, x.parent, x.calls, x.cycles, x.insns, x.wait, x.pka_busy, x.pka_ops) for x in nodes]

    # ------------------------------------------------------------------ events
    def emit(self, kind: int, cycle: int, a: int = 0, b: int = 0) -> None:
        """Record an event from outside the blocks (exceptions, sleep, devices)."""
        self._lib.pk_obs_emit(self.ptr, kind, cycle, a & 0xFFFFFFFF, b)

    def full(self) -> bool:
        return self._head.used >= self._head.soft

    def drain(self) -> None:
        """Hand every buffered event to the observers, in order."""
        used = self._head.used
        if not used:
            return
        data = ctypes.string_at(self._head.events, used * EVENT.size)
        self._lib.pk_obs_drained(self.ptr)
        batch = [Event._make(t) for t in EVENT.iter_unpack(data)]
        for obs in self.observers:
            if obs.wants_events:
                obs.events(batch)

    def stop(self, cycles: int) -> None:
        """run() returned: mark the point and deliver everything."""
        self.emit(Kind.STOP, cycles)
        self.drain()
        for obs in self.observers:
            obs.stopped()

    @property
    def overflow(self) -> int:
        """Calls nested deeper than the native stack tracks (not reported as frames)."""
        return int(self._head.overflow)

    def close(self) -> None:
        """Remove the hook and free the native state (no observer left)."""
        self.drain()
        for obs in list(self.observers):
            self.observers.remove(obs)
            obs.close()
        if self._hook.value:
            _ucmod.uclib.uc_hook_del(self._uc._uch, self._hook)
            self._hook = ctypes.c_size_t()
        if "obs" in dict(native.PkState._fields_):
            self._state.obs = None
        self._lib.pk_obs_free(self.ptr)
        self.ptr = ctypes.c_void_p()
