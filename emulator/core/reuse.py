"""Loaded machines kept for the next run of the same image on the same chip.

A new ``Machine`` is a new Unicorn engine, which translates every block of the
firmware again on its first run: on RSA-2048 (fixed window) 410 blocks at about
5.7 us each, 2.3 ms of a 5.0 ms run (docs/performance.md). A workload that runs one
image many times in a process (bench jobs that share an image, a sweep's points)
keeps here the loaded machine and a snapshot (``pkasim.core.snapshot``) taken right
after the load. The next run of the same chip and image restores that snapshot,
which leaves the engine's translations in place, instead of building and loading a
new machine. The model is deterministic and the snapshot exact, so the run's
figures are those of a new machine; only the host time differs.

What a restore alone would not put back is put back here:

* flash: a snapshot leaves it out (the core cannot write it), but the host can:
  ``write_symbol`` stores an initialised variable's new value at its load address in
  flash too. Flash bytes that differ from the image as loaded are written back
  (through ``write_memory``, so code cached from them is dropped);
* the semihosting host (its open files, call count, last exit) and the console
  streams: the machine gets new, empty ones, as a new machine has.

A machine is reused only when nothing that decides its state changed:

* the chip: equal (``==``, every field, nested) to a copy taken when the machine was
  built, so a description changed in place is another chip;
* the image: the same file (device and inode, the path as given) with the same size,
  mtime and ctime as when its bytes were read; and while those times are within
  ``RACY_NS`` of the last read of its bytes, the digest of its bytes is compared
  again (a file rewritten within one tick of the file system's clock keeps its
  times: git's "racily clean" rule). So an image rebuilt in place is loaded afresh;
* the machine: it comes back with the breakpoints, watchpoints, observers and
  switches it had after the load, and its run did not raise. A caller that attaches
  an observer builds its own machine (an observer changes the machine).

A machine is checked out while it runs: another thread asking for the same pair then
gets a new one. At most ``size`` pairs are kept, the least recently used dropped.
"""

from __future__ import annotations

import copy
import ctypes
import hashlib
import io
import os
import stat
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pkasim.chip.config import ChipConfig
from pkasim.chip.loader import load_image_bytes
from pkasim.core.machine import Machine
from pkasim.core.snapshot import LogArchive, Snapshot, capture, differences, restore

RACY_NS = 2_000_000_000  # file times this close to the last read of the bytes are not trusted alone (FAT: 2 s)


def _stamp(info: os.stat_result) -> tuple[int, int, int, int, int]:
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns


def _setup(m: Machine) -> tuple:
    """What a caller may have changed on the machine that a restore does not put back."""
    return (frozenset(m.breakpoints), len(m.watchpoints), m.core.obs is None, len(m._insn_hooks),
            m.fast_paths, m.debugger_attached, m.watchpoint_stop)


@dataclass
class _Entry:
    path: str  # as given
    config: ChipConfig  # a deep copy, taken when the machine was built
    stamp: tuple[int, int, int, int, int] | None
    digest: bytes
    verified_ns: int  # the wall clock just before the file's bytes were last read and found equal
    machine: Machine
    snapshot: Snapshot
    flash: bytes  # the flash as loaded
    setup: tuple


