"""The bus interface every device model implements, and the IRQ line it is given."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from pkasim.chip.config import PeripheralConfig

guest_log = logging.getLogger("pkasim.guest")  # the firmware did something wrong
unimp_log = logging.getLogger("pkasim.unimp")  # the model does not implement this


class IrqLine:
    """A wire from a device to the NVIC: the device sets it pending, nothing more."""

    def __init__(self, pend: Callable[[], None], name: str) -> None:
        self._pend = pend
        self.name = name

    def pulse(self) -> None:
        self._pend()


class NativeWindow(NamedTuple):
    """A device's native fast path: C read/write callbacks for its register window
    (Unicorn's uc_cb_mmio_read_t/write_t), the state record they are given, and the
    names of the C functions that give its next timed event and fire it (pkstate.h's
    pk_device), which the machine lists among the devices with native events."""

    read: Any
    write: Any
    state: int  # address of the device's state record
    next_fn: str
    due_fn: str


class SharedWindow(NamedTuple):
    """A device's native path in a page it shares with other devices (the System
    Control Space): C read/write callbacks for its window and the state record they are
    given (sharedpage.c calls them for the window's offsets)."""

    read: Any
    write: Any
    state: int  # address of the device's state record


class Peripheral:
    """A memory-mapped device: a register window, read and written by offset.

    ``size`` is the window in bytes; the bus calls read/write with an offset inside it
    and the access size in bytes (1, 2 or 4). Registers the model does not implement
    read as zero and ignore writes, and say so on the ``pkasim.unimp`` logger.
    """

    name: str = "peripheral"
    size: int = 0
    # Set by the machine while a run is observed (emulator/core/observe.py, docs/api.md):
    # called as observer(kind, a, b, cycle); the device reports through _observe().
    observer: Callable[[int, int, int, int | None], None] | None = None

    def __init__(self, name: str, base: int) -> None:
        self.name = name
        self.base = base

    @classmethod
    def window(cls, pc: PeripheralConfig) -> int:
        """Bytes of address space the instance ``pc`` describes will answer. The chip
        description is checked against it before anything is built, so no two devices
        (or a device and memory) ever claim the same address."""
        return cls.size

    def reset(self) -> None:
        """Put registers in their reset state."""

    def read(self, offset: int, size: int) -> int:
        unimp_log.warning("%s: read of unimplemented offset 0x%03x", self.name, offset)
        return 0

    def write(self, offset: int, size: int, value: int) -> None:
        unimp_log.warning("%s: write of unimplemented offset 0x%03x = 0x%x", self.name, offset, value)

    def word_only(self, offset: int, size: int, what: str = "register") -> bool:
        """ARMv6-M system registers take word accesses only; log and refuse others."""
        if size != 4:
            guest_log.warning("%s: %d-byte access to %s at offset 0x%03x (word only)", self.name, size, what, offset)
            return False
        return True

    def debug_read(self, offset: int, size: int) -> bytes:
        """Bytes as a debugger sees them: no side effects (COUNTFLAG, busy errors...).
        Registers read as zero here; models with memory behind them override this."""
        return bytes(size)

    def debug_write(self, offset: int, data: bytes) -> bool:
        """A debugger write without side effects; False if the model does not take it."""
        return False

    def _observe(self, kind: int, a: int = 0, b: int = 0, cycle: int | None = None) -> None:
        """Report an event (an ``pkasim.core.observe.Kind``) at ``cycle`` (default: now);
        free when nothing observes."""
        if self.observer is not None:
            self.observer(kind, a, b, cycle)

    def snapshot(self) -> dict[str, int]:
        """Register values for reports and the debugger (name -> value)."""
        return {}

    def stats(self) -> dict:
        """Activity counters for the JSON summary (empty: nothing to report)."""
        return {}

    def summary_lines(self) -> list[tuple[str, str]]:
        """(label, text) rows for the human run summary."""
        return []
