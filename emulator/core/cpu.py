"""The CPU: a Unicorn Cortex-M0 engine, its registers, and the native hook's state.

Everything else (the bus, the exception model, the run loop) reaches the engine
through this object, so there is one place that knows Unicorn's register ids and the
fast path around the binding's ``reg_read`` (several microseconds a call).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Protocol

from unicorn import (
    UC_ARCH_ARM,
    UC_CTL_IO_WRITE,
    UC_CTL_TB_REMOVE_CACHE,
    UC_CTL_TLB_FLUSH,
    UC_HOOK_TLB_FILL,
    UC_MODE_MCLASS,
    UC_MODE_THUMB,
    UC_TLB_VIRTUAL,
    Uc,
    UcError,
)
from unicorn import arm_const as A
from unicorn.unicorn_py3 import unicorn as _ucmod

from pkasim import native
from pkasim.base.errors import UsageError
from pkasim.native import engine

engine.select()  # which Unicorn library this process runs on, before any engine is opened

REG_IDS = [getattr(A, f"UC_ARM_REG_R{i}") for i in range(13)] + [A.UC_ARM_REG_SP, A.UC_ARM_REG_LR, A.UC_ARM_REG_PC]
REG_NAMES = [f"r{i}" for i in range(13)] + ["sp", "lr", "pc"]
SPECIAL_REGS = {"xpsr": A.UC_ARM_REG_XPSR, "primask": A.UC_ARM_REG_PRIMASK, "control": A.UC_ARM_REG_CONTROL,
                "msp": A.UC_ARM_REG_MSP, "psp": A.UC_ARM_REG_PSP, "ipsr": A.UC_ARM_REG_IPSR,
                "apsr": A.UC_ARM_REG_APSR}
NO_DEADLINE = (1 << 64) - 1


class CodeStore(Protocol):
    """What the core needs of the code cache (core/codecache.py builds it): forgetting
    every decoded block on reset. A protocol, so the CPU does not import the cache
    that itself drives the CPU."""

    def clear(self) -> None: ...


class Core:
    """One ARMv6-M core: the engine, the native cycle state, and register access."""

    def __init__(self) -> None:
        engine.require()
        self.lib = native.load()
        self.state = native.PkState()
        self.state.ring[:] = [native.RING_EMPTY] * native.RING  # no block start yet
        self.state.probe_at = native.PK_NONE  # no call probe (Machine.probe_call)
        self.state_ref = ctypes.byref(self.state)
        uc = Uc(UC_ARCH_ARM, UC_MODE_THUMB | UC_MODE_MCLASS)
        uc.ctl_set_cpu_model(A.UC_CPU_ARM_CORTEX_M0)
        self.uc = uc
        self.uch = uc._uch
        # uc_ctl(UC_CTL_TB_REMOVE_CACHE) from the call probe's entry mark (cyclehook.c probe_mark)
        self.state.uc_ctl = ctypes.cast(_ucmod.uclib.uc_ctl, ctypes.c_void_p).value
        self.state.ctl_remove_cache = (UC_CTL_IO_WRITE << 30) | (2 << 26) | UC_CTL_TB_REMOVE_CACHE
        self._reg_read = _ucmod.uclib.uc_reg_read
        self._reg_write = _ucmod.uclib.uc_reg_write
        self._rbuf, self._wbuf = ctypes.c_uint32(), ctypes.c_uint32()
        self._rbuf_ref, self._wbuf_ref = ctypes.byref(self._rbuf), ctypes.byref(self._wbuf)
        self.sleeping = False  # the core is in WFI (or slept on exit) until an exception wakes it
        self.fast_paths = True  # native exception entry/return, WFI, idle loops and device paths
        self._native_hooks: list[ctypes.c_size_t] = []
        self.obs = None  # the native observer (pkasim.core.observe.Observation) while something observes
        self.flash_reads = None  # the stock wheel's flash data reads with wait states (core/flashreads.py)
        self.mem_hooks: dict[object, tuple[int, int]] = {}  # data memory hooks placed: [lo, hi] by key
        self.mem_hook_listeners: list[Callable[[], None]] = []  # told when mem_hooks changes
        self.code: CodeStore | None = None  # the native code cache (the machine builds it)
        self.on_free: list[Callable[[], None]] = []  # native memory of the machine's parts, freed with it

    def observe(self, kind: int, a: int = 0, b: int = 0, cycle: int | None = None) -> None:
        """An event for the observation API (emulator/core/observe.py); nothing when nothing observes."""
        if self.obs is not None:
            self.obs.emit(kind, self.cycles if cycle is None else cycle, a, b)

    def free(self) -> None:
        """Release native memory when the machine goes; nothing runs on it after this."""
        if self.state is not None:
            self.lib.pk_free(ctypes.byref(self.state))
            self.state.wwin = None
        while self.on_free:
            self.on_free.pop()()

    # ------------------------------------------------------------------ registers
    def rd(self, regid: int) -> int:
        """A 32-bit register, straight from the engine."""
        self._reg_read(self.uch, regid, self._rbuf_ref)
        return self._rbuf.value

    def wr(self, regid: int, value: int) -> None:
        self._wbuf.value = value & 0xFFFFFFFF
        self._reg_write(self.uch, regid, self._wbuf_ref)

    @staticmethod
    def reg_id(name: str) -> int:
        name = name.lower()
        if name in REG_NAMES:
            return REG_IDS[REG_NAMES.index(name)]
        if name in SPECIAL_REGS:
            return SPECIAL_REGS[name]
        raise UsageError(f"no register named '{name}'")

    def reg(self, name: str) -> int:
        return self.rd(self.reg_id(name))

    def set_reg(self, name: str, value: int) -> None:
        if name.lower() == "pc":
            self.set_pc(value)
            self.drop_block()
            self.state.prev_valid = 0
        else:
            self.wr(self.reg_id(name), value)

    def registers(self) -> dict[str, int]:
        regs = {n: self.rd(r) for n, r in zip(REG_NAMES, REG_IDS)}
        for extra in ("xpsr", "primask", "control", "msp", "psp"):
            regs[extra] = self.rd(SPECIAL_REGS[extra])
        return regs

    @property
    def pc(self) -> int:
        return self.rd(A.UC_ARM_REG_PC) & ~1

    def set_pc(self, value: int) -> None:
        self.wr(A.UC_ARM_REG_PC, value | 1)

    def primask(self) -> bool:
        return bool(self.rd(A.UC_ARM_REG_PRIMASK) & 1)

    def active_exception(self) -> int:
        return self.rd(A.UC_ARM_REG_IPSR) & 0x3F

    # ------------------------------------------------------------------ counters
    @property
    def cycles(self) -> int:
        return int(self.state.cycles)

    @property
    def instructions(self) -> int:
        return int(self.state.insns)

    # ------------------------------------------------------------------ native hooks
    def add_native_hook(self, kind: int, fn: ctypes._CFuncPtr, begin: int, end: int,
                        user_data: ctypes.c_void_p | None = None) -> ctypes.c_size_t:
        """Install a C function as a Unicorn hook (no Python call when it fires)."""
        handle = ctypes.c_size_t()
        data = user_data if user_data is not None else ctypes.cast(ctypes.byref(self.state), ctypes.c_void_p)
        err = _ucmod.uclib.uc_hook_add(
            self.uch, ctypes.byref(handle), kind, ctypes.cast(fn, ctypes.c_void_p),
            data, ctypes.c_uint64(begin), ctypes.c_uint64(end),
        )
        if err:
            raise UcError(err)
        self._native_hooks.append(handle)
        return handle

    def remove_native_hook(self, handle: ctypes.c_size_t) -> None:
        """Delete a hook ``add_native_hook`` installed (its handle as returned)."""
        _ucmod.uclib.uc_hook_del(self.uch, handle)
        if handle in self._native_hooks:
            self._native_hooks.remove(handle)

    def drop_block(self) -> None:
        """Forget the executing block's record (it will not be committed): not valid,
        and its cost and instructions 0, since on pkasim's engine the generated code
        adds those at the next block start without testing the valid word
        (cyclehook.c pk_drop_block, docs/engine.md)."""
        s = self.state
        s.cur_valid = 0
        s.cur_cost = 0
        s.cur_insns = 0

    def memory_hook_placed(self, key: object, on: bool, lo: int = 0, hi: int = 0xFFFFFFFF) -> None:
        """A memory hook over [lo, hi] was added (``on``) or deleted, under ``key``:
        while one covers flash, its data reads reach flash itself, where the hook sees
        them (core/flashreads.py), and watched pages are no longer sent to a window
        (core/watchpoints.py): that hook would see the window's address."""
        if on:
            self.mem_hooks[key] = (lo, hi)
        elif self.mem_hooks.pop(key, None) is None:
            return
        for listener in list(self.mem_hook_listeners):
            listener()

    def count_blocks(self, pending: int | None = None) -> None:
        """Counted mode (pkasim's engine, docs/engine.md): the engine's generated code
        commits each block's cycles and instructions and records the next block
        (cyclehook.c pk_block_cost says what, at translation); the native hook
        (pk_block_hook_counted) runs only where the cycle count reaches ``limit``
        or the block asks for it.

        ``pending``: the address of the NVIC's 64-bit pending word. A block that may
        unmask interrupts (CPSIE, MSR) then asks for the hook after it only while an
        exception is pending (patch 31): one that becomes pending later sets the
        limit to 0 itself (``pk_pend``, ``RunLoop.request_check``)."""
        s = self.state
        s.counted = 1
        s.limit = s.limit_inline = 0
        s.span_lo, s.span_hi = 0xFFFFFFFF, 0
        at = [ctypes.addressof(s) + getattr(native.PkState, name).offset
              for name in ("cycles", "insns", "limit", "cur_valid", "span_lo", "ring", "ring_pos", "limit_inline")]
        acct = native.BlockAccount(
            *at[:7],
            ctypes.cast(self.lib.pk_block_cost, ctypes.c_void_p).value,
            ctypes.cast(self.lib.pk_block_hook_counted, ctypes.c_void_p).value,
            ctypes.addressof(s),
            at[7],
            pending)
        fn = _ucmod.uclib.uc_block_account_set
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        err = fn(self.uch, ctypes.byref(acct))
        if err:
            raise UcError(err)

    def find_small_hooks_inline(self, max_bytes: int) -> bool:
        """pkasim's engine (patch 12): memory hooks over at most ``max_bytes`` bytes (a
        watchpoint, a small code write watch) are found by an address test in each
        access's generated code, as a core's watchpoint unit would, instead of sending
        every access to their pages through the slow path. Same hook calls. False
        where the engine cannot (another host): the hooks then slow their pages."""
        fn = _ucmod.uclib.uc_mem_hook_inline_set
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
        return fn(self.uch, max_bytes) == 0

    def count_reads(self, begin: int, last: int, cost: int) -> bool:
        """pkasim's engine (patch 10): every data load from [begin, last] adds ``cost``
        to the cycle count in the generated code, no hook called, the same loads a
        memory hook there would see. False when the range does not suit it (its
        start not a multiple of 8): the caller installs the hook instead."""
        if begin % 8:
            return False
        fn = _ucmod.uclib.uc_mem_read_cost_set
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_void_p]
        err = fn(self.uch, begin, last, cost, ctypes.addressof(self.state) + native.PkState.cycles.offset)
        if err:
            raise UcError(err)
        return True

    def use_own_tlb(self) -> None:
        """Fill the engine's TLB natively (tlb.c): data pages without execute
        permission, so that stores to RAM take the engine's fast path (the engine
        sends every store to an executable page through its slow helper). Needs the
        code cache (``self.code``), which records the pages code is fetched from."""
        self.uc.ctl_set_tlb_mode(UC_TLB_VIRTUAL)
        self.state.tlb_page = self.uc.ctl_get_page_size()
        self.add_native_hook(UC_HOOK_TLB_FILL, self.lib.pk_tlb_fill, 1, 0)
        self.flush_tlb()

    def flush_tlb(self) -> None:
        """Forget every TLB entry: pages are filled again (with the permissions
        tlb.c gives them now) on their next access."""
        err = _ucmod.uclib.uc_ctl(self.uch, ctypes.c_int((UC_CTL_IO_WRITE << 30) | UC_CTL_TLB_FLUSH))
        if err:
            raise UcError(err)

    def flush_translations(self) -> None:
        """Forget every translated block and every cached block cost (a new image)."""
        if self.code is not None:
            self.code.clear()
        self.uc.ctl_flush_tb()


class Now:
    """The cycle count the clock reads: the committed count, plus the cycles already
    spent in the current block while a peripheral access is being served."""

    def __init__(self, state: native.PkState) -> None:
        self.state = state
        self.offset = 0

    @property
    def cycles(self) -> int:
        return int(self.state.cycles) + self.offset

    @cycles.setter
    def cycles(self, value: int) -> None:
        self.state.cycles = value - self.offset
