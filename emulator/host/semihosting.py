"""ARM semihosting (BKPT 0xAB): the firmware's console, files, clock, command line and exit.

pkasim is the debugger host of "Semihosting for AArch32 and AArch64", release 2.0,
for every call that makes sense for a device; docs/semihosting.md lists each call
and what pkasim does with it. In short:

* the console is pkasim's stdin, stdout and stderr (``:tt``); the
  ``:semihosting-features`` magic file offers SH_EXT_EXIT_EXTENDED and
  SH_EXT_STDOUT_STDERR, so C runtimes exit through SYS_EXIT_EXTENDED with a status;
* host files exist only inside the directory the user grants (``--host-dir``,
  :mod:`pkasim.host.hostfiles`); without one every host name is refused;
* time answers in modeled time (cycles at the core clock), so runs are repeatable;
* a failed call returns -1 and SYS_ERRNO gives the error with the guest C library's
  number (:mod:`pkasim.host.guest_errno`);
* exit codes follow QEMU: ADP_Stopped_ApplicationExit ends with the firmware's
  status (SYS_EXIT: 0), any other stop reason with 1, named in the run's message.

Guest lengths never size a host allocation: buffers must lie inside one memory
region of the chip and move in 64 KiB pieces.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

from pkasim.base.errors import UsageError
from pkasim.host.guest_errno import guest_errno
from pkasim.host.hostfiles import CHUNK, MAX_NAME, MODE_NAMES, ConsoleFile, HostDir, HostError, HostFile, StaticFile

log = logging.getLogger("pkasim.unimp")
guest = logging.getLogger("pkasim.guest")
trace = logging.getLogger("pkasim.semihosting")

SYS_OPEN = 0x01
SYS_CLOSE = 0x02
SYS_WRITEC = 0x03
SYS_WRITE0 = 0x04
SYS_WRITE = 0x05
SYS_READ = 0x06
SYS_READC = 0x07
SYS_ISERROR = 0x08
SYS_ISTTY = 0x09
SYS_SEEK = 0x0A
SYS_FLEN = 0x0C
SYS_TMPNAM = 0x0D
SYS_REMOVE = 0x0E
SYS_RENAME = 0x0F
SYS_CLOCK = 0x10
SYS_TIME = 0x11
SYS_SYSTEM = 0x12
SYS_ERRNO = 0x13
SYS_GET_CMDLINE = 0x15
SYS_HEAPINFO = 0x16
SYS_ENTER_SVC = 0x17
SYS_EXIT = 0x18
SYS_SYNCCACHE = 0x19
SYS_EXIT_EXTENDED = 0x20
SYS_ELAPSED = 0x30
SYS_TICKFREQ = 0x31

CALL_NAMES = {
    SYS_OPEN: "SYS_OPEN", SYS_CLOSE: "SYS_CLOSE", SYS_WRITEC: "SYS_WRITEC", SYS_WRITE0: "SYS_WRITE0",
    SYS_WRITE: "SYS_WRITE", SYS_READ: "SYS_READ", SYS_READC: "SYS_READC", SYS_ISERROR: "SYS_ISERROR",
    SYS_ISTTY: "SYS_ISTTY", SYS_SEEK: "SYS_SEEK", SYS_FLEN: "SYS_FLEN", SYS_TMPNAM: "SYS_TMPNAM",
    SYS_REMOVE: "SYS_REMOVE", SYS_RENAME: "SYS_RENAME", SYS_CLOCK: "SYS_CLOCK", SYS_TIME: "SYS_TIME",
    SYS_SYSTEM: "SYS_SYSTEM", SYS_ERRNO: "SYS_ERRNO", SYS_GET_CMDLINE: "SYS_GET_CMDLINE",
    SYS_HEAPINFO: "SYS_HEAPINFO", SYS_ENTER_SVC: "angel_SWIreason_EnterSVC", SYS_EXIT: "SYS_EXIT",
    SYS_SYNCCACHE: "SYS_SYNCCACHE", SYS_EXIT_EXTENDED: "SYS_EXIT_EXTENDED", SYS_ELAPSED: "SYS_ELAPSED",
    SYS_TICKFREQ: "SYS_TICKFREQ",
}

# Calls the specification defines that a device host does not serve, and why.
NOT_SERVED = {
    SYS_SYSTEM: "firmware may not run host shell commands",
    SYS_ENTER_SVC: "there is no Supervisor mode on M-profile",
    SYS_SYNCCACHE: "AArch64 only, and the core has no caches",
}

ADP_STOPPED_APPLICATION_EXIT = 0x20026
ADP_STOP_REASONS = {
    0x20000: "ADP_Stopped_BranchThroughZero",
    0x20001: "ADP_Stopped_UndefinedInstr",
    0x20002: "ADP_Stopped_SoftwareInterrupt",
    0x20003: "ADP_Stopped_PrefetchAbort",
    0x20004: "ADP_Stopped_DataAbort",
    0x20005: "ADP_Stopped_AddressException",
    0x20006: "ADP_Stopped_IRQ",
    0x20007: "ADP_Stopped_FIQ",
    0x20020: "ADP_Stopped_BreakPoint",
    0x20021: "ADP_Stopped_WatchPoint",
    0x20022: "ADP_Stopped_StepComplete",
    0x20023: "ADP_Stopped_RunTimeErrorUnknown",
    0x20024: "ADP_Stopped_InternalError",
    0x20025: "ADP_Stopped_UserInterruption",
    0x20026: "ADP_Stopped_ApplicationExit",
    0x20027: "ADP_Stopped_StackOverflow",
    0x20028: "ADP_Stopped_DivisionByZero",
    0x20029: "ADP_Stopped_OSSpecific",
}
# newlib's rdimon passes the signal as the subcode of a non-exit stop (abort(): SIGABRT).
SIGNALS = {2: "SIGINT", 4: "SIGILL", 6: "SIGABRT", 8: "SIGFPE", 11: "SIGSEGV", 15: "SIGTERM"}

SH_EXT_EXIT_EXTENDED = 1 << 0
SH_EXT_STDOUT_STDERR = 1 << 1
FEATURES = b"SHFB" + bytes([SH_EXT_EXIT_EXTENDED | SH_EXT_STDOUT_STDERR])

STDIN, STDOUT, STDERR = 0, 1, 2
CONSOLE = (STDIN, STDOUT, STDERR)  # open from the start, for firmware that writes to 1 and 2 without SYS_OPEN
MAX_OPEN = 64  # handles SYS_OPEN gives out at once (files, the features file, the console)
FLEN_MAX = 0x7FFFFFFF  # SYS_FLEN answers in a signed 32-bit word: a longer file is EOVERFLOW
MAX_STRING = 1 << 16  # a SYS_WRITE0 without a terminator stops here, with a warning


def _ram(region: Any) -> bool:
    """Whether the CPU can store to a memory region (flash is read-only to it)."""
    return bool(region.writable) and region.name != "flash"


def call_name(op: int) -> str:
    """``SYS_OPEN`` for 0x01; a call the specification does not define by its number."""
    return CALL_NAMES.get(op, f"undefined semihosting call 0x{op:02x}")


def stop_reason_name(reason: int) -> str:
    return ADP_STOP_REASONS.get(reason, f"unknown stop reason 0x{reason:x}")


@dataclass
class Exit:
    """The firmware asked to stop. ``code`` is the process exit code (0-255); ``reason``
    the ADP stop reason; ``subcode`` SYS_EXIT_EXTENDED's second word (None for SYS_EXIT)."""

    code: int
    reason: int = ADP_STOPPED_APPLICATION_EXIT
    subcode: int | None = None

    @property
    def normal(self) -> bool:
        """True for ADP_Stopped_ApplicationExit (exit() or a return from main)."""
        return self.reason == ADP_STOPPED_APPLICATION_EXIT

    def describe(self) -> str:
        if self.normal:
            if self.subcode is not None and self.subcode != self.code:
                signed = self.subcode - (1 << 32) if self.subcode & 0x80000000 else self.subcode
                return f"firmware exited with code {signed} (process exit code {self.code})"
            return f"firmware exited with code {self.code}"
        name = stop_reason_name(self.reason)
        signal = SIGNALS.get(self.subcode) if self.subcode is not None else None
        if signal == "SIGABRT":
            return f"firmware aborted: {name}, SIGABRT (exit code {self.code})"
        detail = f", {signal}" if signal else (f", subcode {self.subcode}" if self.subcode is not None else "")
        return f"firmware stopped: {name}{detail} (exit code {self.code})"


