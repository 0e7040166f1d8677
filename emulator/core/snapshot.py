"""A snapshot of the whole machine, taken between runs and put back exactly.

What a run depends on, and where it lives:

* the core's registers: Unicorn's CPU context (``context_save``);
* memory: every writable region (flash is read-only to the core, so it is left out;
  the code cache is told about restored bytes that held code);
* the native hook's record (``PkState``: cycle and instruction counters, the block
  being settled, the idle-loop detector, exception counts), except the pointers that
  wire it to this process (they do not change while the machine lives) and the
  idle-loop verdict cache (emptied on restore);
* each device: its ctypes records (``NvicState``, ``PkaState`` and PKA RAM) byte for
  byte, in place, because the native fast paths hold their addresses; its Python
  attributes one level deep (counters, logs, the scheduled ``Event`` it may cancel);
* the clock's event queue (the same ``Event`` objects, with their cancelled flags,
  and the sequence number that breaks ties);
* the exception model's counts and last fault, the core's sleeping flag, the
  semihosting call count and errno.

The native PKA operation log is append-only, so a snapshot keeps only its length; the
entries are kept once by the ``LogArchive`` that all snapshots of a history share.
Host files and console input are not part of the machine and are not rewound.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pkasim.core.machine import Machine

# PkState fields that wire the record to this process's engine and devices.
_WIRING = ("uc", "reg_read", "emu_stop", "nvic", "reg_write", "mem_read", "mem_write", "py_intr", "devices", "n_devices", "obs",
           "code", "native_on", "regids", "apsr_regid", "stack_n", "stack_base", "stack_end", "id_primask",
           "id_control", "id_msp", "id_psp", "id_xpsr", "id_ipsr", "fetch_ws", "flash_base", "flash_end",
           "cond_penalty", "align_enabled", "entry_cycles", "return_cycles", "vtor", "sleep_on_exit", "regs_ptr",
           "flash_host", "flash_alias", "flash_alias_on", "wwin", "sh_native",
           "m_read", "m_write", "uc_ctl", "ctl_remove_cache", "probe_py")
# PkaState fields owned by the native log (pointer and capacity) or the wiring.
_PKA_KEEP = ("log", "log_cap", "ram", "op_cycles", "core", "py_access", "fast_on", "irq_exc", "base")
# PkState fields not kept at all: the idle-loop verdict tables (44 KiB), a cache that
# restore() empties anyway (verdicts are decided again against today's breakpoints).
_CACHE_FIELDS = ("verdict_addr", "verdict_end", "verdict", "verdict_regs", "sh_buf")
_SKIP_ATTRS = {"observer", "_on_start", "clock", "irq", "on_change", "on_reset_request", "exceptions",
               "active_exception", "_native", "ram", "regs", "state"}
_OP_SIZE = 24  # sizeof(pk_pka_op): op, words, start, end


def _raw(obj: ctypes.Structure | ctypes.Array) -> bytes:
    return ctypes.string_at(ctypes.addressof(obj), ctypes.sizeof(obj))


def _put(obj: ctypes.Structure | ctypes.Array, data: bytes) -> None:
    ctypes.memmove(ctypes.addressof(obj), data, len(data))


@functools.cache
def _segments(cls: type, skip: tuple[str, ...], drop: tuple[str, ...] = ()) -> tuple[tuple[int, int, int], ...]:
    """How to put a record of type ``cls`` back from its saved bytes, computed once per
    type: (offset in the record, offset in the saved bytes, size) of every part that is
    restored. ``drop`` fields are not in the saved bytes at all; ``skip`` fields are in
    them but keep their present value (the wiring of this process)."""
    size = ctypes.sizeof(cls)

    def fields(names: tuple[str, ...]) -> list[tuple[int, int]]:
        return sorted((getattr(cls, f).offset, getattr(cls, f).size) for f in names if hasattr(cls, f))

    def minus(ranges: list[tuple[int, int]], holes: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """[lo, hi) ranges without the (offset, size) holes."""
        out = []
        for lo, hi in ranges:
            pos = lo
            for off, n in holes:
                if off + n <= pos or off >= hi:
                    continue
                if off > pos:
                    out.append((pos, off))
                pos = max(pos, off + n)
            if pos < hi:
                out.append((pos, hi))
        return out

    kept = minus([(0, size)], fields(drop))  # what the saved bytes hold, in order
    data_at, pos = [], 0
    for lo, hi in kept:
        data_at.append((lo, hi, pos))
        pos += hi - lo
    restored = minus(kept, fields(skip))
    out = []
    for lo, hi in restored:
        base_lo, _, at = next(k for k in data_at if k[0] <= lo < k[1])
        out.append((lo, at + lo - base_lo, hi - lo))
    return tuple(out)


def _put_segments(obj: ctypes.Structure, data: bytes, segments: tuple[tuple[int, int, int], ...]) -> None:
    base = ctypes.addressof(obj)
    for off, at, size in segments:
        ctypes.memmove(base + off, data[at:at + size], size)


def _restore_struct(obj: ctypes.Structure, data: bytes, keep: tuple[str, ...]) -> None:
    """Put ``data`` back into ``obj`` in place, except the fields named in ``keep``."""
    _put_segments(obj, data, _segments(type(obj), keep))


def _raw_field(obj: ctypes.Structure, name: str) -> bytes:
    f = getattr(type(obj), name)
    return ctypes.string_at(ctypes.addressof(obj) + f.offset, f.size)


def _core_ranges(state: ctypes.Structure) -> list[tuple[int, int]]:
    """(offset, size) of the PkState bytes a snapshot keeps: all but the caches."""
    skip = sorted((getattr(type(state), f).offset, getattr(type(state), f).size) for f in _CACHE_FIELDS
                  if hasattr(type(state), f))
    out, pos = [], 0
    for off, size in skip:
        if off > pos:
            out.append((pos, off - pos))
        pos = max(pos, off + size)
    out.append((pos, ctypes.sizeof(state) - pos))
    return out


def _raw_core(state: ctypes.Structure) -> bytes:
    base = ctypes.addressof(state)
    return b"".join(ctypes.string_at(base + off, size) for off, size in _core_ranges(state))


def _restore_core(state: ctypes.Structure, data: bytes) -> None:
    """Put the kept PkState bytes back (the wiring fields as they are now)."""
    _put_segments(state, data, _segments(type(state), _WIRING, _CACHE_FIELDS))


_CHUNK = 512


def differences(now: bytes, old: bytes) -> list[tuple[int, int]]:
    """The [lo, hi) spans (in 512-byte chunks) where two equal-sized images differ."""
    out: list[tuple[int, int]] = []
    size = len(old)
    for lo in range(0, size, _CHUNK):
        hi = min(lo + _CHUNK, size)
        if now[lo:hi] != old[lo:hi]:
            if out and out[-1][1] == lo:
                out[-1] = (out[-1][0], hi)
            else:
                out.append((lo, hi))
    return out


def _copy_value(value: Any) -> Any:
    if isinstance(value, (list, dict, set, Counter, bytearray)):
        return value.copy()
    return value


class LogArchive:
    """The native PKA operation logs' entries, kept once for a whole history (the
    native log only grows between resets, so a snapshot needs only its length)."""

    def __init__(self) -> None:
        self._data: dict[str, bytearray] = {}

    def record(self, name: str, state: Any) -> tuple[bytearray, int]:
        """The archive holding this log's first ``log_n`` entries, and ``log_n``."""
        n = int(state.log_n)
        have = self._data.get(name)
        now = ctypes.string_at(state.log, n * _OP_SIZE) if n and state.log else b""
        if have is None or len(have) > len(now) or have != now[:len(have)]:
            have = bytearray(now)  # a new generation (the log was cleared): older snapshots keep theirs
            self._data[name] = have
        else:
            have += now[len(have):]
        return have, n

    @staticmethod
    def restore(state: Any, archive: bytearray, n: int) -> None:
        """Make the native log hold exactly the archived first ``n`` entries."""
        if n > state.log_cap or not state.log:
            libc = ctypes.CDLL(None)
            libc.realloc.restype = ctypes.c_void_p
            libc.realloc.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
            cap = max(n, 4096)
            grown = libc.realloc(state.log, cap * _OP_SIZE)
            if not grown:
                raise MemoryError("cannot restore the PKA operation log")
            state.log, state.log_cap = grown, cap
        if n:
            ctypes.memmove(state.log, bytes(archive[:n * _OP_SIZE]), n * _OP_SIZE)
        state.log_n = n


