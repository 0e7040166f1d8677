"""ct-check's hash of one run: control flow, memory access addresses, PKA operations.

``CtHash(machine)`` attaches emulator/native/cthash.c to a loaded Machine: a native block
hook, a native memory hook and the observer's event stream (observe.c hands every
event on to it). During the run nothing calls Python; afterwards ``result()`` gives
the three running hashes, their event counts and the checkpoints (the combined hash
every 2^CK_SHIFT events). Given a ``reference`` digest, it notes the first checkpoint
that differs from the reference's (``diverged``). Built with ``record=(first, end)``, it also records the
events numbered first..end-1 in detail (kind, address, size, PC, cycle), which is how
``pkasim ct-check`` finds the first event two runs disagree on (docs/ct-check.md).
"""

from __future__ import annotations

import ctypes
import struct
from dataclasses import dataclass
from enum import IntEnum

from unicorn import UC_HOOK_BLOCK, UC_HOOK_MEM_READ, UC_HOOK_MEM_WRITE
from unicorn import arm_const as A

from pkasim import native
from pkasim.base.errors import PkasimError
from pkasim.core.machine import Machine
from pkasim.core.observe import Observer

CK_SHIFT = 14  # a checkpoint every 16,384 events: the window a detail run records
CK_WORDS = 5  # cthash.c's CK_WORDS
STREAMS = ("flow", "mem", "pka")


class Rec(IntEnum):
    """What a recorded event is (cthash.c's REC_*)."""

    BLOCK = 1
    READ = 2
    WRITE = 3
    PKA = 4
    SPIN = 5
    SLEEP = 6
    EXC = 7
    EXC_RETURN = 8


REC = struct.Struct("<QQIIII")  # pk_ct_rec


@dataclass(frozen=True)
class Event:
    """One recorded event: ``addr`` and ``arg`` mean what cthash.c's pk_ct_rec says."""

    index: int
    cycle: int
    kind: Rec
    addr: int
    arg: int
    pc: int

    def same(self, other: Event) -> bool:
        """Equal in everything the hash covers (not the cycle stamp, nor the PC)."""
        return (self.kind, self.addr, self.arg) == (other.kind, other.addr, other.arg)


@dataclass(frozen=True)
class Digest:
    """What one run hashed to."""

    hashes: tuple[int, int, int, int]  # flow, mem, pka, all
    counts: tuple[int, int, int, int]
    checkpoints: tuple[tuple[int, ...], ...]  # (hash of all, cycle, flow, mem, pka) every 2^CK_SHIFT events
    complete: bool = True  # False: the run was stopped at its first checkpoint unlike the reference's

    def stream_key(self, i: int) -> tuple[int, int]:
        return self.hashes[i], self.counts[i]


class _Head(ctypes.Structure):
    """The first fields of cthash.c's pk_ct."""

    _fields_ = [
        ("hash", ctypes.c_uint64 * 4),
        ("count", ctypes.c_uint64 * 4),
        ("ck", ctypes.c_void_p),
        ("ck_n", ctypes.c_uint32),
        ("ck_cap", ctypes.c_uint32),
        ("ck_shift", ctypes.c_uint32),
        ("nomem", ctypes.c_uint32),
        ("rec_from", ctypes.c_uint64),
        ("rec_to", ctypes.c_uint64),
        ("rec", ctypes.c_void_p),
        ("rec_n", ctypes.c_uint32),
        ("rec_cap", ctypes.c_uint32),
        ("pc_regid", ctypes.c_int32),
        ("pad", ctypes.c_int32),
        ("ref", ctypes.c_void_p),
        ("ref_n", ctypes.c_uint32),
        ("diverged", ctypes.c_uint32),
    ]


