"""TRNG: a true random number generator, with pkasim's register interface (docs/trng.md).

Interface
  MMIO window  base + 0x00-0x1F (word access only; a byte or halfword access is logged on
               ``pkasim.guest`` and ignored, reads 0):

               | offset | name   | access | reset | fields                                        |
               |--------|--------|--------|-------|-----------------------------------------------|
               | 0x00   | CR     | RW     | 0     | EN [0], IE [1], RESEED [2] (write 1; reads 0)  |
               | 0x04   | SR     | RO     | 0     | DRDY [0], BUSY [1] (reseeding), HTF [2]       |
               |        |        |        |       | (health test failed), HTFI [3] (HTF rose, W1C |
               |        |        |        |       | through SR_CLR)                               |
               | 0x08   | DR     | RO     | 0     | the next 32-bit random word; reading it takes |
               |        |        |        |       | it (DRDY falls)                               |
               | 0x0C   | SR_CLR | W1C    | -     | HTFI [3]: write 1 to clear                    |
               | 0x10   | COUNT  | RO     | 0     | words delivered since the last (re)seed       |
               | 0x14   | RESEEDS| RO     | 0     | reseeds since reset                           |

  IRQ output   one line, pulsed when DRDY rises or HTFI rises while CR.IE = 1 (optional:
               firmware may poll SR instead).
  Clock input  the core clock: a word is ready ``word_cycles`` cycles after EN is set or
               after DR was read (the entropy source's rate); a reseed keeps BUSY = 1 for
               ``reseed_cycles`` cycles. One event at a time on the Clock.
  Seed         the output is a deterministic stream: word i after the r-th reseed is the
               first four bytes (little-endian) of SHA-256("pkasim-trng" || seed || r || i),
               ``seed`` from the chip file (default 1) or ``pkasim run --seed N``, so every
               run of an image gives the same "random" numbers and its cycles repeat.
  Health test  the NIST SP 800-90B 4.4.1 repetition count test on the delivered words:
               a word equal to the one before it fails it (a stuck source). Then HTF and
               HTFI rise, DRDY stays 0 and no word comes until the firmware reseeds
               (CR.RESEED); the reseed clears HTF. ``fail_after`` (a what-if, default off)
               makes the source stick after that many words, so firmware can test its
               error path.
  Not modelled real entropy, the analog source, start-up tests, the adaptive proportion
               test; the word times are pkasim's choice (docs/trng.md).
"""

from __future__ import annotations

import hashlib
import reprlib
from collections.abc import Callable
from enum import IntEnum
from typing import Any

from pkasim.base.clock import Clock, Event
from pkasim.base.errors import ConfigError
from pkasim.peripherals.base import Peripheral, guest_log


class Reg(IntEnum):
    CR = 0x00
    SR = 0x04
    DR = 0x08
    SR_CLR = 0x0C
    COUNT = 0x10
    RESEEDS = 0x14


CR_EN = 1 << 0
CR_IE = 1 << 1
CR_RESEED = 1 << 2  # write 1 to reseed; never stored
CR_WRITABLE = CR_EN | CR_IE
SR_DRDY = 1 << 0
SR_BUSY = 1 << 1
SR_HTF = 1 << 2
SR_HTFI = 1 << 3
WINDOW = 0x20
PARAMS = {"seed": 1, "word_cycles": 42, "reseed_cycles": 2000, "fail_after": None}


