"""The native code (cyclehook.c, codecache.c, thumb.c, excmodel.c, pka_fast.c): locate
the shared object and mirror its state and the decoder's structures.

setup.py builds cyclehook.c into ``emulator/_cyclehook*.so`` (a plain shared object,
no Python API); this module loads it with ctypes and declares pk_state field by field.
The field order here must match the C struct; ``load()`` checks the size.
"""

from __future__ import annotations

import ctypes
import importlib.machinery
from pathlib import Path

from pkasim.base.errors import PkasimError, UnavailableError

RING = 64
RING_EMPTY = 0xFFFFFFFF  # a slot of the ring no block start has filled yet (never a start: odd)
VERDICTS = 4096  # PK_VERDICTS: loop verdicts kept, indexed by (key >> 1) & (VERDICTS - 1)
NATIVE_BPS = 16  # PK_NATIVE_BPS: breakpoints the native loop verdict knows (more: Python decides)
TRUST = 1024  # PK_TRUST: trusted-loop slots (idle.c)
SH_BUF = 4096  # PK_SH_BUF: semihosting console bytes kept natively (excmodel.c)
VERDICT_PLAIN = 4  # verdict flag (pkstate.h): no back edge inside the loop's code but its last
VERDICT_SELF = 8  # verdict flag (pkstate.h): its iterations are self-contained (cycles.loop_self_contained)

(STOP_NONE, STOP_DEADLINE, STOP_ALIGN, STOP_IRQCHK, STOP_SLEEP, STOP_LOOPCHK, STOP_STUCK, STOP_UNDEF, STOP_WATCH,
 STOP_NATIVE_ERROR, STOP_ALIGN_SPLIT, STOP_SP_WRITE, STOP_PROBE) = range(13)
PROBE_OFF, PROBE_ENTRY, PROBE_CALL, PROBE_DONE, PROBE_STOPPED = range(5)  # pk_state probe_state
PK_NOMEM, PK_UNREADABLE = 1, 2  # native_error after STOP_NATIVE_ERROR
PK_NONE = 0xFFFFFFFF

PY_INTR = ctypes.CFUNCTYPE(None, ctypes.c_uint32)
PROBE_MARK = ctypes.CFUNCTYPE(None, ctypes.c_uint32)  # pk_probe_fn: 0 at the entry, 1 at the return
# A native device's slow path: (offset, size, value, is_write, cycles into the block) -> value read
DEVICE_ACCESS = ctypes.CFUNCTYPE(ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32,
                                 ctypes.c_uint32, ctypes.c_uint32)


class PageSub(ctypes.Structure):
    """pk_page_sub (sharedpage.c): a device window in a shared page with a native path."""

    _fields_ = [("lo", ctypes.c_uint32), ("hi", ctypes.c_uint32), ("read", ctypes.c_void_p),
                ("write", ctypes.c_void_p), ("state", ctypes.c_void_p)]


PAGE_SUBS = 4  # PK_PAGE_SUBS


class PageState(ctypes.Structure):
    """pk_page (sharedpage.c): a 1 KiB page of device registers several devices share."""

    _fields_ = [("core", ctypes.c_void_p), ("base", ctypes.c_uint32), ("n", ctypes.c_uint32),
                ("sub", PageSub * PAGE_SUBS), ("py", ctypes.c_void_p)]


class Desc(ctypes.Structure):
    """pk_desc (thumb.h): how one instruction computes or uses an address register."""

    _fields_ = [
        ("kind", ctypes.c_uint8),
        ("rd", ctypes.c_int8),
        ("rn", ctypes.c_int8),
        ("rm", ctypes.c_int8),
        ("imm", ctypes.c_int32),
        ("wmask", ctypes.c_uint16),
        ("amask", ctypes.c_uint8),
        ("pad", ctypes.c_uint8),
    ]


class Insn(ctypes.Structure):
    """pk_insn (thumb.h): one decoded instruction."""

    _fields_ = [
        ("desc", Desc),
        ("cost", ctypes.c_uint16),
        ("size", ctypes.c_uint8),
        ("flags", ctypes.c_uint8),
        ("undefined", ctypes.c_uint8),
        ("pad", ctypes.c_uint8 * 3),
    ]


class Rules(ctypes.Structure):
    """pk_rules (thumb.h): the core options that change instruction costs."""

    _fields_ = [
        ("muls_cycles", ctypes.c_uint32),
        ("fetch_ws", ctypes.c_uint32),
        ("flash_base", ctypes.c_uint32),
        ("flash_end", ctypes.c_uint32),
    ]


DEVICES = 8  # PK_DEVICES: native devices with timed events


