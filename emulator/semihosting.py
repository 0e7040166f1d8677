"""ARM semihosting (BKPT 0xAB): the firmware's console and its way to end a run.

Implements the calls a bare-metal C runtime makes (ARM "Semihosting for AArch32 and
AArch64", version 2.0): console output, exit with a code, and the time calls, which
answer in modeled time. Anything else returns -1 and is logged as unimplemented.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

log = logging.getLogger("pkasim.unimp")
guest = logging.getLogger("pkasim.guest")

SYS_OPEN = 0x01
SYS_CLOSE = 0x02
SYS_WRITEC = 0x03
SYS_WRITE0 = 0x04
SYS_WRITE = 0x05
SYS_READ = 0x06
SYS_ISTTY = 0x09
SYS_CLOCK = 0x10
SYS_TIME = 0x11
SYS_ERRNO = 0x13
SYS_HEAPINFO = 0x16
SYS_EXIT = 0x18
SYS_EXIT_EXTENDED = 0x20
SYS_ELAPSED = 0x30
SYS_TICKFREQ = 0x31

ADP_STOPPED_APPLICATION_EXIT = 0x20026
MAX_STRING = 1 << 16  # a SYS_WRITE0 without a terminator stops here, with a warning

STDIN, STDOUT, STDERR = 0, 1, 2


@dataclass
class Exit:
    """The firmware asked to stop; ``code`` is its process exit code."""

    code: int


class Semihosting:
    """Serves one call; the memory and clock are given as functions (no CPU access)."""

    def __init__(self, read: Callable[[int, int], bytes], write: Callable[[int, bytes], None],
                 cycles: Callable[[], int], hz: int, stdout: BinaryIO, stderr: BinaryIO) -> None:
        self._read = read
        self._write = write
        self._cycles = cycles
        self._hz = hz
        self.streams = {STDOUT: stdout, STDERR: stderr}
        self.calls = 0

    def _word(self, addr: int) -> int:
        return int.from_bytes(self._read(addr, 4), "little")

    def _out(self, handle: int, data: bytes) -> bool:
        stream = self.streams.get(handle)
        if stream is None:
            return False
        stream.write(data)
        stream.flush()
        return True

    def call(self, op: int, arg: int) -> int | Exit:
        """Perform operation ``op`` with parameter ``arg`` (r1); returns r0 or an Exit."""
        self.calls += 1
        if op == SYS_WRITEC:
            self._out(STDOUT, self._read(arg, 1))
            return 0
        if op == SYS_WRITE0:
            self._out(STDOUT, self._cstring(arg))
            return 0
        if op == SYS_WRITE:
            handle, ptr, length = (self._word(arg + 4 * i) for i in range(3))
            if not self._out(handle, self._read(ptr, length) if length else b""):
                guest.warning("semihosting SYS_WRITE to unknown handle %d", handle)
                return length
            return 0
        if op == SYS_OPEN:
            name_ptr, mode, length = (self._word(arg + 4 * i) for i in range(3))
            name = self._read(name_ptr, length)
            if name == b":tt":
                return STDIN if mode < 4 else STDOUT if mode < 8 else STDERR
            log.warning("semihosting SYS_OPEN of %r: host files are not served", name.decode(errors="replace"))
            return -1
        if op == SYS_CLOSE:
            return 0
        if op == SYS_ISTTY:
            return 1
        if op == SYS_READ:
            _, _, length = (self._word(arg + 4 * i) for i in range(3))
            return length  # no input: nothing read
        if op == SYS_CLOCK:
            return self._cycles() * 100 // self._hz
        if op == SYS_TIME:
            return self._cycles() // self._hz
        if op == SYS_ERRNO:
            return 0
        if op == SYS_HEAPINFO:
            self._write(self._word(arg), bytes(16))
            return 0
        if op == SYS_ELAPSED:
            self._write(arg, self._cycles().to_bytes(8, "little"))
            return 0
        if op == SYS_TICKFREQ:
            return self._hz
        if op == SYS_EXIT:
            return Exit(0 if arg == ADP_STOPPED_APPLICATION_EXIT else 1)
        if op == SYS_EXIT_EXTENDED:
            reason, code = self._word(arg), self._word(arg + 4)
            if reason != ADP_STOPPED_APPLICATION_EXIT:
                return Exit(1)
            return Exit(code & 0xFF)
        log.warning("semihosting operation 0x%02x is not implemented", op)
        return -1

    def _cstring(self, addr: int) -> bytes:
        out = bytearray()
        while len(out) < MAX_STRING:
            at = addr + len(out)
            chunk = self._read(at, min(64, 0x400 - (at & 0x3FF)))  # stay inside one 1 KiB page
            end = chunk.find(b"\0")
            if end >= 0:
                return bytes(out + chunk[:end])
            out += chunk
        guest.warning("semihosting SYS_WRITE0 string at 0x%08x has no terminator", addr)
        return bytes(out)
