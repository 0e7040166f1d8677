"""Files pkasim reads from paths a user gave it: opened without blocking, refused
when they are not the kind of file expected, and read with a bound.

A path on a command line or in a sweep, suite or chip file can name anything: a
FIFO nobody writes to (``open()`` would wait for a writer for ever), /dev/zero
(``read()`` would never end), a directory, a socket. Every such read in pkasim goes
through :func:`open_input` or :func:`read_bounded`:

* the open never blocks (``O_NONBLOCK``; cleared again once the file is open);
* a directory is ``IsADirectoryError``, as ``open()`` reports it;
* where a file is expected (``streams=False``: an image, a key, a card state, a
  baseline), anything that is not a regular file is refused, naming what it is;
* where a stream will do (``streams=True``: ``--load`` data, a chip file, a script,
  a profile, a key), character devices and pipes are read too, up to the bound, so
  ``--load buf=<(head -c 64 /dev/urandom)`` works and /dev/zero is refused by size;
  a FIFO nobody has open for writing is refused, not read as empty;
* :func:`read_bounded` reads at most ``limit`` + 1 bytes: the caller refuses a
  longer input with its own message, never having read it whole.

Errors are ``OSError`` subclasses, as ``open()`` raises them, so each caller keeps
its own wording (``no such file``, ``cannot read: ...``) and exit code.
"""

from __future__ import annotations

import errno
import io
import os
import stat
from pathlib import Path
from typing import BinaryIO


class NotARegularFile(OSError):
    """A FIFO, device or socket where a regular file is expected. ``strerror`` says
    which (``not a regular file but a FIFO (named pipe)``)."""


def kind_of(mode: int) -> str:
    """What a file is, from its ``st_mode``, for messages (``a FIFO (named pipe)``)."""
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a file"


def _open(path: str | os.PathLike[str], streams: bool) -> tuple[int, int]:
    """(fd, st_mode) of ``path`` open for reading with O_NONBLOCK still set; the checks
    of :func:`open_input`."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fsdecode(path))
        if not stat.S_ISREG(mode) and not (streams and (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)
                                                        or stat.S_ISBLK(mode))):
            raise NotARegularFile(errno.EINVAL, f"not a regular file but {kind_of(mode)}", os.fsdecode(path))
    except BaseException:
        os.close(fd)
        raise
    return fd, mode


def open_input(path: str | os.PathLike[str], *, streams: bool = False) -> BinaryIO:
    """``path`` open for reading (binary).

    The open never waits for a FIFO's writer. A directory raises IsADirectoryError;
    with ``streams=False`` anything but a regular file raises NotARegularFile. Other
    failures raise the OSError ``open()`` would (FileNotFoundError, PermissionError)."""
    fd, _ = _open(path, streams)
    try:
        os.set_blocking(fd, True)
        return io.BufferedReader(io.FileIO(fd, "rb", closefd=True))
    except BaseException:
        os.close(fd)
        raise


def read_bounded(path: str | os.PathLike[str], limit: int, *, streams: bool = False) -> bytes:
    """At most ``limit`` + 1 bytes of ``path``: more than ``limit`` means the input is
    too long, and the caller says so. A FIFO (with ``streams``) whose writer is there is
    read as a pipe, waiting for its data as ``cat`` would; one with no writer at all
    is refused (NotARegularFile: nothing will ever come, and a writer that comes later
    must not find its data silently unread)."""
    fd, mode = _open(path, streams)
    with io.FileIO(fd, "rb", closefd=True) as fh:
        chunks, left = [], limit + 1
        if stat.S_ISFIFO(mode):
            try:
                first = os.read(fd, min(left, 1 << 16))
            except BlockingIOError:  # a writer, no data yet
                first = None
            if first == b"":
                raise NotARegularFile(errno.EINVAL, "a FIFO (named pipe) with no writer: nothing to read",
                                      os.fsdecode(path))
            if first:
                chunks.append(first)
                left -= len(first)
        os.set_blocking(fd, True)
        while left > 0:
            chunk = fh.read(left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)


def check_output_path(path: str | os.PathLike[str]) -> None:
    """Refuse, before any work is done, an output path that cannot be written: its
    directory is missing or not a directory, or the path is a directory. Raises the
    OSError the later write would raise (FileNotFoundError, NotADirectoryError,
    IsADirectoryError, PermissionError)."""
    p = Path(path)
    parent = p.parent
    if not parent.exists():
        raise FileNotFoundError(errno.ENOENT, f"no such directory: {parent}", os.fspath(path))
    if not parent.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, f"{parent} is not a directory", os.fspath(path))
    if p.is_dir():
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fspath(path))
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(path))


def write_atomically(path: str | os.PathLike[str], data: bytes) -> None:
    """``data`` to ``path`` through a temporary file in the same directory, renamed
    over it: a failure part-way leaves the old file as it was, never a torn one."""
    p = Path(path)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise
