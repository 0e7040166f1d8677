"""A sweep file: its schema, read through the chip files' bounded YAML reader.

    name: RSA-4096 at 10 ops/s              # a title for the summary and plots
    chip: ../ciu98320b.yaml                 # the base chip (default: the default chip)
    build_dir: ../../firmware/build         # where images are found (default: the bundled images)
    axes:
      firmware: [xrsa_opt.elf]              # images (names in build_dir, or paths)
      key_bits: [2048, 4096]
      keys: 2                               # random keys per key size (keys.py)
      messages: 1                           # random messages per key
      curve_jobs: [p256-sign, x25519]       # ECC operations (pkasim bench's ECC job names)
      chip:                                 # chip overlays, in this order
        pka.maxlen: [2048, 4096]            # generated: max_words and ram_size
        pka.digit_bits: [32, 64, 128]       # any chip key; pka.X means peripherals.pka.X
        preset: [null, ../presets/fdfm-radix17.yaml]   # an overlay file (null: none)
    metrics: [cycles, ms, ops_per_s, pka_ops, busy_share]
    functions: [mont_exp]                   # per-function cycles from the profiler
    goal: {key_bits: 4096, ops_per_s: 10}   # the summary names the first width reaching it
    plot: {x: pka.digit_bits}               # the width axis of the plots

Paths are relative to the sweep file. The grid is the product of every axis. Every
mistake is one ConfigError (exit 78) naming the file and the key.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pkasim.base import resources
from pkasim.base.errors import ConfigError
from pkasim.chip.config import DEFAULT_CONFIG, load_yaml
from pkasim.rsa.bench import BUILD_DIR

METRICS = ("cycles", "instructions", "ms", "ops_per_s", "pka_ops", "busy_share", "firmware_ms")
DEFAULT_METRICS = ("cycles", "ms", "ops_per_s", "pka_ops", "busy_share")
KEY_BITS = (2048, 4096)  # the sizes the RSA firmware takes (firmware/src/rsa.h)
MAX_COUNT = 1000  # keys or messages per point: more is a typo, not a sweep
MAX_POINTS = 100_000
COLUMN_INT = (-(1 << 63), (1 << 63) - 1)  # a chip axis value is a column of the results table (Parquet int64)
TOP_KEYS = ("name", "chip", "build_dir", "axes", "metrics", "functions", "goal", "plot")
AXIS_KEYS = ("firmware", "key_bits", "keys", "messages", "curve_jobs", "chip")
CHIP_SECTIONS = ("chip", "core", "memory", "peripherals")


@dataclass(frozen=True)
class ChipAxis:
    """One chip overlay axis: its name as written (a column of the results) and values."""

    name: str
    values: tuple[Any, ...]


@dataclass(frozen=True)
class Sweep:
    source: str
    name: str
    chip: Path
    build_dir: Path
    firmware: tuple[str, ...]
    key_bits: tuple[int, ...]
    keys: int
    messages: int
    chip_axes: tuple[ChipAxis, ...]
    metrics: tuple[str, ...]
    functions: tuple[str, ...]
    goal: dict[str, Any] = field(default_factory=dict)
    plot_x: str | None = None
    curve_jobs: tuple[str, ...] = ()  # ECC operations (pkasim.ecc.bench.ECC_JOBS keys), one point per chip each

    def resolve(self, text: str) -> Path:
        """A path written in the sweep file, relative to the file."""
        path = Path(text)
        return path if path.is_absolute() else Path(self.source).parent / path


def _fail(source: str, key: str, problem: str) -> ConfigError:
    return ConfigError(f"{source}: {key}: {problem}")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}...({len(text)} characters)"


def _list(source: str, key: str, value: Any, default: Any = None) -> list[Any]:
    if value is None:
        if default is None:
            raise _fail(source, key, "required")
        return list(default)
    if not isinstance(value, list):
        value = [value]
    if not value:
        raise _fail(source, key, "an empty list makes an empty grid")
    return value


def _count(source: str, key: str, value: Any) -> int:
    if value is None:
        return 1
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_COUNT:
        raise _fail(source, key, f"expected a count 1..{MAX_COUNT}, got {_shown(value)}")
    return value


def _name(source: str, key: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise _fail(source, key, f"expected a non-empty string, got {_shown(value)}")
    return value


def _chip_axes(source: str, value: Any) -> tuple[ChipAxis, ...]:
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise _fail(source, "axes.chip", f"expected a mapping of chip keys to lists of values, got {_shown(value)}")
    axes = []
    for name, values in value.items():
        key = f"axes.chip.{name}"
        if not isinstance(name, str) or not all(part.isidentifier() for part in name.split(".")):
            raise _fail(source, "axes.chip", f"{_shown(name)} is not a dotted chip key such as pka.max_words")
        values = _list(source, key, values)
        if name == "preset" or name.startswith("preset_"):
            for v in values:
                if v is not None and not (isinstance(v, str) and v):
                    raise _fail(source, key, f"expected the path of an overlay file or null, got {_shown(v)}")
        elif name == "pka.maxlen":
            for v in values:
                if isinstance(v, bool) or not isinstance(v, int) or v <= 0 or v % 32 or v > 4096:
                    raise _fail(source, key, f"expected a width in bits, a multiple of 32 up to 4096, got {_shown(v)}")
        for v in values:
            if isinstance(v, int) and not isinstance(v, bool) and not COLUMN_INT[0] <= v <= COLUMN_INT[1]:
                raise _fail(source, key, f"{_shown(v)} does not fit a 64-bit column of the results (and no chip "
                                         "value is that large)")
            if isinstance(v, float) and not math.isfinite(v):
                raise _fail(source, key, f"expected a finite value, got {_shown(v)}")
        if len(set(map(repr, values))) != len(values):
            raise _fail(source, key, "a value is listed twice")
        axes.append(ChipAxis(name, tuple(values)))
    return tuple(axes)


def _curve_jobs(source: str, value: Any) -> tuple[str, ...]:
    """The ECC jobs of ``axes.curve_jobs``: names of pkasim bench's ECC jobs."""
    from pkasim.ecc.bench import ECC_JOBS

    if value is None:
        return ()
    known = [j.key for j in ECC_JOBS]
    jobs = _list(source, "axes.curve_jobs", value)
    for job in jobs:
        if job not in known:
            raise _fail(source, "axes.curve_jobs", f"unknown ECC job {_shown(job)} (known: {', '.join(known)})")
    if len(set(jobs)) != len(jobs):
        raise _fail(source, "axes.curve_jobs", "a value is listed twice")
    return tuple(jobs)