@dataclass
class Snapshot:
    """The machine at one instant between runs (see the module docstring)."""

    cycles: int
    instructions: int
    context: Any
    memory: dict[int, bytes]
    core_state: bytes
    devices: dict[str, dict[str, Any]]
    clock_queue: list
    cancelled: list[bool]
    clock_seq: int
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def position(self) -> tuple[int, int]:
        return (self.instructions, self.cycles)

    def size_bytes(self) -> int:
        """Host memory this snapshot holds (memory images, records, the CPU context)."""
        n = sum(len(b) for b in self.memory.values()) + len(self.core_state)
        for dev in self.devices.values():
            n += sum(len(v) for k, v in dev.items() if k.startswith("ctypes:"))
        return n + _CONTEXT_BYTES


_CONTEXT_BYTES = 0  # set on first capture: Unicorn's context size


def _writable_regions(machine: Machine) -> list:
    return [r for r in machine.config.memory.values() if r.name != "flash"]


def _capture_device(dev: Any, logs: LogArchive) -> dict[str, Any]:
    saved: dict[str, Any] = {}
    for name, value in vars(dev).items():
        if name in _SKIP_ATTRS or callable(value) and not isinstance(value, (list, dict)):
            continue
        if isinstance(value, (ctypes.Structure, ctypes.Array)):
            saved["ctypes:" + name] = _raw(value)
        else:
            saved[name] = _copy_value(value)
    state = getattr(dev, "state", None)
    if isinstance(state, ctypes.Structure):
        saved["ctypes:state"] = _raw(state)
        if hasattr(type(state), "log_n"):
            saved["log"] = logs.record(dev.name, state)
    return saved


