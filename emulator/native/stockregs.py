"""The stock wheel's core registers, read in place by the native hooks.

On pkasim's engine the native hooks read r0-r14 where the CPU keeps them (patch 14,
``uc_pkasim_arm_regs``). The stock wheel has no such call, but its ``uc_reg_read`` of
r0-r14 is a plain load of ``env->regs[n]`` (Unicorn 2.1.4, qemu/target/arm/unicorn_arm.c
``reg_read``; no side effect, nothing synced first), so reading that array is the same
read without the call; its ``uc_reg_write`` of r0-r12 and LR is a plain store there too
(the native exception model writes r0-r3, r12 and LR in place, never SP). The stock hook
reads registers at almost every block start (the alignment checks), and each read
through Unicorn costs a call, a switch on the register id and the JIT-state bookkeeping
of ``uc_reg_read``.

The array is found once per engine: r0-r12, SP and LR are set to a pattern through
``uc_reg_write`` and the memory the engine handle points to is searched for it, read
through ``/proc/self/mem`` (an address that is not mapped reads as an error, never a
crash). The find is then proved with a second pattern (the array, not a copy of it,
follows every write), and the registers are put back. Where any of this fails (no
``/proc``, another layout), the hooks keep reading through ``uc_reg_read``: slower,
the same values.
"""

from __future__ import annotations

import ctypes
import os
import struct

from unicorn import arm_const as A
from unicorn.unicorn_py3 import unicorn as _ucmod

# r0-r12, SP, LR: the registers the native hooks read in place (never PC)
_IDS = [A.UC_ARM_REG_R0 + i for i in range(13)] + [A.UC_ARM_REG_SP, A.UC_ARM_REG_LR]
_HANDLE_BYTES = 4096  # the start of the engine handle (struct uc_struct): where its CPU pointer is
_CPU_BYTES = 1 << 17  # how far into the CPU object the register array may lie
_FIRST = [0x5A3C0000 + 0x1111 * i for i in range(len(_IDS))]
_SECOND = [v ^ 0xFFFF0004 for v in _FIRST]  # (SP keeps bits [1:0] clear either way)


def _reg(uch: ctypes.c_void_p, regid: int) -> int:
    value = ctypes.c_uint32()
    _ucmod.uclib.uc_reg_read(uch, regid, ctypes.byref(value))
    return value.value


def _set(uch: ctypes.c_void_p, values: list[int]) -> None:
    for regid, v in zip(_IDS, values):
        _ucmod.uclib.uc_reg_write(uch, regid, ctypes.byref(ctypes.c_uint32(v)))


def _search(fd: int, handle: int, pattern: bytes) -> int | None:
    """The address of ``pattern`` (word aligned) in an object a pointer of the
    handle's first bytes points to, or None."""
    try:
        head = os.pread(fd, _HANDLE_BYTES, handle)
    except OSError:
        return None
    for off in range(0, len(head) - 7, 8):
        (ptr,) = struct.unpack_from("<Q", head, off)
        if ptr < 0x10000 or ptr & 7:
            continue  # not a pointer to an object
        try:
            blob = os.pread(fd, _CPU_BYTES, ptr)
        except OSError:
            continue
        at = blob.find(pattern)
        while at >= 0 and at & 3:
            at = blob.find(pattern, at + 1)
        if at >= 0:
            return ptr + at
    return None


def find(uch: ctypes.c_void_p) -> int | None:
    """The address of the engine's r0-r14 (``uch``: an open engine on the stock
    wheel, its registers read and written as usual meanwhile and left as they were),
    or None when it cannot be found and proved."""
    if ctypes.sizeof(ctypes.c_void_p) != 8 or not os.path.exists("/proc/self/mem"):
        return None
    saved = [_reg(uch, r) for r in _IDS]
    found = None
    try:
        _set(uch, _FIRST)
        fd = os.open("/proc/self/mem", os.O_RDONLY)
        try:
            found = _search(fd, uch.value, struct.pack(f"<{len(_IDS)}I", *_FIRST))
        finally:
            os.close(fd)
        if found is not None:
            _set(uch, _SECOND)
            regs = (ctypes.c_uint32 * len(_IDS)).from_address(found)
            if list(regs) != _SECOND or [_reg(uch, r) for r in _IDS] != _SECOND:
                found = None
    except OSError:
        found = None
    finally:
        _set(uch, saved)
    return found