def _lib() -> ctypes.CDLL:
    lib = native.load()
    if not getattr(lib, "_ct_ready", False):
        lib.pk_ct_new.restype = ctypes.c_void_p
        lib.pk_ct_new.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_uint64,
                                  ctypes.c_int32]
        lib.pk_ct_free.argtypes = [ctypes.c_void_p]
        lib.pk_ct_free.restype = None
        lib.pk_obs_set_ext.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        lib.pk_obs_set_ext.restype = None
        lib.pk_ct_sizeof_rec.restype = ctypes.c_uint32
        lib.pk_ct_set_reference.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32]
        lib.pk_ct_set_reference.restype = None
        if lib.pk_ct_sizeof_rec() != REC.size:
            raise PkasimError("the native ct-check hash does not match this pkasim: rebuild with 'pip install -e .'")
        lib._ct_ready = True
    return lib


class _Events(Observer):
    """Keeps the native observer in place (its events reach cthash.c); wants no batches."""

    wants_events = False


class CtHash:
    """The hash of one run of ``machine`` (loaded, not yet run); see the module doc."""

    def __init__(self, machine: Machine, record: tuple[int, int] | None = None, ck_shift: int = CK_SHIFT,
                 reference: Digest | None = None) -> None:
        self._lib = lib = _lib()
        self.machine = machine
        core = machine.core
        first, end = record if record is not None else (0, 0)
        ptr = lib.pk_ct_new(ctypes.addressof(core.state), ck_shift, first, end, A.UC_ARM_REG_PC)
        if not ptr:
            raise MemoryError("cannot allocate the ct-check hash")
        self.ptr = ctypes.c_void_p(ptr)
        self._head = _Head.from_address(ptr)
        self._ref = None
        if reference is not None:
            flat = [w for ck in reference.checkpoints for w in ck]
            self._ref = (ctypes.c_uint64 * max(1, len(flat)))(*flat)
            lib.pk_ct_set_reference(self.ptr, ctypes.addressof(self._ref), len(reference.checkpoints))
        self._observer = _Events()
        machine.observe(self._observer)
        lib.pk_obs_set_ext(core.obs.ptr, ctypes.cast(lib.pk_ct_event, ctypes.c_void_p), self.ptr)
        core.memory_hook_placed(self, True)  # every address: flash reads must show their own
        self._hooks = [
            core.add_native_hook(UC_HOOK_BLOCK, lib.pk_ct_block_hook, 1, 0, self.ptr),
            core.add_native_hook(UC_HOOK_MEM_READ | UC_HOOK_MEM_WRITE, lib.pk_ct_mem_hook, 1, 0, self.ptr),
        ]
        core.flush_translations()  # blocks translated before the hooks existed get them too

    @property
    def diverged(self) -> bool:
        """A checkpoint differed from the reference's."""
        return bool(self._head.diverged)

    @property
    def recorded(self) -> bool:
        """The whole window asked for has gone by."""
        h = self._head
        return h.rec_to > 0 and h.count[3] >= h.rec_to

    def result(self, complete: bool = True) -> Digest:
        h = self._head
        if h.nomem:
            raise MemoryError("out of host memory in the ct-check hash")
        raw = (ctypes.c_uint64 * (CK_WORDS * h.ck_n)).from_address(h.ck) if h.ck_n else ()
        cks = tuple(tuple(raw[CK_WORDS * i:CK_WORDS * (i + 1)]) for i in range(h.ck_n))
        return Digest(tuple(h.hash), tuple(h.count), cks, complete)

    def events(self) -> list[Event]:
        """The recorded window, in order."""
        h = self._head
        if not h.rec_n:
            return []
        data = ctypes.string_at(h.rec, h.rec_n * REC.size)
        return [Event(i, c, Rec(k), a, g, p) for i, c, k, a, g, p in REC.iter_unpack(data)]

    def close(self) -> None:
        """Remove the hooks and free the native state (the machine may run on)."""
        if not self.ptr:
            return
        core = self.machine.core
        for handle in self._hooks:
            core.remove_native_hook(handle)
        core.memory_hook_placed(self, False)
        if core.obs is not None:
            self._lib.pk_obs_set_ext(core.obs.ptr, None, None)
        self.machine.unobserve(self._observer)
        self._lib.pk_ct_free(self.ptr)
        self.ptr = ctypes.c_void_p()
