"""Host files for semihosting: the one directory the user grants, and open files.

Firmware names files with whatever bytes it likes; pkasim lets it touch only what
lies inside the directory given with ``--host-dir``. A name is refused before any
host call when it is empty (ENOENT), absolute or has a ``..`` component (EACCES), and
after resolving symbolic links when the real path leaves the directory (EACCES). With
no directory granted, every host name is refused with EACCES. Only regular files are
served: a FIFO, device or socket inside the directory is refused (EACCES) without
being opened for real (an open of a FIFO with no writer would wait for ever, and no
cycle budget can stop a host call).

Errors are raised as :class:`HostError` carrying the *host* errno (Python's
:mod:`errno` numbers); the semihosting layer converts them to the guest's numbers.
"""

from __future__ import annotations

import errno
import io
import os
import stat
from pathlib import Path

MAX_NAME = 1024  # bytes; a longer guest name is ENAMETOOLONG without a host call
CHUNK = 64 * 1024  # bytes moved per host read or write

# SYS_OPEN modes 0-11 are fopen's r, rb, r+, r+b, w, wb, w+, w+b, a, ab, a+, a+b.
_W, _CT, _CA = os.O_WRONLY, os.O_CREAT | os.O_TRUNC, os.O_CREAT | os.O_APPEND
MODE_FLAGS = (
    os.O_RDONLY, os.O_RDONLY, os.O_RDWR, os.O_RDWR,
    _W | _CT, _W | _CT, os.O_RDWR | _CT, os.O_RDWR | _CT,
    _W | _CA, _W | _CA, os.O_RDWR | _CA, os.O_RDWR | _CA,
)
MODE_NAMES = ("r", "rb", "r+", "r+b", "w", "wb", "w+", "w+b", "a", "ab", "a+", "a+b")


class HostError(Exception):
    """A refused or failed host operation: ``errno`` is the host's number, ``why`` a log line."""

    def __init__(self, host_errno: int, why: str, *, warn: bool = False) -> None:
        super().__init__(why)
        self.errno = host_errno
        self.why = why
        self.warn = warn  # a guest mistake or a refusal the user should see, not a plain failure


class HostDir:
    """The directory firmware files live in; every name is checked against it."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(os.path.realpath(root))
        self._root_bytes = os.fsencode(self.root)

    def resolve(self, name: bytes) -> bytes:
        """The host path of guest ``name``, or HostError if it is not allowed."""
        if not name:
            raise HostError(errno.ENOENT, "empty file name")
        if len(name) > MAX_NAME:
            raise HostError(errno.ENAMETOOLONG, f"name longer than {MAX_NAME} bytes")
        if b"\0" in name:
            raise HostError(errno.EINVAL, "name contains a NUL byte")
        if name.startswith(b"/"):
            raise HostError(errno.EACCES, "absolute names are refused (only names inside --host-dir)", warn=True)
        if b".." in name.split(b"/"):
            raise HostError(errno.EACCES, "'..' is refused (only names inside --host-dir)", warn=True)
        path = os.path.join(self._root_bytes, name)
        real = os.path.realpath(path)
        if real != self._root_bytes and not real.startswith(self._root_bytes + b"/"):
            raise HostError(errno.EACCES, "a symbolic link leads outside --host-dir", warn=True)
        return path

    def open(self, name: bytes, mode: int) -> HostFile:
        """Open guest ``name`` in SYS_OPEN ``mode``: a regular file (created by the
        writing modes), never a directory (EISDIR) or a special file (EACCES)."""
        path = self.resolve(name)
        flags = MODE_FLAGS[mode]
        try:
            _refuse_special(os.stat(path).st_mode)  # before the open: O_TRUNC must not touch a device
        except FileNotFoundError:
            pass  # created below, or ENOENT from the open itself
        except OSError as exc:
            raise HostError(exc.errno or errno.EIO, exc.strerror or "cannot open") from None
        try:
            # O_NONBLOCK: should a FIFO appear between the check and the open, the open
            # returns at once (and is refused below) instead of waiting for a writer.
            fd = os.open(path, flags | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as exc:
            raise HostError(exc.errno or errno.EIO, exc.strerror or "cannot open") from None
        try:
            _refuse_special(os.fstat(fd).st_mode)
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        access = flags & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
        fmode = {os.O_RDONLY: "rb", os.O_WRONLY: "wb", os.O_RDWR: "r+b"}[access]
        return HostFile(io.FileIO(fd, fmode, closefd=True), name)

    def remove(self, name: bytes) -> None:
        path = self.resolve(name)
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                raise HostError(errno.EISDIR, "is a directory")
            os.remove(path)
        except OSError as exc:
            raise HostError(exc.errno or errno.EIO, exc.strerror or "cannot remove") from None

    def rename(self, old: bytes, new: bytes) -> None:
        src, dst = self.resolve(old), self.resolve(new)
        try:
            os.rename(src, dst)
        except OSError as exc:
            raise HostError(exc.errno or errno.EIO, exc.strerror or "cannot rename") from None


def _refuse_special(mode: int) -> None:
    """HostError for what is not a regular file: EISDIR for a directory, EACCES (logged)
    for a FIFO, device or socket."""
    if stat.S_ISDIR(mode):
        raise HostError(errno.EISDIR, "is a directory")
    if not stat.S_ISREG(mode):
        what = ("a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
        raise HostError(errno.EACCES, f"{what}: only regular files are served", warn=True)


class HostFile:
    """An open host file. Reads and writes go in CHUNK pieces, so a guest length never
    sizes a host allocation."""

    def __init__(self, file: io.FileIO, name: bytes) -> None:
        self.file = file
        self.name = name

    @property
    def readable(self) -> bool:
        return self.file.readable()

    @property
    def writable(self) -> bool:
        return self.file.writable()

    def read(self, n: int) -> bytes:
        try:
            return self.file.read(min(n, CHUNK)) or b""
        except OSError as exc:
            raise HostError(exc.errno or errno.EIO, exc.strerror or "read failed") from None

    def write(self, data: bytes) -> int:
        try:
            return self.file.write(data) or 0
        except OSError as exc:
            raise HostError(exc.errno or errno.EIO, exc.strerror or "write failed") from None

    def seek(self, pos: int) -> None:
        try:
            self.file.seek(pos)
        except OSError as exc:
            raise HostError(exc.errno or errno.EIO, exc.strerror or "seek failed") from None

    def length(self) -> int:
        return os.fstat(self.file.fileno()).st_size

    def close(self) -> None:
        self.file.close()


class StaticFile:
    """A read-only file held in memory (the ``:semihosting-features`` magic file)."""

    readable = True
    writable = False

    def __init__(self, data: bytes, name: bytes) -> None:
        self.data = data
        self.name = name
        self.pos = 0

    def read(self, n: int) -> bytes:
        out = self.data[self.pos:self.pos + min(n, CHUNK)]
        self.pos += len(out)
        return out

    def write(self, data: bytes) -> int:
        raise HostError(errno.EBADF, "read-only file")

    def seek(self, pos: int) -> None:
        self.pos = pos

    def length(self) -> int:
        return len(self.data)

    def close(self) -> None:
        pass


class ConsoleFile:
    """A handle SYS_OPEN gave for ``:tt``: the console stream it reads or writes
    (STDIN 0, STDOUT 1, STDERR 2). The semihosting layer does the I/O; this only
    holds the handle's place among the open files."""

    def __init__(self, stream: int) -> None:
        self.stream = stream
        self.name = b":tt"
        self.readable = stream == 0
        self.writable = stream != 0

    def close(self) -> None:
        pass
