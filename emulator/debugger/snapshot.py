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
           "cond_penalty", "align_enabled", "entry_cycles", "return_cycles", "vtor", "sleep_on_exit")
# PkaState fields owned by the native log (pointer and capacity) or the wiring.
_PKA_KEEP = ("log", "log_cap", "ram", "montmul_cycles", "core", "py_access", "fast_on", "irq_exc", "base")
# PkState fields not kept at all: the idle-loop verdict tables (36 KiB), a cache that
# restore() empties anyway (verdicts are decided again against today's breakpoints).
_CACHE_FIELDS = ("verdict_addr", "verdict_end", "verdict")
_SKIP_ATTRS = {"observer", "clock", "irq", "on_change", "on_reset_request", "exceptions", "active_exception",
               "_native", "ram", "regs", "state"}
_OP_SIZE = 24  # sizeof(pk_pka_op): op, words, start, end


def _raw(obj: ctypes.Structure | ctypes.Array) -> bytes:
    return ctypes.string_at(ctypes.addressof(obj), ctypes.sizeof(obj))


def _put(obj: ctypes.Structure | ctypes.Array, data: bytes) -> None:
    ctypes.memmove(ctypes.addressof(obj), data, len(data))


def _restore_struct(obj: ctypes.Structure, data: bytes, keep: tuple[str, ...]) -> None:
    """Put ``data`` back into ``obj`` in place, except the fields named in ``keep``."""
    kept = {name: _raw_field(obj, name) for name in keep if hasattr(type(obj), name)}
    _put(obj, data)
    for name, value in kept.items():
        f = getattr(type(obj), name)
        ctypes.memmove(ctypes.addressof(obj) + f.offset, value, f.size)


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
    kept = {name: _raw_field(state, name) for name in _WIRING if hasattr(type(state), name)}
    base, pos = ctypes.addressof(state), 0
    for off, size in _core_ranges(state):
        ctypes.memmove(base + off, data[pos:pos + size], size)
        pos += size
    for name, value in kept.items():
        f = getattr(type(state), name)
        ctypes.memmove(base + f.offset, value, f.size)


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
    for key, value in saved.items():
        if key == "log":
            continue
        if key == "ctypes:state":
            _restore_struct(dev.state, value, _PKA_KEEP)
        elif key.startswith("ctypes:"):
            _put(getattr(dev, key[7:]), value)
        else:
            setattr(dev, key, _copy_value(value))
    if "log" in saved:
        LogArchive.restore(dev.state, *saved["log"])


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
    for region in _writable_regions(machine):
        old = snap.memory[region.base]
        if bytes(uc.mem_read(region.base, region.size)) != old:
            uc.mem_write(region.base, old)
            if core.code is not None and any(r.base == region.base for r in core.code.regions):
                core.code.written(region.base, region.size)
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
    machine._loop.forget_loop_verdicts()  # decided again against today's breakpoints
    core.lib.pk_native_changed(core.state_ref)  # the native devices' next event: computed again
    machine._sync_scb()