def join_command_line(argv: Sequence[str | bytes]) -> bytes:
    """One command line from argv, quoted the way newlib's crt0 splits it: words at
    spaces, a word in double (or single) quotes may hold spaces. picolibc splits at
    every space and so sees quoted words as several. Words are passed as the bytes the
    host gave them (``os.fsencode``): an argument or path that is not UTF-8 reaches
    the firmware unchanged."""
    words = []
    for arg in argv:
        raw = os.fsencode(arg)
        if raw and not any(c in raw for c in b" \t\"'"):
            words.append(raw)
        elif b'"' not in raw:
            words.append(b'"' + raw + b'"')
        elif b"'" not in raw:
            words.append(b"'" + raw + b"'")
        else:
            shown = raw.decode("utf-8", "backslashreplace")
            raise UsageError(f"argument {shown!r} has both quote characters: the firmware cannot be given it")
    return b" ".join(words)


class Semihosting:
    """The host side of semihosting for one machine.

    Memory and the clock come as functions (no CPU access). ``memory`` lists the
    chip's memory regions (guest buffers must lie inside one), ``image`` returns the
    loaded image (for SYS_HEAPINFO and the default command line). Set ``argv``,
    ``host_dir`` and ``stdin`` before a run to give the firmware its command line,
    files and input.
    """

    def __init__(self, read: Callable[[int, int], bytes], write: Callable[[int, bytes], None],
                 cycles: Callable[[], int], hz: int, stdout: BinaryIO, stderr: BinaryIO, *,
                 stdin: BinaryIO | None = None, memory: Sequence[Any] = (),
                 image: Callable[[], Any] | None = None) -> None:
        self._read = read
        self._write = write
        self._cycles = cycles
        self._hz = hz
        self._image = image
        self.memory = list(memory)
        self.streams = {STDOUT: stdout, STDERR: stderr}
        self.stdin = stdin
        self._argv: list[str | bytes] | None = None
        self.host_dir: HostDir | None = None
        self.errno = 0  # the guest's errno of the last failed call (SYS_ERRNO)
        self.files: dict[int, HostFile | StaticFile | ConsoleFile] = {}
        self.last_exit: Exit | None = None
        self.calls = 0
        self._warned_no_dir = False
        self._note = ""  # the call's arguments, decoded, for the -vv trace
        self._handlers: dict[int, Callable[[int], int | Exit]] = {
            SYS_OPEN: self._open, SYS_CLOSE: self._close, SYS_WRITEC: self._writec,
            SYS_WRITE0: self._write0, SYS_WRITE: self._write_call, SYS_READ: self._read_call,
            SYS_READC: self._readc, SYS_ISERROR: self._iserror, SYS_ISTTY: self._istty,
            SYS_SEEK: self._seek, SYS_FLEN: self._flen, SYS_TMPNAM: self._tmpnam,
            SYS_REMOVE: self._remove, SYS_RENAME: self._rename, SYS_CLOCK: self._clock,
            SYS_TIME: self._time, SYS_ERRNO: self._errno, SYS_GET_CMDLINE: self._get_cmdline,
            SYS_HEAPINFO: self._heapinfo, SYS_EXIT: self._exit, SYS_EXIT_EXTENDED: self._exit_extended,
            SYS_ELAPSED: self._elapsed, SYS_TICKFREQ: self._tickfreq,
        }

    # ------------------------------------------------------------------ public
    def call(self, op: int, arg: int) -> int | Exit:
        """Perform call ``op`` with parameter ``arg`` (r1); returns r0 or an Exit."""
        self.calls += 1
        name = call_name(op)
        handler = self._handlers.get(op)
        if handler is None:
            why = NOT_SERVED.get(op, "not in the ARM semihosting specification 2.0")
            log.warning("%s (0x%02x) is not served: %s; it returns -1", name, op, why)
            self.errno = guest_errno(errno.ENOSYS)
            return -1
        self._note = ""
        try:
            result = handler(arg)
        except HostError as exc:
            self.errno = guest_errno(exc.errno)
            (guest.warning if exc.warn else trace.debug)("%s: %s (%s)", name, exc.why, errno.errorcode.get(exc.errno, exc.errno))
            return -1
        if isinstance(result, Exit):
            self.last_exit = result
            trace.debug("%s: %s", name, result.describe())
        else:
            trace.debug("%s(%s) = %d", name, self._note or f"r1=0x{arg:08x}", result)
        return result

    @property
    def argv(self) -> list[str | bytes] | None:
        """The firmware's argv (argv[0] first); None: the image's path alone."""
        return self._argv

    @argv.setter
    def argv(self, value: Sequence[str | bytes] | None) -> None:
        if value is not None:
            join_command_line(value)  # refuse an unrepresentable argument now, not mid-run
        self._argv = None if value is None else list(value)

    @property
    def cmdline(self) -> bytes:
        """The command line SYS_GET_CMDLINE answers, as bytes: ``argv``, else the
        image's path (argv[0] only), as QEMU does for ``-kernel``."""
        if self._argv is not None:
            return join_command_line(self._argv)
        image = self._image() if self._image else None
        return join_command_line([str(image.path)]) if image is not None else b""

    def heap_layout(self) -> tuple[int, int, int, int]:
        """SYS_HEAPINFO's (heap base, heap limit, stack base, stack limit), QEMU's rule
        (semihosting/arm-compat-semi.c, common_semi_find_bases): the chip's RAM is its
        largest region the CPU can store to (flash is not one, whatever its size; the
        first such region in the chip file on a tie); in it, the largest gap the
        image's sections leave (the lowest on a tie). Heap base = stack limit = the
        gap's bottom rounded up to 8 bytes, heap limit = stack base = its top rounded
        down to 8 (AAPCS: the stack pointer is 8-byte aligned at every call). All four
        are 0, which tells the C library to use its own linker symbols, as the
        specification allows, without RAM, without an image or when no aligned gap of
        8 bytes is left."""
        rams = [r for r in self.memory if _ram(r)]
        ram = max(rams, key=lambda r: r.size) if rams else None  # max() keeps the first of equals
        image = self._image() if self._image else None
        if ram is None or image is None:
            return (0, 0, 0, 0)
        used = sorted((max(s.vma, ram.base), min(s.vma + s.size, ram.end)) for s in image.sections
                      if s.size and s.vma < ram.end and s.vma + s.size > ram.base)
        best, at = (ram.base, ram.base), ram.base
        for start, end in used + [(ram.end, ram.end)]:
            if start - at > best[1] - best[0]:
                best = (at, start)
            at = max(at, end)
        base, limit = (best[0] + 7) & ~7, best[1] & ~7
        if limit - base < 8:
            return (0, 0, 0, 0)
        return (base, limit, limit, base)

    def close_files(self) -> None:
        """Close every host file the firmware left open."""
        for f in self.files.values():
            f.close()
        self.files.clear()

    # ------------------------------------------------------------------ guest memory
    def _word(self, addr: int) -> int:
        return int.from_bytes(self._bytes(addr, 4), "little")

    def _words(self, addr: int, n: int) -> list[int]:
        data = self._bytes(addr, 4 * n)
        return [int.from_bytes(data[4 * i:4 * i + 4], "little") for i in range(n)]

    def _bytes(self, addr: int, n: int) -> bytes:
        if addr + n > 1 << 32:
            raise HostError(errno.EFAULT, f"0x{addr:08x} (+{n} bytes) is past the address space", warn=True)
        try:
            return self._read(addr, n)
        except UsageError:
            raise HostError(errno.EFAULT, f"0x{addr:08x} (+{n} bytes) is not mapped", warn=True) from None

    def _store(self, addr: int, data: bytes) -> None:
        self._buffer(addr, len(data), writable=True)
        self._write(addr, data)

    def _buffer(self, addr: int, n: int, *, writable: bool) -> None:
        """Refuse (EFAULT) a guest buffer that is not inside one memory region, or, for
        data the host writes, not inside a writable one (flash is not)."""
        if n == 0:
            return
        for region in self.memory:
            if region.contains(addr, n) and (_ram(region) or not writable):
                return
        kind = "writable memory" if writable else "memory"
        raise HostError(errno.EFAULT, f"buffer 0x{addr:08x} (+{n} bytes) is not inside {kind}", warn=True)

    def _name(self, ptr: int, length: int) -> bytes:
        if length > MAX_NAME:
            raise HostError(errno.ENAMETOOLONG, f"name of {length} bytes", warn=True)
        return self._bytes(ptr, length).split(b"\0", 1)[0]

    def _cstring(self, addr: int) -> bytes:
        out = bytearray()
        while len(out) < MAX_STRING:
            at = addr + len(out)
            chunk = self._bytes(at, min(64, 0x400 - (at & 0x3FF)))  # stay inside one 1 KiB page
            end = chunk.find(b"\0")
            if end >= 0:
                return bytes(out + chunk[:end])
            out += chunk
        guest.warning("SYS_WRITE0: string at 0x%08x has no terminator in %d bytes", addr, MAX_STRING)
        return bytes(out)

    def _chunks(self, addr: int, n: int) -> Iterator[bytes]:
        for off in range(0, n, CHUNK):
            yield self._read(addr + off, min(CHUNK, n - off))

    # ------------------------------------------------------------------ console
    def console(self, data: bytes) -> None:
        """Console output the firmware made natively (SYS_WRITEC, SYS_WRITE0 kept by
        excmodel.c during a run): to stdout, as those calls write it here."""
        self._console_out(STDOUT, data)

    def _console_out(self, handle: int, data: bytes) -> None:
        stream = self.streams[handle]
        stream.write(data)
        stream.flush()

    def _stdin_read(self, n: int) -> bytes:
        """Up to n bytes of pkasim's stdin, as much as one read gives (a line on a
        terminal); b"" at end of input or with no stdin."""
        if self.stdin is None or n <= 0:
            return b""
        read1 = getattr(self.stdin, "read1", None)
        try:
            data = read1(min(n, CHUNK)) if read1 is not None else self.stdin.read(min(n, CHUNK))
        except (OSError, ValueError) as exc:  # closed, or not readable (a test harness's stdin)
            raise HostError(errno.EIO, f"cannot read pkasim's stdin: {exc}", warn=True) from None
        return data or b""

    def _file(self, handle: int) -> HostFile | StaticFile | ConsoleFile:
        f = self.files.get(handle)
        if f is None:
            raise HostError(errno.EBADF, f"handle {handle} is not open")
        return f

    def _console(self, handle: int) -> int | None:
        """The console stream (STDIN, STDOUT, STDERR) a handle writes or reads: 0, 1 and
        2 themselves, or a handle SYS_OPEN gave for ``:tt``; None for a file."""
        if handle in CONSOLE:
            return handle
        f = self.files.get(handle)
        return f.stream if isinstance(f, ConsoleFile) else None

    def _new_handle(self, f: HostFile | StaticFile | ConsoleFile) -> int:
        for handle in range(3, 3 + MAX_OPEN):
            if handle not in self.files:
                self.files[handle] = f
                return handle
        f.close()
        raise HostError(errno.EMFILE, f"more than {MAX_OPEN} files open", warn=True)

    def _dir(self, what: str) -> HostDir:
        if self.host_dir is None:
            warn = not self._warned_no_dir
            self._warned_no_dir = True
            raise HostError(errno.EACCES, f"{what}: host files are off (grant a directory with --host-dir DIR)",
                            warn=warn)
        return self.host_dir

    # ------------------------------------------------------------------ calls
    def _open(self, arg: int) -> int:
        ptr, mode, length = self._words(arg, 3)
        name = self._name(ptr, length)
        if mode >= len(MODE_NAMES):
            raise HostError(errno.EINVAL, f"mode {mode} (0-11 are fopen's modes)", warn=True)
        shown = name.decode(errors="replace")
        self._note = f"'{shown}', {MODE_NAMES[mode]}"
        if name == b":tt":  # a new nonzero handle, as QEMU gives (the specification: "a nonzero handle")
            return self._new_handle(ConsoleFile(STDIN if mode < 4 else STDOUT if mode < 8 else STDERR))
        if name == b":semihosting-features":
            if mode > 1:
                raise HostError(errno.EACCES, "the features file opens for reading only")
            return self._new_handle(StaticFile(FEATURES, name))
        host_dir = self._dir(f"'{shown}'")
        try:
            f = host_dir.open(name, mode)
        except HostError as exc:
            exc.why = f"'{shown}' ({MODE_NAMES[mode]}): {exc.why}"
            raise
        return self._new_handle(f)

    def _close(self, arg: int) -> int:
        handle = self._word(arg)
        self._note = f"handle {handle}"
        if handle in CONSOLE:
            return 0
        self._file(handle).close()
        del self.files[handle]
        return 0

    def _writec(self, arg: int) -> int:
        self._console_out(STDOUT, self._bytes(arg, 1))
        return 0

    def _write0(self, arg: int) -> int:
        self._console_out(STDOUT, self._cstring(arg))
        return 0

    def _write_call(self, arg: int) -> int:
        handle, ptr, n = self._words(arg, 3)
        self._note = f"handle {handle}, 0x{ptr:08x}, {n} bytes"
        self._buffer(ptr, n, writable=False)
        console = self._console(handle)
        if console in (STDOUT, STDERR):
            for data in self._chunks(ptr, n):
                self._console_out(console, data)
            return 0
        if console == STDIN:
            raise HostError(errno.EBADF, f"handle {handle} (stdin) is not for writing")
        f = self._file(handle)
        if not f.writable:
            raise HostError(errno.EBADF, f"handle {handle} is not open for writing")
        done = 0
        try:
            for data in self._chunks(ptr, n):
                while data:
                    k = f.write(data)
                    if k <= 0:
                        raise HostError(errno.EIO, "the host wrote nothing")
                    done += k
                    data = data[k:]
        except HostError as exc:
            self.errno = guest_errno(exc.errno)
            trace.debug("SYS_WRITE: %s after %d of %d bytes", exc.why, done, n)
        return n - done

    def _read_call(self, arg: int) -> int:
        handle, ptr, n = self._words(arg, 3)
        self._note = f"handle {handle}, 0x{ptr:08x}, {n} bytes"
        self._buffer(ptr, n, writable=True)
        console = self._console(handle)
        if console == STDIN:
            data = self._stdin_read(n)
            self._write(ptr, data)
            return n - len(data)
        if console in (STDOUT, STDERR):
            raise HostError(errno.EBADF, f"handle {handle} is not for reading")
        f = self._file(handle)
        if not f.readable:
            raise HostError(errno.EBADF, f"handle {handle} is not open for reading")
        done = 0
        while done < n:
            data = f.read(n - done)
            if not data:
                break
            self._write(ptr + done, data)
            done += len(data)
        return n - done

    def _readc(self, arg: int) -> int:
        data = self._stdin_read(1)
        return data[0] if data else -1

    def _iserror(self, arg: int) -> int:
        return 1 if self._word(arg) & 0x80000000 else 0

    def _istty(self, arg: int) -> int:
        handle = self._word(arg)
        if self._console(handle) is not None:
            return 1
        self._file(handle)
        return 0

    def _seek(self, arg: int) -> int:
        handle, pos = self._words(arg, 2)
        self._note = f"handle {handle}, {pos}"
        if self._console(handle) is not None:
            raise HostError(errno.ESPIPE, "the console has no position")
        self._file(handle).seek(pos)
        return 0

    def _flen(self, arg: int) -> int:
        handle = self._word(arg)
        self._note = f"handle {handle}"
        if self._console(handle) is not None:
            raise HostError(errno.EINVAL, "the console has no length")
        length = self._file(handle).length()
        if length > FLEN_MAX:  # as QEMU (and stat(2) for a 32-bit off_t): never a wrapped length
            raise HostError(errno.EOVERFLOW, f"the file's {length:,} bytes do not fit SYS_FLEN's signed 32-bit "
                            "answer", warn=True)
        return length

    def _tmpnam(self, arg: int) -> int:
        ptr, ident, size = self._words(arg, 3)
        self._dir("SYS_TMPNAM")
        name = f"pkasim-tmp-{ident & 0xFF:02x}".encode()
        if len(name) + 1 > size:
            raise HostError(errno.E2BIG, f"a buffer of {size} bytes cannot hold the name", warn=True)
        self._store(ptr, name + b"\0")
        return 0

    def _remove(self, arg: int) -> int:
        ptr, length = self._words(arg, 2)
        name = self._name(ptr, length)
        self._dir(f"'{name.decode(errors='replace')}'").remove(name)
        return 0

    def _rename(self, arg: int) -> int:
        old_ptr, old_len, new_ptr, new_len = self._words(arg, 4)
        old, new = self._name(old_ptr, old_len), self._name(new_ptr, new_len)
        self._dir(f"'{old.decode(errors='replace')}'").rename(old, new)
        return 0

    def _clock(self, arg: int) -> int:
        return self._cycles() * 100 // self._hz

    def _time(self, arg: int) -> int:
        return self._cycles() // self._hz

    def _errno(self, arg: int) -> int:
        return self.errno

    def _get_cmdline(self, arg: int) -> int:
        ptr, size = self._words(arg, 2)
        text = self.cmdline
        if len(text) + 1 > size:
            raise HostError(errno.E2BIG, f"the command line ({len(text)} bytes) does not fit the firmware's "
                            f"buffer of {size} bytes", warn=True)
        self._store(ptr, text + b"\0")
        self._store(arg + 4, len(text).to_bytes(4, "little"))
        return 0

    def _heapinfo(self, arg: int) -> int:
        block = self._word(arg)
        self._store(block, b"".join(v.to_bytes(4, "little") for v in self.heap_layout()))
        return 0

    def _exit(self, arg: int) -> Exit:
        return Exit(0 if arg == ADP_STOPPED_APPLICATION_EXIT else 1, arg)

    def _exit_extended(self, arg: int) -> Exit:
        reason, subcode = self._words(arg, 2)
        if reason != ADP_STOPPED_APPLICATION_EXIT:
            return Exit(1, reason, subcode)
        code = subcode & 0xFF
        if subcode and not code:
            guest.warning("SYS_EXIT_EXTENDED: exit status %d ends as process exit code 0 (its low 8 bits, as "
                          "on a POSIX host and in QEMU)", subcode)
        return Exit(code, reason, subcode)

    def _elapsed(self, arg: int) -> int:
        self._store(arg, self._cycles().to_bytes(8, "little"))
        return 0

    def _tickfreq(self, arg: int) -> int:
        return self._hz