def _param_error(name: str, key: str, problem: str) -> ConfigError:
    error = ConfigError(f"peripherals.{name}.{key}: {problem}")
    error.key = key  # the parameter, for the line number
    return error


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class Trng(Peripheral):
    """Register front end, a deterministic word stream, one timed event."""

    size = WINDOW

    def __init__(self, name: str, base: int, clock: Clock, irq: Callable[[], None], *, seed: int = 1,
                 word_cycles: int = 42, reseed_cycles: int = 2000, fail_after: int | None = None) -> None:
        super().__init__(name, base)
        for key, value, low in (("seed", seed, 0), ("word_cycles", word_cycles, 1), ("reseed_cycles", reseed_cycles, 1)):
            if not _is_int(value) or value < low:
                raise _param_error(name, key, f"expected an integer >= {low}, got {reprlib.repr(value)}")
        if fail_after is not None and (not _is_int(fail_after) or fail_after < 1):
            raise _param_error(name, "fail_after", f"expected a word count >= 1, got {reprlib.repr(fail_after)}")
        self.clock = clock
        self.irq = irq
        self.seed = seed
        self.word_cycles = word_cycles
        self.reseed_cycles = reseed_cycles
        self.fail_after = fail_after
        self._event: Event | None = None
        self.reset()

    @classmethod
    def from_config(cls, pc: Any, clock: Clock, irq: Callable[[], None]) -> Trng:
        """Build from the chip description (chip/config.py has checked the parameter
        names); a bad value raises ConfigError naming the file, the line and the key."""
        try:
            return cls(pc.name, pc.base, clock, irq, **pc.params)
        except ConfigError as exc:
            raise ConfigError(f"{pc.where(getattr(exc, 'key', ''))}: {exc}") from None

    # ------------------------------------------------------------- state
    def reset(self) -> None:
        if self._event is not None:
            self._event.cancel()
        self._event = None
        self.cr = 0
        self.drdy = False
        self.busy = False
        self.htf = False
        self.htfi = False
        self.word = 0
        self.last: int | None = None  # the word delivered before (the repetition count test)
        self.count = 0  # words delivered since the last (re)seed
        self.reseeds = 0
        self.delivered = 0  # words read through DR since reset
        self._irq_sources = 0

    def set_seed(self, seed: int) -> None:
        """A new seed (``pkasim run --seed``); takes effect now, as at reset."""
        if not _is_int(seed) or seed < 0:
            raise _param_error(self.name, "seed", f"expected an integer >= 0, got {reprlib.repr(seed)}")
        self.seed = seed
        self.reset()

    def _stream_word(self) -> int:
        data = b"pkasim-trng" + self.seed.to_bytes(8, "little") + self.reseeds.to_bytes(4, "little") + \
            self.count.to_bytes(8, "little")
        word = int.from_bytes(hashlib.sha256(data).digest()[:4], "little")
        if self.fail_after is not None and self.delivered >= self.fail_after and self.last is not None:
            return self.last  # the what-if stuck source: the same word again
        return word

    def _schedule(self, cycles: int, callback: Callable[[], None]) -> None:
        if self._event is not None:
            self._event.cancel()
        self._event = self.clock.schedule(self.clock.now + cycles, callback, self.name)

    def _update_irq(self) -> None:
        """The one place the IRQ output is decided: pulse when DRDY or HTFI rises under IE."""
        sources = ((SR_DRDY if self.drdy else 0) | (SR_HTFI if self.htfi else 0)) if self.cr & CR_IE else 0
        rose = sources & ~self._irq_sources
        self._irq_sources = sources
        if rose:
            self.irq()

    def _word_ready(self) -> None:
        """The source has made a word: the health test, then DRDY."""
        self._event = None
        if not self.cr & CR_EN or self.busy or self.htf:
            return
        word = self._stream_word()
        if self.last is not None and word == self.last:
            self.htf = self.htfi = True  # SP 800-90B 4.4.1 with cutoff 2 on 32-bit words
            guest_log.info("%s: health test failed (repetition count): no words until a reseed", self.name)
        else:
            self.word = word
            self.drdy = True
        self._update_irq()

    def _reseed_done(self) -> None:
        self._event = None
        self.busy = False
        self.htf = False
        self.last = None
        self.count = 0
        if self.cr & CR_EN:
            self._schedule(self.word_cycles, self._word_ready)
        self._update_irq()

    # ------------------------------------------------------------- bus interface
    def read(self, offset: int, size: int) -> int:
        if not self.word_only(offset, size):
            return 0
        if offset == Reg.CR:
            return self.cr
        if offset == Reg.SR:
            return ((SR_DRDY if self.drdy else 0) | (SR_BUSY if self.busy else 0) | (SR_HTF if self.htf else 0)
                    | (SR_HTFI if self.htfi else 0))
        if offset == Reg.DR:
            if not self.drdy:
                guest_log.warning("%s: DR read with no word ready (reads 0)", self.name)
                return 0
            word = self.word
            self.drdy = False
            self.last = word
            self.count += 1
            self.delivered += 1
            self._schedule(self.word_cycles, self._word_ready)
            self._update_irq()
            return word
        if offset == Reg.COUNT:
            return self.count & 0xFFFFFFFF
        if offset == Reg.RESEEDS:
            return self.reseeds & 0xFFFFFFFF
        if offset == Reg.SR_CLR:
            return 0
        guest_log.warning("%s: read of reserved offset 0x%02x (reads 0)", self.name, offset)
        return 0

    def write(self, offset: int, size: int, value: int) -> None:
        if not self.word_only(offset, size):
            return
        if offset == Reg.CR:
            if value & ~(CR_WRITABLE | CR_RESEED):
                guest_log.warning("%s: CR write sets reserved bits 0x%x (ignored)", self.name,
                                  value & ~(CR_WRITABLE | CR_RESEED))
            was_on = bool(self.cr & CR_EN)
            self.cr = value & CR_WRITABLE
            if value & CR_RESEED and self.cr & CR_EN:
                self.drdy = False
                self.busy = True
                self.reseeds += 1
                self._schedule(self.reseed_cycles, self._reseed_done)
            elif not self.cr & CR_EN:
                if self._event is not None:
                    self._event.cancel()
                    self._event = None
                self.drdy = False
                self.busy = False
            elif not was_on and not self.busy:
                self._schedule(self.word_cycles, self._word_ready)
            self._update_irq()
        elif offset == Reg.SR_CLR:
            if value & SR_HTFI:
                self.htfi = False
                self._update_irq()
        elif offset in (Reg.SR, Reg.DR, Reg.COUNT, Reg.RESEEDS):
            guest_log.warning("%s: %s is read-only (write of 0x%x ignored)", self.name, Reg(offset).name, value)
        else:
            guest_log.warning("%s: write of reserved offset 0x%02x = 0x%x (ignored)", self.name, offset, value)

    # ------------------------------------------------------------- reports
    def snapshot(self) -> dict[str, int]:
        return {"CR": self.cr, "SR": self.read(Reg.SR, 4), "COUNT": self.count, "RESEEDS": self.reseeds}

    def stats(self) -> dict:
        return {"words": self.delivered, "reseeds": self.reseeds, "health_failures": int(self.htf),
                "seed": self.seed}

    def summary_lines(self) -> list[tuple[str, str]]:
        if not self.delivered and not self.reseeds:
            return []
        text = f"{self.delivered:,} words, {self.reseeds:,} reseeds, seed {self.seed}"
        if self.htf:
            text += "; health test FAILED"
        return [("TRNG", text)]
