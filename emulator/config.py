"""Chip descriptions: load a YAML file, check it against the schema, return plain data.

A chip file reads like a platform description (Renode's .repl, QEMU's board code):
the core and its options, the memory regions, and the peripherals with their base
address and parameters. Each mistake is reported as ``file:line: key: problem`` so the
user can jump to it; nothing is silently defaulted except the keys the schema gives a
documented default.

Sizes accept integers or strings with a unit (``16 KiB``, ``320K``, ``3 KiB``);
frequencies accept integers (Hz) or ``48 MHz``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import ConfigError

DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "ciu98320b.yaml"

CORE_TYPES = {"sc000": "ARMv6-M", "cortex-m0": "ARMv6-M"}
# The parameters each peripheral model takes besides type, base and irq.
PERIPHERAL_PARAMS: dict[str, tuple[str, ...]] = {
    "systick": ("reference_clock_hz",),
    "nvic": (),
    "scb": ("cpuid",),
    "pka": ("ram_size", "max_words", "digit_bits", "timing", "strict_operands"),
}
PERIPHERAL_TYPES = tuple(PERIPHERAL_PARAMS)


@dataclass(frozen=True)
class Region:
    """One memory region: plain RAM/flash the CPU reads and writes directly."""

    name: str
    base: int
    size: int
    wait_states: int = 0
    writable: bool = True

    @property
    def end(self) -> int:
        return self.base + self.size

    def contains(self, addr: int, size: int = 1) -> bool:
        return self.base <= addr and addr + size <= self.end


@dataclass(frozen=True)
class PeripheralConfig:
    """A peripheral instance: its model type, base address and model parameters."""

    name: str
    type: str
    base: int
    params: dict[str, Any] = field(default_factory=dict)
    irq: int | str | None = None
    source: str = "<config>"
    lines: dict[str, int] = field(default_factory=dict)  # parameter -> line, for models' own checks

    def where(self, key: str) -> str:
        """``file:line`` of a parameter (or of the peripheral), for one-line errors."""
        return f"{self.source}:{self.lines.get(key, self.lines.get('', 0))}"


@dataclass(frozen=True)
class CoreConfig:
    type: str
    clock_hz: int
    muls_cycles: int
    vtor: bool
    irqs: int
    exception_entry_cycles: int
    exception_return_cycles: int


@dataclass(frozen=True)
class ChipConfig:
    """The whole chip; ``source`` is the file it came from (for messages and reports)."""

    chip: str
    core: CoreConfig
    memory: dict[str, Region]
    peripherals: dict[str, PeripheralConfig]
    source: str

    @property
    def flash(self) -> Region:
        return self.memory["flash"]

    @property
    def sram(self) -> Region:
        return self.memory["sram"]

    def region_at(self, addr: int) -> Region | None:
        for region in self.memory.values():
            if region.contains(addr):
                return region
        return None


# --------------------------------------------------------------------------- parsing

_SIZE_RE = re.compile(r"^\s*(\d+)\s*(B|K|KB|KiB|M|MB|MiB)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {None: 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20}
_FREQ_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(Hz|kHz|MHz|GHz)?\s*$", re.IGNORECASE)
_FREQ_UNITS = {None: 1, "hz": 1, "khz": 10**3, "mhz": 10**6, "ghz": 10**9}


class _Node:
    """A YAML value with the file and line it came from, so errors can point at it."""

    __slots__ = ("value", "line", "source")

    def __init__(self, value: Any, line: int, source: str = "<config>") -> None:
        self.value = value
        self.line = line
        self.source = source


def _compose(text: str, source: str) -> _Node:
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        position = getattr(exc, "position", None)  # ReaderError: a character YAML forbids
        if mark:
            where = f"{source}:{mark.line + 1}"
        elif position is not None:
            where = f"{source}:{text[:position].count(chr(10)) + 1}"
        else:
            where = source
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{where}: not valid YAML: {problem}") from None
    if root is None:
        raise ConfigError(f"{source}:1: the file is empty")
    return _wrap(root, source, "")


def _wrap(node: yaml.Node, source: str, path: str) -> _Node:
    line = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out: dict[str, _Node] = {}
        for key_node, value_node in node.value:
            key_line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode):
                raise ConfigError(f"{source}:{key_line}: {path or 'top level'}: keys must be plain names")
            key = str(key_node.value)
            full = f"{path}.{key}" if path else key
            if key in out:
                raise ConfigError(f"{source}:{key_line}: {full}: duplicate key")
            out[key] = _wrap(value_node, source, full)
        return _Node(out, line, source)
    if isinstance(node, yaml.SequenceNode):
        return _Node([_wrap(n, source, f"{path}[{i}]") for i, n in enumerate(node.value)], line, source)
    return _Node(_scalar(node, source, path), line, source)


def _scalar(node: yaml.ScalarNode, source: str, path: str) -> Any:
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_object(node, deep=True)
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{source}:{node.start_mark.line + 1}: {path or 'value'}: {problem}") from None
    finally:
        loader.dispose()


def _plain(node: _Node) -> Any:
    """A YAML subtree as plain Python values (for peripheral parameters)."""
    if isinstance(node.value, dict):
        return {k: _plain(v) for k, v in node.value.items()}
    if isinstance(node.value, list):
        return [_plain(v) for v in node.value]
    return node.value


class _Reader:
    """Reads one mapping against a schema, naming the full key path in errors."""

    def __init__(self, node: _Node, path: str, source: str) -> None:
        if not isinstance(node.value, dict):
            raise ConfigError(f"{node.source}:{node.line}: {path or 'top level'}: expected a mapping")
        self.node = node
        self.path = path
        self.source = node.source
        self.used: set[str] = set()

    def _key(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def fail(self, key: str, problem: str) -> ConfigError:
        node = self.node.value.get(key, self.node)
        return ConfigError(f"{node.source}:{node.line}: {self._key(key)}: {problem}")

    def get(self, key: str, conv: Callable[[Any], Any], default: Any = ..., ) -> Any:
        self.used.add(key)
        if key not in self.node.value:
            if default is ...:
                raise ConfigError(f"{self.source}:{self.node.line}: {self._key(key)}: required key is missing")
            return default
        raw = self.node.value[key].value
        try:
            return conv(raw)
        except (ValueError, TypeError) as exc:
            raise self.fail(key, str(exc)) from None

    def child(self, key: str) -> _Reader:
        self.used.add(key)
        if key not in self.node.value:
            raise ConfigError(f"{self.source}:{self.node.line}: {self._key(key)}: required section is missing")
        return _Reader(self.node.value[key], self._key(key), self.source)

    def keys(self) -> list[str]:
        return list(self.node.value)

    def finish(self) -> None:
        for key in self.node.value:
            if key not in self.used:
                raise self.fail(key, "unknown key")


def _int(raw: Any) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise ValueError(f"expected an integer, got {raw!r}")
    return raw


def _nonneg(raw: Any) -> int:
    value = _int(raw)
    if value < 0:
        raise ValueError(f"must not be negative, got {value}")
    return value


def _bool(raw: Any) -> bool:
    if not isinstance(raw, bool):
        raise ValueError(f"expected true or false, got {raw!r}")
    return raw


def _str(raw: Any) -> str:
    if not isinstance(raw, str) or not raw:
        raise ValueError(f"expected a non-empty string, got {raw!r}")
    return raw


def _u32(raw: Any) -> int:
    value = _int(raw)
    if not 0 <= value <= 0xFFFFFFFF:
        raise ValueError(f"expected a 32-bit value, got {raw!r}")
    return value


def _address(raw: Any) -> int:
    value = _int(raw)
    if not 0 <= value <= 0xFFFFFFFF:
        raise ValueError(f"address 0x{value:x} is outside the 32-bit address space")
    return value


def parse_size(raw: Any) -> int:
    """A byte count: an integer, or a string such as ``16 KiB`` or ``320K``."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        value = raw
    elif isinstance(raw, str) and (m := _SIZE_RE.match(raw)):
        value = int(m.group(1)) * _SIZE_UNITS[m.group(2).lower() if m.group(2) else None]
    else:
        raise ValueError(f"expected a size such as 16384 or '16 KiB', got {raw!r}")
    if value <= 0:
        raise ValueError(f"size must be positive, got {raw!r}")
    return value