def _restore_device(dev: Any, saved: dict[str, Any]) -> None:
    plan = saved.get(_PLAN)
    if plan is None:  # which key is what, sorted out once per snapshot
        records = tuple((k[7:], v) for k, v in saved.items() if k.startswith("ctypes:") and k != "ctypes:state")
        containers = tuple((k, v) for k, v in saved.items()
                           if not k.startswith("ctypes:") and k != "log" and isinstance(v, _CONTAINERS))
        plain = tuple((k, v) for k, v in saved.items()
                      if not k.startswith("ctypes:") and k != "log" and not isinstance(v, _CONTAINERS))
        plan = saved[_PLAN] = (saved.get("ctypes:state"), records, containers, plain)
    state, records, containers, plain = plan
    if state is not None:
        _restore_struct(dev.state, state, _PKA_KEEP)
    for name, value in records:
        _put(getattr(dev, name), value)
    for key, value in containers:
        if getattr(dev, key, None) != value:  # a container the device may change: a copy of its own
            setattr(dev, key, value.copy())
    for key, value in plain:
        if getattr(dev, key, _MISSING) is not value:
            setattr(dev, key, value)
    if "log" in saved:
        LogArchive.restore(dev.state, *saved["log"])


_PLAN = "\0plan"  # the restore plan, kept in the saved dict (never a device attribute's name)
_CONTAINERS = (list, dict, set, Counter, bytearray)
_MISSING = object()


def capture(machine: Machine, logs: LogArchive) -> Snapshot:
    """The machine as it is now (between runs: no block is half executed)."""
    global _CONTEXT_BYTES
    core = machine.core
    uc = core.uc
    ctx = uc.context_save()
    if not _CONTEXT_BYTES:
        _CONTEXT_BYTES = int(getattr(ctx, "size", 0))
    memory = {r.base: bytes(uc.mem_read(r.base, r.size)) for r in _writable_regions(machine)}
    clock = machine.clock
    seq = next(clock._seq)
    clock._seq = itertools.count(seq)
    queue = list(clock._queue)
    exc = machine._exc
    sh = machine._sh
    extra = {
        "sleeping": core.sleeping,
        "taken": dict(exc.taken),
        "last_fault": exc.last_fault,
        "sh": (sh.calls, sh.errno, sh.last_exit) if sh is not None else None,
    }
    return Snapshot(
        cycles=core.cycles, instructions=core.instructions, context=ctx, memory=memory,
        core_state=_raw_core(core.state),
        devices={name: _capture_device(dev, logs) for name, dev in machine.peripherals.items()},
        clock_queue=queue, cancelled=[e.cancelled for _, _, e in queue], clock_seq=seq, extra=extra)


def restore(machine: Machine, snap: Snapshot) -> None:
    """Put the machine back exactly as ``snap`` found it."""
    core = machine.core
    uc = core.uc
    changed: list[tuple[int, int]] = []
    for region in _writable_regions(machine):
        old = snap.memory[region.base]
        now = bytes(uc.mem_read(region.base, region.size))
        if now != old:
            for lo, hi in differences(now, old):
                uc.mem_write(region.base + lo, old[lo:hi])  # only what differs: a write costs per page
                changed.append((region.base + lo, region.base + hi))
                if core.code is not None and any(r.base == region.base for r in core.code.regions):
                    core.code.written(region.base + lo, hi - lo)
    uc.context_restore(snap.context)
    _restore_core(core.state, snap.core_state)
    for name, saved in snap.devices.items():
        _restore_device(machine.peripherals[name], saved)
    clock = machine.clock
    for (_, _, event), cancelled in zip(snap.clock_queue, snap.cancelled):
        event.cancelled = cancelled
    clock._queue = list(snap.clock_queue)
    clock._seq = itertools.count(snap.clock_seq)
    extra = snap.extra
    core.sleeping = extra["sleeping"]
    exc = machine._exc
    exc.taken = dict(extra["taken"])
    exc.last_fault = extra["last_fault"]
    if extra["sh"] is not None and machine._sh is not None:
        machine._sh.calls, machine._sh.errno, machine._sh.last_exit = extra["sh"]
    machine._loop._bps.skip = None  # "resume past the breakpoint here" was about the position left
    machine._loop.forget_loop_verdicts(within=changed)  # loops whose code changed: decided again
    core.lib.pk_native_changed(core.state_ref)  # the native devices' next event: computed again
    machine._sync_scb()
