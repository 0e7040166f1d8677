"""The native code (cyclehook.c, excmodel.c, pka_fast.c): locate the shared object and
mirror its state.

setup.py builds cyclehook.c into ``emulator/_cyclehook*.so`` (a plain shared object,
no Python API); this module loads it with ctypes and declares pk_state field by field.
The field order here must match the C struct; ``load()`` checks the size.
"""

from __future__ import annotations

import ctypes
import importlib.machinery
from pathlib import Path

from .errors import PkasimError

RING = 32

STOP_NONE, STOP_DEADLINE, STOP_ALIGN, STOP_IRQCHK, STOP_SLEEP, STOP_LOOPCHK, STOP_STUCK = range(7)

FALLBACK = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint32)
PY_INTR = ctypes.CFUNCTYPE(None, ctypes.c_uint32)
# A native device's slow path: (offset, size, value, is_write, cycles into the block) -> value read
DEVICE_ACCESS = ctypes.CFUNCTYPE(ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32,
                                 ctypes.c_uint32, ctypes.c_uint32)


class PkState(ctypes.Structure):
    _fields_ = [
        ("cycles", ctypes.c_uint64),
        ("insns", ctypes.c_uint64),
        ("deadline", ctypes.c_uint64),
        ("blocks", ctypes.c_uint64),
        ("cur_valid", ctypes.c_uint32),
        ("cur_start", ctypes.c_uint32),
        ("cur_end", ctypes.c_uint32),
        ("cur_cost", ctypes.c_uint32),
        ("cur_insns", ctypes.c_uint32),
        ("cur_flags", ctypes.c_uint32),
        ("prev_valid", ctypes.c_uint32),
        ("prev_end", ctypes.c_uint32),
        ("prev_flags", ctypes.c_uint32),
        ("stop_reason", ctypes.c_uint32),
        ("align_pc", ctypes.c_uint32),
        ("align_addr", ctypes.c_uint32),
        ("align_skip_start", ctypes.c_uint32),
        ("code_base", ctypes.c_uint32),
        ("code_halfwords", ctypes.c_uint32),
        ("cost", ctypes.c_void_p),
        ("len", ctypes.c_void_p),
        ("flags", ctypes.c_void_p),
        ("desc", ctypes.c_void_p),
        ("cache", ctypes.c_void_p),
        ("checks", ctypes.c_void_p),
        ("checks_used", ctypes.c_uint32),
        ("checks_cap", ctypes.c_uint32),
        ("fetch_ws", ctypes.c_uint32),
        ("flash_base", ctypes.c_uint32),
        ("flash_end", ctypes.c_uint32),
        ("cond_penalty", ctypes.c_uint32),
        ("align_enabled", ctypes.c_uint32),
        ("uc", ctypes.c_void_p),
        ("reg_read", ctypes.c_void_p),
        ("emu_stop", ctypes.c_void_p),
        ("fallback", ctypes.c_void_p),
        ("regids", ctypes.c_int32 * 16),
        ("ring", ctypes.c_uint32 * RING),
        ("ring_pos", ctypes.c_uint32),
        ("apsr_regid", ctypes.c_int32),
        ("pad_end", ctypes.c_uint32),
        # the native exception model (excmodel.c)
        ("nvic", ctypes.c_void_p),
        ("reg_write", ctypes.c_void_p),
        ("mem_read", ctypes.c_void_p),
        ("mem_write", ctypes.c_void_p),
        ("py_intr", ctypes.c_void_p),
        ("sleep_cycles", ctypes.c_uint64),
        ("taken", ctypes.c_uint64 * 64),
        ("native_on", ctypes.c_uint32),
        ("irq_check", ctypes.c_uint32),
        ("vtor", ctypes.c_uint32),
        ("sleep_on_exit", ctypes.c_uint32),
        ("entry_cycles", ctypes.c_uint32),
        ("return_cycles", ctypes.c_uint32),
        ("stack_n", ctypes.c_uint32),
        ("stack_base", ctypes.c_uint32 * 8),
        ("stack_end", ctypes.c_uint32 * 8),
        ("id_primask", ctypes.c_int32),
        ("id_control", ctypes.c_int32),
        ("id_msp", ctypes.c_int32),
        ("id_psp", ctypes.c_int32),
        ("id_xpsr", ctypes.c_int32),
        ("id_ipsr", ctypes.c_int32),
        ("wfi_pc", ctypes.c_uint32),
        ("pka", ctypes.c_void_p),
        ("acc_blocks", ctypes.c_uint64),
        ("acc_start", ctypes.c_uint32),
        ("acc_last", ctypes.c_int32),
        # idle loops (idle.c)
        ("py_next", ctypes.c_uint64),
        ("py_reads", ctypes.c_uint64),
        ("loop_py_reads", ctypes.c_uint64),
        ("loop_since", ctypes.c_uint64),
        ("loop_start", ctypes.c_uint32),
        ("loop_count", ctypes.c_uint32),
        ("loop_have", ctypes.c_uint32),
        ("loop_pad", ctypes.c_uint32),
        ("loop_regs", ctypes.c_uint32 * 16),
        ("verdict_addr", ctypes.c_uint32 * 256),
        ("verdict", ctypes.c_uint8 * 256),
        ("obs", ctypes.c_void_p),
    ]


_lib: ctypes.CDLL | None = None


def _find() -> Path | None:
    here = Path(__file__).resolve().parent
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = here / f"_cyclehook{suffix}"
        if candidate.exists():
            return candidate
    found = sorted(here.glob("_cyclehook*.so"))
    return found[0] if found else None


def load() -> ctypes.CDLL:
    """The loaded library (once per process)."""
    global _lib
    if _lib is not None:
        return _lib
    path = _find()
    if path is None:
        raise PkasimError("the native cycle hook is not built: run 'pip install -e .' (or 'make') in the pkasim checkout")
    lib = ctypes.CDLL(str(path))
    lib.pk_sizeof_state.restype = ctypes.c_uint32
    lib.pk_sizeof_desc.restype = ctypes.c_uint32
    lib.pk_alloc_cache.restype = ctypes.c_void_p
    lib.pk_alloc_cache.argtypes = [ctypes.c_uint32]
    lib.pk_free.argtypes = [ctypes.c_void_p]
    lib.pk_clear_cache.argtypes = [ctypes.c_void_p]
    lib.pk_access_offset.restype = ctypes.c_uint32
    lib.pk_access_offset.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    lib.pk_native_next.restype = ctypes.c_uint64
    lib.pk_native_next.argtypes = [ctypes.c_void_p]
    lib.pk_native_due.argtypes = [ctypes.c_void_p]
    lib.pk_sizeof_pka.restype = ctypes.c_uint32
    lib.pk_pka_free_log.argtypes = [ctypes.c_void_p]
    lib.pk_next_to_take.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.pk_would_wake.argtypes = [ctypes.c_void_p]
    lib.pk_montmul.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_uint32]
    if lib.pk_sizeof_state() != ctypes.sizeof(PkState):
        raise PkasimError(f"{path.name} does not match this pkasim (state size {lib.pk_sizeof_state()} != "
                          f"{ctypes.sizeof(PkState)}): rebuild with 'pip install -e .'")
    _lib = lib
    return lib
