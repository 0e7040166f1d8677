"""The CPU's leakage: the native instruction hook of ``emulator/native/leakage.c``.

One ``CpuLeakage`` lives on one machine. Built, it installs the hook over the whole
address space (Unicorn then calls it before every instruction of blocks translated
afterwards, so the translated blocks are flushed once: unicorn issue #2200); disarmed,
the hook returns at once. ``arm`` points it at a window of cycles and a sample buffer;
``disarm`` finishes the last instruction. A machine that never traces power has no
such hook and pays nothing.
"""

from __future__ import annotations

import ctypes

import numpy as np
from unicorn import UC_HOOK_CODE

from pkasim.chip.power import CPU_CLASSES, CPU_TERMS, PowerConfig
from pkasim.core.machine import Machine

WARM_CYCLES = 256  # the buses are followed from this many cycles before the window


class CpuLeakage:
    """The instruction hook of one machine, with the chip's CPU weights."""

    def __init__(self, machine: Machine, power: PowerConfig) -> None:
        self.machine = machine
        core = machine.core
        self._lib = core.lib
        weights = (ctypes.c_double * (len(CPU_CLASSES) * len(CPU_TERMS)))(*power.cpu_table())
        ptr = self._lib.pk_leak_new(ctypes.addressof(core.state), weights, machine.config.core.muls_cycles)
        if not ptr:
            raise MemoryError("out of host memory for the leakage model")
        self.ptr = ctypes.c_void_p(ptr)
        self._hook = core.add_native_hook(UC_HOOK_CODE, self._lib.pk_leak_hook, 1, 0, self.ptr)
        core.uc.ctl_flush_tb()  # blocks translated before the hook existed would not call it
        self._samples: np.ndarray | None = None
        self._pcs: np.ndarray | None = None

    def arm(self, lo: int, hi: int, samples: np.ndarray, pcs: np.ndarray | None = None) -> None:
        """Add the leakage of every instruction that starts at a cycle in [lo, hi) to
        ``samples[cycle - lo]`` (float64, hi - lo long) and, with ``pcs`` (uint32),
        write each instruction's address over the cycles it takes."""
        if samples.dtype != np.float64 or not samples.flags.c_contiguous or len(samples) < hi - lo:
            raise ValueError("samples: a contiguous float64 array of hi - lo values")
        if pcs is not None and (pcs.dtype != np.uint32 or not pcs.flags.c_contiguous or len(pcs) < hi - lo):
            raise ValueError("pcs: a contiguous uint32 array of hi - lo values")
        self._samples, self._pcs = samples, pcs  # kept alive while the hook writes there
        self._lib.pk_leak_arm(self.ptr, lo, hi, WARM_CYCLES, samples.ctypes.data,
                              pcs.ctypes.data if pcs is not None else None)

    def disarm(self) -> int:
        """Finish the last instruction (after the run stopped); the instructions recorded."""
        count = int(self._lib.pk_leak_disarm(self.ptr))
        self._samples = self._pcs = None
        return count

    @property
    def digest(self) -> int:
        """A hash of (cycle, address) of the instructions recorded: two runs that executed
        the same instructions at the same cycles of the window have the same digest."""
        return int(self._lib.pk_leak_digest(self.ptr))

    @property
    def done(self) -> bool:
        """An instruction at or after the window's end has been seen."""
        return bool(self._lib.pk_leak_done(self.ptr))

    def forget_code(self) -> None:
        """The code may have changed: decode the instructions again."""
        self._lib.pk_leak_forget(self.ptr)

    def close(self) -> None:
        """Remove the hook and free the native state (the machine runs on without it)."""
        if not self.ptr:
            return
        core = self.machine.core
        core.remove_native_hook(self._hook)
        core.uc.ctl_flush_tb()
        self._lib.pk_leak_free(self.ptr)
        self.ptr = ctypes.c_void_p()
