"""The grid: every combination of a sweep's axes, each point with its chip resolved.

A chip axis value becomes an overlay laid over the sweep's base chip (in the order
the axes are written), as ``extends:`` lays a what-if chip over its base:

* ``preset`` (or ``preset_NAME``): an overlay file such as configs/presets/*.yaml;
  null for none. The file's own ``extends:`` is dropped, its differences applied.
* ``pka.maxlen``: generated. A multiplier taking operands of this many bits:
  ``max_words`` = bits / 32 and ``ram_size`` = twelve such operands (the xRSA
  layout's count), which gives the CIU98320B's 3 KiB at 2048 and
  configs/native4096.yaml's 6 KiB at 4096. The firmware reads MAXLEN and RAMSIZE
  and picks xRSA or the native 4096-bit path itself (docs/xrsa.md).
* any other dotted key sets that chip key; ``pka.X`` is short for
  ``peripherals.pka.X`` (a name that is not a chip file section is a peripheral).
"""

from __future__ import annotations

import io
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pkasim.base import limits
from pkasim.base.errors import ConfigError, PkasimError
from pkasim.chip.config import ChipConfig, load_layered, read_bounded
from pkasim.sweep.spec import CHIP_SECTIONS, Sweep

OPERANDS_IN_RAM = 12  # xRSA's PKA RAM layout: twelve operands of the multiplier's width


@dataclass(frozen=True)
class Chip:
    """One resolved chip of the grid: the config and its description as plain values."""

    config: ChipConfig
    description: Any
    labels: tuple[tuple[str, Any], ...]

    @property
    def max_words(self) -> int:
        pka = self.config.peripherals.get("pka")
        return int(pka.params.get("max_words", 0)) if pka is not None else 0


@dataclass(frozen=True)
class Point:
    index: int
    chip: Chip
    firmware: str
    image: Path
    key_bits: int
    key: int
    message: int
    ecc_job: str = ""  # an ECC point: pkasim bench's ECC job it runs (key_bits is then 256)

    @property
    def algorithm(self) -> str:
        """What the RSA firmware runs here; it decides from MAXLEN alone (firmware/src/rsa.c).
        An ECC point's algorithm is its job (p256-sign, x25519, ...)."""
        if self.ecc_job:
            return self.ecc_job
        if self.key_bits == 2048:
            return "CRT" if self.chip.max_words >= 32 else "none"
        return "native" if self.chip.max_words >= 128 else "xRSA"

    def labels(self) -> dict[str, Any]:
        """The point's axis values, as result columns."""
        out: dict[str, Any] = {"point": self.index, "firmware": self.firmware, "key_bits": self.key_bits,
                               "key": self.key, "message": self.message}
        out.update(self.chip.labels)
        out["algorithm"] = self.algorithm
        out["clock_hz"] = self.chip.config.core.clock_hz
        return out


def _nested(path: str, value: Any) -> dict[str, Any]:
    parts = path.split(".")
    if parts[0] not in CHIP_SECTIONS:
        parts = ["peripherals", *parts]
    out: Any = value
    for part in reversed(parts):
        out = {part: out}
    return out


def overlay(sweep: Sweep, axis: str, value: Any) -> tuple[str, str] | None:
    """The overlay (YAML text, source for errors) one axis value lays over the chip."""
    where = f"{sweep.source}: axes.chip.{axis}={value}"
    if axis == "preset" or axis.startswith("preset_"):
        if value is None:
            return None
        path = sweep.resolve(value)
        try:
            data = read_bounded(path)
        except OSError as exc:
            raise ConfigError(f"{sweep.source}: axes.chip.{axis}: cannot read {path} "
                              f"({exc.strerror or exc})") from None
        if len(data) > limits.CONFIG_MAX_BYTES:
            raise ConfigError(f"{sweep.source}: axes.chip.{axis}: {path} is larger than "
                              f"{limits.CONFIG_MAX_BYTES >> 20} MiB; a chip overlay is a few KiB")
        try:
            return data.decode("utf-8"), str(path)
        except UnicodeDecodeError:
            raise ConfigError(f"{path}: not UTF-8 text") from None
    if axis == "pka.maxlen":
        tree = {"peripherals": {"pka": {"max_words": value // 32, "ram_size": OPERANDS_IN_RAM * value // 8}}}
    else:
        tree = _nested(axis, value)
    return yaml.safe_dump(tree), where


def _label(value: Any) -> Any:
    """A column value: numbers and strings as they are, null as 'none', lists as text."""
    if value is None:
        return "none"
    if isinstance(value, (bool, int, float, str)):
        return value
    return yaml.safe_dump(value, default_flow_style=True).strip()


def chips(sweep: Sweep) -> list[Chip]:
    """Every chip of the grid, resolved and checked (a bad value fails before any run)."""
    out = []
    names = [a.name for a in sweep.chip_axes]
    for combo in itertools.product(*(a.values for a in sweep.chip_axes)):
        layers = [o for o in (overlay(sweep, n, v) for n, v in zip(names, combo)) if o is not None]
        config, description = load_layered(sweep.chip, layers)
        _check_models(config, names, combo)
        out.append(Chip(config, description, tuple((n, _label(v)) for n, v in zip(names, combo))))
    return out


def _check_models(config: ChipConfig, names: list[str], combo: tuple) -> None:
    """The peripheral models check their own parameters when built: build them now,
    so a bad width is one line before the sweep starts, not a failed point."""
    from pkasim.core.machine import Machine

    try:
        Machine(config, stdout=io.BytesIO(), stderr=io.BytesIO())
    except PkasimError as exc:
        at = ", ".join(f"{n}={v}" for n, v in zip(names, combo))
        raise ConfigError(f"sweep point with {at}: {exc}") from None


def expand(sweep: Sweep) -> list[Point]:
    """The points in a fixed order: chip combinations outermost, then firmware, key
    size, key, message; then the curve jobs (one point each: their inputs are the
    bench's fixed ones, and the constant-time firmware takes the same cycles for any)."""
    ecc = {}
    if sweep.curve_jobs:
        from pkasim.ecc.bench import ECC_JOBS

        ecc = {j.key: j for j in ECC_JOBS}
    points = []
    for chip in chips(sweep):
        for fw in sweep.firmware:
            image = Path(fw) if Path(fw).is_absolute() else sweep.build_dir / fw
            for bits in sweep.key_bits:
                for key in range(sweep.keys):
                    for msg in range(sweep.messages):
                        points.append(Point(len(points), chip, fw, image, bits, key, msg))
        for name in sweep.curve_jobs:
            job = ecc[name]
            points.append(Point(len(points), chip, job.image, sweep.build_dir / job.image, 256, 0, 0, name))
    return points