def read_sweep(path: str | Path) -> Sweep:
    """Read and check a sweep file (a path, or a bundled sweep's name such as
    ``sweeps/rsa4096-10ops``); ConfigError (exit 78) or InputMissingError (66)."""
    path = resources.resolve_sweep(path)
    source = str(path)
    doc = load_yaml(path)
    if not isinstance(doc, dict):
        raise ConfigError(f"{source}: top level: expected a mapping (name, chip, axes, metrics...)")
    for key in doc:
        if key not in TOP_KEYS:
            raise _fail(source, str(key), f"unknown key (known: {', '.join(TOP_KEYS)})")
    here = Path(source).parent

    def path_of(key: str, default: Path) -> Path:
        value = doc.get(key)
        if value is None:
            return default
        text = _name(source, key, value)
        p = Path(text)
        return p if p.is_absolute() else here / p

    axes = doc.get("axes")
    if not isinstance(axes, dict):
        raise _fail(source, "axes", f"required: a mapping with {', '.join(AXIS_KEYS)}")
    for key in axes:
        if key not in AXIS_KEYS:
            raise _fail(source, f"axes.{key}", f"unknown axis (known: {', '.join(AXIS_KEYS)})")
    curve_jobs = _curve_jobs(source, axes.get("curve_jobs"))
    if axes.get("firmware") is None and curve_jobs:
        firmware: tuple[str, ...] = ()  # only ECC points
    else:
        firmware = tuple(_name(source, "axes.firmware", v) for v in _list(source, "axes.firmware", axes.get("firmware")))
    key_bits = tuple(_list(source, "axes.key_bits", axes.get("key_bits"), KEY_BITS))
    for bits in key_bits:
        if isinstance(bits, bool) or not isinstance(bits, int) or bits not in KEY_BITS:  # 2048.0 is not a size
            raise _fail(source, "axes.key_bits", f"expected {' or '.join(map(str, KEY_BITS))}, got {_shown(bits)}")
    metrics = tuple(_list(source, "metrics", doc.get("metrics"), DEFAULT_METRICS))
    for m in metrics:
        if m not in METRICS:
            raise _fail(source, "metrics", f"unknown metric {_shown(m)} (known: {', '.join(METRICS)})")
    raw_functions = doc.get("functions")
    if raw_functions is None:
        raw_functions = []
    elif isinstance(raw_functions, str):
        raw_functions = [raw_functions]
    elif not isinstance(raw_functions, list):
        raise _fail(source, "functions", f"expected a list of function names, got {_shown(raw_functions)}")
    functions = tuple(_name(source, "functions", f) for f in raw_functions)
    goal = doc.get("goal") or {}
    if not isinstance(goal, dict) or set(goal) - {"key_bits", "ops_per_s"} or (goal and "ops_per_s" not in goal):
        raise _fail(source, "goal", "expected {ops_per_s: N} and optionally key_bits")
    target = goal.get("ops_per_s", 1)
    if isinstance(target, bool) or not isinstance(target, (int, float)) or not 0 < target < math.inf:
        raise _fail(source, "goal.ops_per_s", f"expected a positive number, got {_shown(target)}")
    goal_bits = goal.get("key_bits", KEY_BITS[0])
    if isinstance(goal_bits, bool) or not isinstance(goal_bits, int) or goal_bits not in KEY_BITS:
        raise _fail(source, "goal.key_bits", f"expected {' or '.join(map(str, KEY_BITS))}, got {_shown(goal_bits)}")
    chip_axes = _chip_axes(source, axes.get("chip"))
    plot = doc.get("plot") or {}
    if not isinstance(plot, dict) or set(plot) - {"x"}:
        raise _fail(source, "plot", "expected {x: AXIS}")
    plot_x = plot.get("x")
    if plot_x is not None and (not isinstance(plot_x, str) or plot_x not in {a.name for a in chip_axes}):
        raise _fail(source, "plot.x", f"{_shown(plot_x)} is not one of the chip axes")
    if plot_x is None:
        numeric = [a.name for a in chip_axes if all(isinstance(v, int) and not isinstance(v, bool) for v in a.values)]
        plot_x = numeric[-1] if numeric else None
    sweep = Sweep(
        source=source, name=_name(source, "name", doc.get("name", Path(source).stem)),
        chip=path_of("chip", DEFAULT_CONFIG), build_dir=path_of("build_dir", BUILD_DIR),
        firmware=firmware, key_bits=key_bits, keys=_count(source, "axes.keys", axes.get("keys")),
        messages=_count(source, "axes.messages", axes.get("messages")), chip_axes=chip_axes,
        metrics=metrics, functions=functions, goal=goal, plot_x=plot_x, curve_jobs=curve_jobs,
    )
    total = len(firmware) * len(key_bits) * sweep.keys * sweep.messages + len(curve_jobs)
    for axis in chip_axes:
        total *= len(axis.values)
    if total > MAX_POINTS:
        raise _fail(source, "axes", f"{total:,} points; at most {MAX_POINTS:,} in one sweep")
    return sweep