class PkDevice(ctypes.Structure):
    """pk_device (pkstate.h): a native device's state record and its next/due functions."""

    _fields_ = [("dev", ctypes.c_void_p), ("next", ctypes.c_void_p), ("due", ctypes.c_void_p)]


def add_device(state: ctypes.Structure, lib: ctypes.CDLL, record: int, next_fn: str, due_fn: str) -> None:
    """List a device's native timed events in the core's table: its state record at
    ``record`` and the names of its next/due functions in ``lib``. Devices fire in the
    order they are added."""
    n = state.n_devices
    if n >= DEVICES:
        raise PkasimError(f"more than {DEVICES} devices with native events")
    entry = state.devices[n]
    entry.dev = record
    entry.next = ctypes.cast(getattr(lib, next_fn), ctypes.c_void_p).value
    entry.due = ctypes.cast(getattr(lib, due_fn), ctypes.c_void_p).value
    state.n_devices = n + 1


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
        ("fetch_ws", ctypes.c_uint32),
        ("flash_base", ctypes.c_uint32),
        ("flash_end", ctypes.c_uint32),
        ("cond_penalty", ctypes.c_uint32),
        ("align_enabled", ctypes.c_uint32),
        ("uc", ctypes.c_void_p),
        ("reg_read", ctypes.c_void_p),
        ("emu_stop", ctypes.c_void_p),
        ("regids", ctypes.c_int32 * 16),
        ("ring", ctypes.c_uint32 * RING),
        ("ring_pos", ctypes.c_uint8),  # byte offset of the next slot (wraps by itself)
        ("ring_pad", ctypes.c_uint8 * 3),
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
        ("devices", PkDevice * DEVICES),
        ("n_devices", ctypes.c_uint32),
        ("pad_devices", ctypes.c_uint32),
        ("acc_blocks", ctypes.c_uint64),
        ("acc_start", ctypes.c_uint32),
        ("acc_last", ctypes.c_int32),
        # idle loops (idle.c)
        ("py_next", ctypes.c_uint64),
        ("py_reads", ctypes.c_uint64),
        ("loop_py_reads", ctypes.c_uint64),
        ("dev_events", ctypes.c_uint64),
        ("loop_dev_events", ctypes.c_uint64),
        ("loop_since", ctypes.c_uint64),
        ("loop_start", ctypes.c_uint32),
        ("loop_count", ctypes.c_uint32),
        ("loop_have", ctypes.c_uint32),
        ("loop_end", ctypes.c_uint32),
        ("loop_regs", ctypes.c_uint32 * 16),
        ("verdict_addr", ctypes.c_uint32 * VERDICTS),
        ("verdict_end", ctypes.c_uint32 * VERDICTS),
        ("verdict", ctypes.c_uint8 * VERDICTS),
        ("verdict_regs", ctypes.c_uint16 * VERDICTS),
        ("obs", ctypes.c_void_p),
        # code decoding and caching (codecache.c, thumb.c)
        ("code", ctypes.c_void_p),
        ("undef_pc", ctypes.c_uint32),
        ("watch_region", ctypes.c_uint32),
        ("native_error", ctypes.c_uint32),
        ("pad_code", ctypes.c_uint32),
        # idle loops of several blocks (idle.c)
        ("loop_acc_cost", ctypes.c_uint32),
        ("loop_acc_insns", ctypes.c_uint32),
        ("loop_acc_blocks", ctypes.c_uint32),
        ("loop_key", ctypes.c_uint32),
        ("native_min", ctypes.c_uint64),
        # the engine's TLB (tlb.c)
        ("tlb_page", ctypes.c_uint32),
        ("pad_tlb", ctypes.c_uint32),
        # idle loops (idle.c)
        ("loop_misses", ctypes.c_uint32),
        ("loop_anchor", ctypes.c_uint32),
        # counted mode (pkasim's engine: cyclehook.c pk_block_hook_counted)
        ("limit", ctypes.c_uint64),
        ("limit_inline", ctypes.c_uint64),
        ("span_lo", ctypes.c_uint32),
        ("span_hi", ctypes.c_uint32),
        ("counted", ctypes.c_uint32),
        ("cur_mode", ctypes.c_uint32),
        ("split_start", ctypes.c_uint32),
        ("pad_split", ctypes.c_uint32),
        ("verdict_native", ctypes.c_uint32),
        ("until_on", ctypes.c_uint32),
        ("until", ctypes.c_uint32),
        ("bp_n", ctypes.c_uint32),
        ("bp", ctypes.c_uint32 * NATIVE_BPS),
        ("regs_ptr", ctypes.c_void_p),
        # trusted loops (idle.c)
        ("trust_end", ctypes.c_uint64),
        ("trust", ctypes.c_uint32 * TRUST),
        # flash data reads through an alias (flashalias.c)
        ("flash_host", ctypes.c_void_p),
        ("flash_alias", ctypes.c_uint64),
        ("flash_alias_on", ctypes.c_uint32),
        ("pad_alias", ctypes.c_uint32),
        # watched pages behind a window (watchwindow.c)
        ("wwin", ctypes.c_void_p),
        # semihosting console output kept natively (excmodel.c)
        ("sh_native", ctypes.c_uint32),
        ("sh_len", ctypes.c_uint32),
        ("sh_buf", ctypes.c_char * SH_BUF),
        # the M-profile exception registers in one call (engine patch 25; NULL on the stock wheel)
        ("m_read", ctypes.c_void_p),
        ("m_write", ctypes.c_void_p),
        # a whole iteration of an idle loop, seen from its start (idle.c)
        ("whole_py_reads", ctypes.c_uint64),
        ("whole_dev_events", ctypes.c_uint64),
        ("py_read_at", ctypes.c_uint64),
        ("whole_next", ctypes.c_uint32),
        ("whole_anchored", ctypes.c_uint32),
        # one function call measured within a run (cyclehook.c probe_mark; core/measure.py)
        ("probe_state", ctypes.c_uint32),
        ("probe_at", ctypes.c_uint32),
        ("probe_cycles", ctypes.c_uint64 * 2),
        ("probe_insns", ctypes.c_uint64 * 2),
        ("probe_py", ctypes.c_void_p),
        ("uc_ctl", ctypes.c_void_p),
        ("ctl_remove_cache", ctypes.c_uint32),
        ("pad_probe", ctypes.c_uint32),
    ]


