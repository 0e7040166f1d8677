"""The 48 MHz oscillator trimmed against the USB host's start-of-frame (SOF).

Interface
  Input       the host's SOF, once per 1 ms frame of host time (``sof``).
  Output      the mapping between host time (nanoseconds, the USB host's clock) and
              device time (core cycles, the count the whole chip runs on):
              ``cycle_at(ns)`` and ``ns_at(cycle)``.
  Parameters  (the ``oscillator`` mapping of the chip file's usb peripheral,
              docs/usb.md "Clock"): nominal frequency (the core's ``clock_hz``),
              ``error_ppm`` (the untrimmed oscillator's error at start),
              ``trim`` (on/off), ``trim_step_ppm`` (one step of the trim register),
              ``trim_interval_ms`` (SOFs between two trim decisions),
              ``drift_ppm_per_s`` (the untrimmed error's linear drift, a warming
              chip), ``wander_ppm`` (a random walk of the error, standard deviation
              per trim interval) and ``seed`` (for that walk).
  Not modelled phase noise inside a segment, the trim register's range limit, SOF
              jitter of the host.

The trim works like a clock recovery system (STM32's CRS, the CIU98320B's own is not
public): every ``trim_interval_ms`` SOFs the hardware counts oscillator cycles since
the last decision, compares with the nominal count and moves the trim by one step
towards zero when the error exceeds half a step. In steady state the error is at
most half a step plus what the drift adds in one interval (``bound_ppm``).

Time is piecewise linear: each segment starts at (cycle, ns) and runs at a constant
frequency until the next trim decision changes it. Defaults (no error, no trim) make
one segment at exactly the nominal frequency: device time = host time.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from pkasim.base.errors import ConfigError

NS = 1_000_000_000


@dataclass
class Segment:
    cycle: int  # first cycle of the segment
    ns: float  # host time at that cycle
    hz: float  # the oscillator's frequency over the segment


OPTIONS = ("error_ppm", "trim", "trim_step_ppm", "trim_interval_ms", "drift_ppm_per_s", "wander_ppm", "seed")


class TrimmedOscillator:
    """Device cycles against host nanoseconds, with SOF trimming."""

    def __init__(self, nominal_hz: int, *, error_ppm: float = 0.0, trim: bool = False,
                 trim_step_ppm: float = 1000.0, trim_interval_ms: int = 1, drift_ppm_per_s: float = 0.0,
                 wander_ppm: float = 0.0, seed: int = 1) -> None:
        self.nominal_hz = nominal_hz
        self.error_ppm0 = float(error_ppm)
        self.trim_on = bool(trim)
        self.trim_step_ppm = float(trim_step_ppm)
        self.trim_interval_ms = int(trim_interval_ms)
        self.drift_ppm_per_s = float(drift_ppm_per_s)
        self.wander_ppm = float(wander_ppm)
        self.seed = int(seed)
        self.reset()

    @classmethod
    def from_params(cls, nominal_hz: int, params: dict[str, Any] | None, where: str) -> TrimmedOscillator:
        """Build from the chip file's ``oscillator`` mapping; a bad value is a ConfigError."""
        params = dict(params or {})
        if not isinstance(params, dict):
            raise ConfigError(f"{where}: oscillator: expected a mapping of {', '.join(OPTIONS)}")
        for key in params:
            if key not in OPTIONS:
                raise ConfigError(f"{where}: oscillator.{key}: unknown option (known: {', '.join(OPTIONS)})")
        checks = {
            "error_ppm": (float, -100_000, 100_000), "trim_step_ppm": (float, 1e-3, 100_000),
            "trim_interval_ms": (int, 1, 60_000), "drift_ppm_per_s": (float, -10_000, 10_000),
            "wander_ppm": (float, 0, 10_000), "seed": (int, 0, 2**32 - 1),
        }
        for key, (kind, low, high) in checks.items():
            if key in params:
                value = params[key]
                if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                        (kind is int and not isinstance(value, int)) or not low <= value <= high:
                    raise ConfigError(f"{where}: oscillator.{key}: expected a{'n integer' if kind is int else ' number'}"
                                      f" from {low} to {high}, got {value!r}")
        if "trim" in params and not isinstance(params["trim"], bool):
            raise ConfigError(f"{where}: oscillator.trim: expected true or false, got {params['trim']!r}")
        return cls(nominal_hz, **params)

    def reset(self) -> None:
        self._rng = random.Random(self.seed)
        self.trim_ppm = 0.0  # the trim register's correction
        self.natural_ppm = self.error_ppm0  # the untrimmed oscillator's error now
        self.segments = [Segment(0, 0.0, self._hz())]
        self.sofs = 0
        self.trims = 0
        self._last_decision_ns = 0.0
        self.worst_steady_ppm = 0.0

    def _hz(self) -> float:
        return self.nominal_hz * (1.0 + (self.natural_ppm + self.trim_ppm) * 1e-6)

    @property
    def error_ppm(self) -> float:
        """The oscillator's error now (untrimmed error plus trim)."""
        return self.natural_ppm + self.trim_ppm

    @property
    def bound_ppm(self) -> float:
        """What the trim guarantees once settled: half a step, plus one interval's drift."""
        drift = abs(self.drift_ppm_per_s) * self.trim_interval_ms / 1000
        return self.trim_step_ppm / 2 + drift + 3 * self.wander_ppm

    @property
    def identity(self) -> bool:
        """Device time is host time at the nominal frequency (the default chip)."""
        return (len(self.segments) == 1 and self.segments[0].hz == self.nominal_hz)

    # ------------------------------------------------------------- the mapping
    def _segment_of_ns(self, ns: float) -> Segment:
        for seg in reversed(self.segments):
            if seg.ns <= ns:
                return seg
        return self.segments[0]

    def _segment_of_cycle(self, cycle: int) -> Segment:
        for seg in reversed(self.segments):
            if seg.cycle <= cycle:
                return seg
        return self.segments[0]

    def cycle_at(self, ns: float) -> int:
        """The first core cycle at or after host time ``ns`` (events land on cycles)."""
        seg = self._segment_of_ns(ns)
        exact = seg.cycle + (ns - seg.ns) * seg.hz / NS
        return int(math.ceil(exact - 1e-6))  # float noise must not push a whole cycle up

    def ns_at(self, cycle: int) -> float:
        """Host time of core cycle ``cycle``."""
        seg = self._segment_of_cycle(cycle)
        return seg.ns + (cycle - seg.cycle) * NS / seg.hz

    def device_ms(self, cycles: int) -> float:
        """Cycles as the firmware sees them: at the nominal frequency."""
        return cycles * 1000 / self.nominal_hz

    # ------------------------------------------------------------- SOF
    def sof(self, ns: float) -> None:
        """The host's SOF at host time ``ns``: drift, and every interval a trim decision."""
        self.sofs += 1
        if self.sofs % self.trim_interval_ms:
            return
        dt = (ns - self._last_decision_ns) / NS
        self._last_decision_ns = ns
        changed = False
        if self.drift_ppm_per_s or self.wander_ppm:
            self.natural_ppm += self.drift_ppm_per_s * dt
            if self.wander_ppm:
                self.natural_ppm += self._rng.gauss(0.0, self.wander_ppm)
            changed = True
        if self.trim_on:
            # The hardware counted the cycles of the interval: its error is the
            # segment frequency's (the count is exact at 48 MHz to 1/48000 of a ms).
            err = self.error_ppm
            if abs(err) > self.trim_step_ppm / 2:
                self.trim_ppm -= self.trim_step_ppm if err > 0 else -self.trim_step_ppm
                self.trims += 1
                changed = True
            else:
                self.worst_steady_ppm = max(self.worst_steady_ppm, abs(err))
        if changed:
            cycle = self.cycle_at(ns)
            self.segments.append(Segment(cycle, self.ns_at(cycle), self._hz()))

    def summary(self) -> dict[str, Any]:
        return {"nominal_hz": self.nominal_hz, "error_ppm": round(self.error_ppm, 3),
                "initial_error_ppm": self.error_ppm0, "trim": self.trim_on, "trims": self.trims,
                "trim_step_ppm": self.trim_step_ppm, "bound_ppm": self.bound_ppm}