def parse_frequency(raw: Any) -> int:
    """A frequency in Hz: an integer, or a string such as ``48 MHz``."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        value = raw
    elif isinstance(raw, str) and (m := _FREQ_RE.match(raw)):
        value = round(float(m.group(1)) * _FREQ_UNITS[m.group(2).lower() if m.group(2) else None])
    else:
        raise ValueError(f"expected a frequency such as 48000000 or '48 MHz', got {raw!r}")
    if value <= 0:
        raise ValueError(f"frequency must be positive, got {raw!r}")
    return value


def _choice(*allowed: Any) -> Callable[[Any], Any]:
    def conv(raw: Any) -> Any:
        if raw not in allowed:
            raise ValueError(f"must be one of {', '.join(map(str, allowed))}, got {raw!r}")
        return raw

    return conv


# --------------------------------------------------------------------------- schema

def _read_core(r: _Reader) -> CoreConfig:
    core = CoreConfig(
        type=r.get("type", _choice(*CORE_TYPES)),
        clock_hz=r.get("clock_hz", parse_frequency),
        muls_cycles=r.get("muls_cycles", _choice(1, 32), 1),
        vtor=r.get("vtor", _bool, False),
        irqs=r.get("irqs", _int, 32),
        exception_entry_cycles=r.get("exception_entry_cycles", _nonneg, 16),
        exception_return_cycles=r.get("exception_return_cycles", _nonneg, 0),
    )
    if not 1 <= core.irqs <= 32:
        raise r.fail("irqs", f"ARMv6-M supports 1 to 32 external interrupts, got {core.irqs}")
    r.finish()
    return core


def _read_region(name: str, r: _Reader) -> Region:
    region = Region(
        name=name,
        base=r.get("base", _address),
        size=r.get("size", parse_size),
        wait_states=r.get("wait_states", _nonneg, 0),
        writable=r.get("writable", _bool, True),
    )
    if region.base % 1024 or region.size % 1024:
        raise r.fail("base" if region.base % 1024 else "size",
                     "regions must be 1 KiB aligned in base and size (the emulator maps memory in 1 KiB pages)")
    if region.end > 1 << 32:
        raise r.fail("size", "region runs past the end of the 32-bit address space")
    r.finish()
    return region


def _read_peripheral(name: str, r: _Reader, irqs: int) -> PeripheralConfig:
    ptype = r.get("type", _choice(*PERIPHERAL_TYPES))
    base = r.get("base", _address)
    irq = r.get("irq", lambda v: v, None)
    if irq is not None and not (irq == "systick" or (isinstance(irq, int) and not isinstance(irq, bool) and 0 <= irq < irqs)):
        raise r.fail("irq", f"expected 'systick' or an IRQ number 0..{irqs - 1}, got {irq!r}")
    params = {}
    allowed = PERIPHERAL_PARAMS[ptype]
    for key in r.keys():
        if key in ("type", "base", "irq"):
            continue
        if key not in allowed:
            known = ", ".join(("type", "base", "irq") + allowed)
            raise r.fail(key, f"unknown parameter for a {ptype} (known: {known})")
        params[key] = _plain(r.node.value[key])
        r.used.add(key)
    # Parameters are checked by the peripheral model itself (it knows its own), but
    # values with units are normalised here so every model sees plain integers.
    for key, value in list(params.items()):
        try:
            if key == "cpuid":
                params[key] = _u32(value)
            elif key.endswith("_hz"):
                params[key] = parse_frequency(value) if value is not None else None
            elif key.endswith("size"):
                params[key] = parse_size(value)
        except ValueError as exc:
            raise r.fail(key, str(exc)) from None
    lines = {"": r.node.line, **{k: n.line for k, n in r.node.value.items()}}
    return PeripheralConfig(name=name, type=ptype, base=base, params=params, irq=irq,
                            source=r.node.source, lines=lines)


def load_config(path: str | Path | None = None) -> ChipConfig:
    """Read and check a chip description; raises ConfigError with file, key and line."""
    path = Path(path) if path is not None else DEFAULT_CONFIG
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{source}: no such config file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{source}: cannot read config: {exc}") from None
    return parse_config(text, source)


MAX_EXTENDS = 8


def _resolve(text: str, source: str, seen: tuple[str, ...] = ()) -> _Node:
    """Compose a file and, when it says ``extends: BASE.yaml``, lay it over its base.

    A what-if chip then states only what differs. In the overlay a mapping merges key
    by key into the base's, any other value replaces the base's, and ``null`` removes
    the key. Errors still name the file and line each value came from.
    """
    root = _compose(text, source)
    if not isinstance(root.value, dict) or "extends" not in root.value:
        return root
    ext = root.value.pop("extends")
    if not isinstance(ext.value, str) or not ext.value:
        raise ConfigError(f"{source}:{ext.line}: extends: expected the path of a base config")
    base_path = (Path(source).parent / ext.value) if not Path(ext.value).is_absolute() else Path(ext.value)
    if str(base_path.resolve()) in seen or len(seen) >= MAX_EXTENDS:
        raise ConfigError(f"{source}:{ext.line}: extends: {ext.value} makes a cycle of base configs")
    try:
        base_text = base_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        raise ConfigError(f"{source}:{ext.line}: extends: cannot read base config {base_path}") from None
    base = _resolve(base_text, str(base_path), seen + (str(Path(source).resolve()),))
    return _merge(base, root)


def _merge(base: _Node, over: _Node) -> _Node:
    if not (isinstance(base.value, dict) and isinstance(over.value, dict)):
        return over
    merged = dict(base.value)
    for key, node in over.value.items():
        if node.value is None:
            merged.pop(key, None)
        elif key in merged:
            merged[key] = _merge(merged[key], node)
        else:
            merged[key] = node
    return _Node(merged, over.line, over.source)


def parse_config(text: str, source: str = "<config>") -> ChipConfig:
    """Check YAML text against the schema (see configs/ciu98320b.yaml for the reference)."""
    top = _Reader(_resolve(text, source), "", source)
    chip = top.get("chip", _str)
    core = _read_core(top.child("core"))

    mem_reader = top.child("memory")
    memory: dict[str, Region] = {}
    for name in mem_reader.keys():
        memory[name] = _read_region(name, mem_reader.child(name))
    for required in ("flash", "sram"):
        if required not in memory:
            raise ConfigError(f"{mem_reader.source}:{mem_reader.node.line}: memory.{required}: required region is missing")

    per_reader = top.child("peripherals") if "peripherals" in top.keys() else None
    peripherals: dict[str, PeripheralConfig] = {}
    if per_reader is not None:
        for name in per_reader.keys():
            peripherals[name] = _read_peripheral(name, per_reader.child(name), core.irqs)
    top.finish()

    _check_overlaps(memory, mem_reader, source)
    return ChipConfig(chip=chip, core=core, memory=memory, peripherals=peripherals, source=source)


def _check_overlaps(memory: dict[str, Region], reader: _Reader, source: str) -> None:
    regions = sorted(memory.values(), key=lambda reg: reg.base)
    for a, b in zip(regions, regions[1:]):
        if b.base < a.end:
            node = reader.node.value[b.name]
            raise ConfigError(
                f"{node.source}:{node.line}: memory.{b.name}: overlaps memory.{a.name} "
                f"(0x{b.base:08x} < 0x{a.end:08x})"
            )