class LoadedMachines:
    """The loaded machines of the last ``size`` (chip, image file) pairs (see the
    module docstring); ``loaded`` lends one out for a run."""

    def __init__(self, size: int = 4) -> None:
        if size < 1:
            raise ValueError("size must be at least 1")
        self.size = size
        self._entries: list[_Entry] = []  # least recently used first
        self._lock = threading.Lock()
        self.reused = 0  # runs that restored a kept machine
        self.built = 0  # runs that built and loaded a new one

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    @contextmanager
    def loaded(self, config: ChipConfig, path: str | Path) -> Iterator[Machine]:
        """A machine with ``path`` loaded on ``config``, just as ``Machine(config)`` and
        ``load(path)`` leave it (console output goes to memory). It is kept for the next
        run of the pair when the block ends normally, and dropped when it raises."""
        entry = self._take(config, os.fspath(path))
        if entry is None:
            entry = self._build(config, os.fspath(path))
            self.built += 1
        else:
            self._reset(entry)
            self.reused += 1
        yield entry.machine  # an exception from the run leaves the entry out: never reused
        if entry.stamp is not None and _setup(entry.machine) == entry.setup:
            self._put(entry)

    def _take(self, config: ChipConfig, path: str) -> _Entry | None:
        """The kept entry for this pair, checked out (removed), if it is still valid."""
        try:
            info = os.stat(path)
        except OSError:
            return None  # the load says what is wrong
        now = _stamp(info)
        with self._lock:
            found = next((e for e in self._entries if e.path == path and e.config == config), None)
            if found is None:
                return None
            self._entries.remove(found)
        if found.stamp != now:
            return None  # rewritten, replaced or touched: dropped, loaded afresh
        if max(info.st_mtime_ns, info.st_ctime_ns) >= found.verified_ns - RACY_NS:
            started = time.time_ns()
            try:
                with open(path, "rb") as fh:
                    data = fh.read()
                    again = _stamp(os.fstat(fh.fileno()))
            except OSError:
                return None
            if again != now or hashlib.sha256(data).digest() != found.digest:
                return None
            found.verified_ns = started
        return found

    def _build(self, config: ChipConfig, path: str) -> _Entry:
        started = time.time_ns()
        image, data, info = load_image_bytes(path, config)
        m = Machine(config, stdout=io.BytesIO(), stderr=io.BytesIO())
        m.load(image)
        entry = _Entry(path=path, config=copy.deepcopy(config), stamp=_stamp(info),
                       digest=hashlib.sha256(data).digest(), verified_ns=started, machine=m,
                       snapshot=capture(m, LogArchive()), flash=_flash_bytes(m), setup=_setup(m))
        if not stat.S_ISREG(info.st_mode):
            entry.stamp = None  # not a regular file (a device): not kept
        return entry

    def _put(self, entry: _Entry) -> None:
        with self._lock:
            self._entries = [e for e in self._entries if not (e.path == entry.path and e.config == entry.config)]
            self._entries.append(entry)
            del self._entries[:-self.size]

    @staticmethod
    def _reset(entry: _Entry) -> None:
        """The kept machine as it was right after its load."""
        m = entry.machine
        flash = m.config.flash
        now = _flash_bytes(m)
        if now != entry.flash:
            for lo, hi in _changed(now, entry.flash):
                m.write_memory(flash.base + lo, entry.flash[lo:hi])
        restore(m, entry.snapshot)
        m.stdout, m.stderr = io.BytesIO(), io.BytesIO()
        m._sh = None  # a new semihosting host on first use, as on a new machine


_BLOCK = 16384


def _changed(now: bytes, old: bytes) -> list[tuple[int, int]]:
    """The [lo, hi) spans where ``now`` differs from ``old``, each from its first to its
    last differing byte (snapshot.differences, within 16 KiB blocks that differ, then
    trimmed): a span must not cover equal bytes of code, whose rewrite would drop every
    block decoded so far (pk_code_written) and the translations this module keeps."""
    out: list[tuple[int, int]] = []
    for base in range(0, len(old), _BLOCK):
        end = min(base + _BLOCK, len(old))
        if now[base:end] == old[base:end]:
            continue
        for lo, hi in differences(now[base:end], old[base:end]):
            x = int.from_bytes(now[base + lo:base + hi], "little") ^ int.from_bytes(old[base + lo:base + hi], "little")
            first, last = ((x & -x).bit_length() - 1) >> 3, (x.bit_length() - 1) >> 3
            out.append((base + lo + first, base + lo + last + 1))
    return out


def _flash_bytes(m: Machine) -> bytes:
    flash = m.config.flash
    return ctypes.string_at(m.bus.host_address(flash), flash.size)