class BlockAccount(ctypes.Structure):
    """Unicorn's uc_block_account (the engine's patches 5, 19 and 31, docs/engine.md):
    where the generated code keeps the count, the two native callbacks, and the word
    that says whether a block that may unmask interrupts needs the hook after it."""

    _fields_ = [(name, ctypes.c_void_p) for name in
                ("cycles", "insns", "limit", "record", "span", "ring", "ring_pos", "cost", "hook", "user_data",
                 "inline_limit", "hook_next_when")]


_lib: ctypes.CDLL | None = None


def _declare(fn: ctypes._CFuncPtr, restype: type | None, *argtypes: type) -> None:
    fn.restype = restype
    fn.argtypes = list(argtypes)


def _declare_code(lib: ctypes.CDLL) -> None:
    """The code cache and the decoder (codecache.c, thumb.c, cyclehook.c)."""
    u32, u64, ptr = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_void_p
    _declare(lib.pk_code_new, ptr, u32, u32, u32, u32, ptr)
    _declare(lib.pk_code_add_region, ctypes.c_int, ptr, u32, u32, u32)
    _declare(lib.pk_code_add_memory, ctypes.c_int, ptr, u32, u32, ptr)
    _declare(lib.pk_code_clear, None, ptr)
    _declare(lib.pk_code_track_translation, None, ptr)
    _declare(lib.pk_code_changed, ctypes.c_int, ptr, u32, u32)
    _declare(lib.pk_code_watch_need, None, ptr, u32, ctypes.POINTER(u32), ctypes.POINTER(u32))
    _declare(lib.pk_code_watch_set, None, ptr, u32, u32, u32)
    _declare(lib.pk_code_watch_span, None, ptr, u32, ctypes.POINTER(u32), ctypes.POINTER(u32))
    _declare(lib.pk_code_bytes, u64, ptr)
    _declare(lib.pk_code_page_holds_code, ctypes.c_int, ptr, u32, u32, ctypes.c_int)
    _declare(lib.pk_code_blocks, u32, ptr)
    _declare(lib.pk_code_decode_range, u32, ptr, ptr, u32, u32, ctypes.POINTER(Insn), u32, ctypes.c_int)
    _declare(lib.pk_decode, None, u32, u32, u32, ctypes.POINTER(Rules), ctypes.POINTER(Insn))
    _declare(lib.pk_resolve_literal, None, ctypes.POINTER(Desc), ctypes.c_int, u32)
    _declare(lib.pk_cost_before, u32, ptr, u32, ctypes.POINTER(u32))
    _declare(lib.pk_probe_arm, None, ptr, u32)


LEAK_CLASSES = ("alu", "shift", "mul", "load", "store", "other")  # leakage.c LK_* classes, in order
LEAK_TERMS = ("constant", "hw_op1", "hw_op2", "hd_op1", "hd_op2", "hw_result", "hd_data")  # LK_* terms


def _declare_leak(lib: ctypes.CDLL) -> None:
    """The power model's instruction hook (leakage.c)."""
    u32, u64, ptr = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_void_p
    _declare(lib.pk_leak_new, ptr, ptr, ctypes.POINTER(ctypes.c_double), u32)
    _declare(lib.pk_leak_free, None, ptr)
    _declare(lib.pk_leak_forget, None, ptr)
    _declare(lib.pk_leak_arm, None, ptr, u64, u64, u64, ptr, ptr)
    _declare(lib.pk_leak_disarm, u64, ptr)
    _declare(lib.pk_leak_digest, u64, ptr)
    _declare(lib.pk_leak_done, u32, ptr)
    _declare(lib.pk_leak_classes, u32)
    _declare(lib.pk_leak_terms, u32)
    dbl, words = ctypes.c_double, ctypes.POINTER(u32)
    _declare(lib.pk_pka_rows, None, u32, words, words, words, words, u64, u64, dbl, dbl, ctypes.POINTER(dbl))
    _declare(lib.pk_pka_pass, None, u32, words, words, words, u32, u64, u64, u64, u64, dbl, dbl,
             ctypes.POINTER(dbl))


def find_library(stem: str) -> Path | None:
    """The shared object ``pkasim.native.<stem>`` that setup.py built into this folder
    (``_cyclehook``; another native library the wheel carries is found the same way,
    by its Extension name), or None when this installation has none."""
    here = Path(__file__).resolve().parent
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = here / f"{stem}{suffix}"
        if candidate.exists():
            return candidate
    found = sorted(here.glob(f"{stem}*.so"))
    return found[0] if found else None


def _find() -> Path | None:
    return find_library("_cyclehook")


def load() -> ctypes.CDLL:
    """The loaded library (once per process). Without it nothing runs: a missing or
    unloadable one is one UnavailableError (exit 69) saying how to get it back."""
    global _lib
    if _lib is not None:
        return _lib
    path = _find()
    if path is None:
        raise UnavailableError(f"pkasim's native cycle hook (_cyclehook) is missing from {Path(__file__).parent}: "
                               "reinstall pkasim (from an sdist it needs a C compiler), or in a checkout: make setup")
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as exc:
        raise UnavailableError(f"{path}: pkasim's native cycle hook does not load ({exc}): reinstall pkasim") from None
    lib.pk_sizeof_state.restype = ctypes.c_uint32
    lib.pk_sizeof_insn.restype = ctypes.c_uint32
    lib.pk_free.argtypes = [ctypes.c_void_p]
    _declare_code(lib)
    _declare_leak(lib)
    lib.pk_access_offset.restype = ctypes.c_uint32
    lib.pk_access_offset.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    lib.pk_native_next.restype = ctypes.c_uint64
    lib.pk_native_next.argtypes = [ctypes.c_void_p]
    lib.pk_native_due.argtypes = [ctypes.c_void_p]
    lib.pk_native_changed.argtypes = [ctypes.c_void_p]
    lib.pk_sizeof_pka.restype = ctypes.c_uint32
    lib.pk_sizeof_systick.restype = ctypes.c_uint32
    lib.pk_systick_fire.argtypes = [ctypes.c_void_p]
    lib.pk_systick_write.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint, ctypes.c_uint64, ctypes.c_void_p]
    lib.pk_systick_read.restype = ctypes.c_uint64
    lib.pk_systick_read.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint, ctypes.c_void_p]
    lib.pk_sizeof_page.restype = ctypes.c_uint32
    lib.pk_pka_free_log.argtypes = [ctypes.c_void_p]
    lib.pk_next_to_take.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.pk_would_wake.argtypes = [ctypes.c_void_p]
    lib.pk_montmul.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_uint32]
    lib.pk_montmul_use_adx.argtypes = [ctypes.c_int]
    lib.pk_montmul_use_ifma.argtypes = [ctypes.c_int]
    lib.pk_verdicts_forget.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32]
    if (lib.pk_sizeof_state() != ctypes.sizeof(PkState) or lib.pk_sizeof_insn() != ctypes.sizeof(Insn)
            or lib.pk_sizeof_page() != ctypes.sizeof(PageState)
            or (lib.pk_leak_classes(), lib.pk_leak_terms()) != (len(LEAK_CLASSES), len(LEAK_TERMS))):
        raise PkasimError(f"{path.name} does not match this pkasim (state size {lib.pk_sizeof_state()} != "
                          f"{ctypes.sizeof(PkState)}): rebuild with 'pip install -e .'")
    _lib = lib
    return lib
