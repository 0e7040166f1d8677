"""Chip descriptions: load a YAML file, check it against the schema, return plain data.

A chip file reads like a platform description (Renode's .repl, QEMU's board code):
the core and its options, the memory regions, and the peripherals with their base
address and parameters. Each mistake is reported as ``file:line: key: problem`` so the
user can jump to it; nothing is silently defaulted except the keys the schema gives a
documented default.

Sizes accept integers or strings with a unit (``16 KiB``, ``320K``, ``3 KiB``);
frequencies accept integers (Hz) or ``48 MHz``.

A chip file is input like any other: every value is checked against the range the
model can represent (emulator/base/limits.py), and the YAML itself is bounded in size,
depth, alias expansion and tags before it is composed, so no file can hang, crash or
silently wrap a value.
"""

from __future__ import annotations

import collections
import importlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml

from pkasim.base import limits, resources, userfiles
from pkasim.base.errors import ConfigError, InputMissingError
from pkasim.chip.power import CPU_CLASSES, CPU_TERMS, PKA_TERMS, PowerConfig, default_power, weight

DEFAULT_CONFIG = resources.default_chip()  # configs/ciu98320b.yaml, bundled as package data
DEFAULT_CHIP = resources.DEFAULT_CHIP  # its name, as `--config` takes it and `--help` shows it

CORE_TYPES = {"sc000": "ARMv6-M", "cortex-m0": "ARMv6-M"}
# The parameters each peripheral model takes besides type, base and irq.
PERIPHERAL_PARAMS: dict[str, tuple[str, ...]] = {
    "systick": ("reference_clock_hz",),
    "nvic": (),
    "scb": ("cpuid",),
    "pka": ("ram_size", "max_words", "digit_bits", "timing", "strict_operands", "clock_hz", "montmul_pair"),
    "usb": ("oscillator",),
    "trng": ("seed", "word_cycles", "reseed_cycles", "fail_after"),
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
    power: PowerConfig = field(default_factory=default_power)  # the leakage model (chip/power.py)

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


def _yaml_error(exc: yaml.YAMLError, text: str, source: str) -> ConfigError:
    mark = getattr(exc, "problem_mark", None)
    position = getattr(exc, "position", None)  # ReaderError: a character YAML forbids
    if mark:
        where = f"{source}:{mark.line + 1}"
    elif position is not None:
        where = f"{source}:{text[:position].count(chr(10)) + 1}"
    else:
        where = source
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return ConfigError(f"{where}: not valid YAML: {problem}")


def _check_shape(text: str, source: str) -> list[yaml.Event]:
    """Bound the YAML before it is composed: nesting depth, nodes after alias expansion,
    value length, and aliases that point into their own anchor. Returns the events, for
    the composer to replay (the text is parsed once).

    PyYAML's composer recurses once per level and its aliases share nodes, so a deep
    file overflows the stack and a "billion laughs" file (aliases of aliases) expands
    exponentially when the schema walks it. Counting on the event stream costs time
    proportional to the file, whatever its aliases would expand to.
    """
    stack: list[list] = []  # open collections: [anchor, expanded nodes so far, deepest level below]
    sizes: dict[str, tuple[int, int]] = {}  # anchor -> (expanded nodes, levels)
    total = 0
    events = []
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        events.append(event)
        line = event.start_mark.line + 1
        if isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            anchor, count, below = stack.pop()
            if anchor is not None:
                sizes[anchor] = (count, below + 1)
            if stack:
                stack[-1][1] += count
                stack[-1][2] = max(stack[-1][2], below + 1)
            continue
        if isinstance(event, yaml.AliasEvent):
            if any(entry[0] == event.anchor for entry in stack):
                raise ConfigError(f"{source}:{line}: alias *{event.anchor} refers to a node that contains it")
            count, levels = sizes.get(event.anchor, (1, 0))  # an undefined alias: the composer names it
        elif isinstance(event, yaml.ScalarEvent):
            if len(event.value) > limits.CONFIG_MAX_SCALAR_CHARS:
                raise ConfigError(f"{source}:{line}: a value of {len(event.value)} characters "
                                  f"(at most {limits.CONFIG_MAX_SCALAR_CHARS})")
            count, levels = 1, 0
            if event.anchor is not None:
                sizes[event.anchor] = (1, 0)
        elif isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            if len(stack) >= limits.CONFIG_MAX_DEPTH:
                raise ConfigError(f"{source}:{line}: nested deeper than {limits.CONFIG_MAX_DEPTH} levels")
            stack.append([event.anchor, 1, 0])
            total += 1
            continue
        else:
            continue
        if len(stack) + levels > limits.CONFIG_MAX_DEPTH:
            raise ConfigError(f"{source}:{line}: alias *{event.anchor} nests deeper than "
                              f"{limits.CONFIG_MAX_DEPTH} levels")
        total += count
        if total > limits.CONFIG_MAX_NODES:
            raise ConfigError(f"{source}:{line}: more than {limits.CONFIG_MAX_NODES} values once aliases "
                              "are expanded")
        if stack:
            stack[-1][1] += count
            stack[-1][2] = max(stack[-1][2], levels)
    return events


class _Replay(yaml.composer.Composer, yaml.resolver.Resolver):
    """PyYAML's composer fed with events already parsed (and checked) once."""

    def __init__(self, events: list[yaml.Event]) -> None:
        yaml.composer.Composer.__init__(self)
        yaml.resolver.Resolver.__init__(self)
        self._events = collections.deque(events)

    def check_event(self, *choices: type) -> bool:
        return bool(self._events) and (not choices or isinstance(self._events[0], choices))

    def peek_event(self) -> yaml.Event:
        return self._events[0]

    def get_event(self) -> yaml.Event:
        return self._events.popleft()


def _compose(text: str, source: str) -> _Node:
    try:
        root = _Replay(_check_shape(text, source)).get_single_node()
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, text, source) from None
    if root is None:
        raise ConfigError(f"{source}:1: the file is empty")
    return _wrap(root, source, "")


# The YAML tags a chip file may carry: the core schema's. Anything else (``!!python/...``,
# application tags) is refused by name rather than constructed or ignored.
_TAGS = {f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "map", "seq", "timestamp")}


def _tag_name(tag: str) -> str:
    return "!!" + tag[len("tag:yaml.org,2002:"):] if tag.startswith("tag:yaml.org,2002:") else tag


def _wrap(node: yaml.Node, source: str, path: str) -> _Node:
    line = node.start_mark.line + 1
    if node.tag not in _TAGS:
        raise ConfigError(f"{source}:{line}: {path or 'top level'}: YAML tag {_tag_name(node.tag)} is not "
                          "allowed (a chip file holds plain values)")
    if isinstance(node, yaml.MappingNode):
        out: dict[str, _Node] = {}
        for key_node, value_node in node.value:
            key_line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag not in _TAGS:
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
    except (ValueError, OverflowError) as exc:  # a number Python will not convert
        raise ConfigError(f"{source}:{node.start_mark.line + 1}: {path or 'value'}: "
                          f"cannot read {node.value[:40]!r}: {exc}") from None
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
        except (ValueError, TypeError, OverflowError) as exc:
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


def _shown(raw: Any) -> str:
    """A value as errors quote it: its repr, cut short when it is long."""
    text = repr(raw)
    return text if len(text) <= 60 else f"{text[:40]}...({len(text)} characters)"


def _int(raw: Any) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise ValueError(f"expected an integer, got {_shown(raw)}")
    return raw


def _ranged(low: int, high: int, why: str = "") -> Callable[[Any], int]:
    """An integer in [low, high]; ``why`` says where the bound comes from."""

    def conv(raw: Any) -> int:
        value = _int(raw)
        if value < 0 <= low:
            raise ValueError(f"must not be negative, got {_shown(value)}")
        if not low <= value <= high:
            raise ValueError(f"expected {low}..{high}{f' ({why})' if why else ''}, got {_shown(value)}")
        return value

    return conv


def _bool(raw: Any) -> bool:
    if not isinstance(raw, bool):
        raise ValueError(f"expected true or false, got {_shown(raw)}")
    return raw


def _str(raw: Any) -> str:
    if not isinstance(raw, str) or not raw:
        raise ValueError(f"expected a non-empty string, got {_shown(raw)}")
    return raw


def _u32(raw: Any) -> int:
    value = _int(raw)
    if not 0 <= value <= 0xFFFFFFFF:
        raise ValueError(f"expected a 32-bit value, got {_shown(raw)}")
    return value


def _address(raw: Any) -> int:
    value = _int(raw)
    if not 0 <= value <= 0xFFFFFFFF:
        raise ValueError(f"address {_shown(value)} is outside the 32-bit address space")
    return value


def parse_size(raw: Any) -> int:
    """A byte count: an integer, or a string such as ``16 KiB`` or ``320K``."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        value = raw
    elif isinstance(raw, str) and (m := _SIZE_RE.match(raw)):
        value = int(m.group(1)) * _SIZE_UNITS[m.group(2).lower() if m.group(2) else None]
    else:
        raise ValueError(f"expected a size such as 16384 or '16 KiB', got {_shown(raw)}")
    if value <= 0:
        raise ValueError(f"size must be positive, got {_shown(raw)}")
    return value


def parse_frequency(raw: Any) -> int:
    """A frequency in Hz: an integer, or a string such as ``48 MHz`` or ``1.5 kHz``.

    Decimals are read exactly (no float to overflow or round twice) and the result is
    rounded to whole Hz; it must lie in 1..limits.CLOCK_HZ_MAX.
    """
    if isinstance(raw, int) and not isinstance(raw, bool):
        value = raw
    elif isinstance(raw, str) and (m := _FREQ_RE.match(raw)):
        value = round(Fraction(m.group(1)) * _FREQ_UNITS[m.group(2).lower() if m.group(2) else None])
    else:
        raise ValueError(f"expected a frequency such as 48000000 or '48 MHz', got {_shown(raw)}")
    if value <= 0:
        raise ValueError(f"frequency must be positive, got {_shown(raw)}")
    if value > limits.CLOCK_HZ_MAX:
        raise ValueError(f"at most {limits.CLOCK_HZ_MAX:,} Hz (the firmware reads the clock as a 32-bit "
                         f"value), got {_shown(raw)}")
    return value


def _choice(*allowed: Any) -> Callable[[Any], Any]:
    """One of ``allowed``, of the same type too: 32.0 and true are not 32 and 1."""

    def conv(raw: Any) -> Any:
        if not any(type(raw) is type(a) and raw == a for a in allowed):
            raise ValueError(f"must be one of {', '.join(map(str, allowed))}, got {_shown(raw)}")
        return raw

    return conv


def _name(kind: str, name: str, where: str) -> str:
    """Region and peripheral names are identifiers, so key paths in errors stay unambiguous."""
    if not re.fullmatch(limits.NAME_PATTERN, name):
        raise ConfigError(f"{where}: {kind} name {_shown(name)} is not a plain identifier "
                          "(letters, digits and _, not starting with a digit, at most 64)")
    return name


# --------------------------------------------------------------------------- schema

def _read_core(r: _Reader) -> CoreConfig:
    cycles = _ranged(0, limits.EXCEPTION_CYCLES_MAX)
    core = CoreConfig(
        type=r.get("type", _choice(*CORE_TYPES)),
        clock_hz=r.get("clock_hz", parse_frequency),
        muls_cycles=r.get("muls_cycles", _choice(*limits.MULS_CYCLES), 1),
        vtor=r.get("vtor", _bool, False),
        irqs=r.get("irqs", _ranged(limits.IRQS_MIN, limits.IRQS_MAX,
                                   "ARMv6-M supports 1 to 32 external interrupts"), 32),
        exception_entry_cycles=r.get("exception_entry_cycles", cycles, 16),
        exception_return_cycles=r.get("exception_return_cycles", cycles, 0),
    )
    r.finish()
    return core


def _read_region(name: str, r: _Reader) -> Region:
    _name("region", name, f"{r.source}:{r.node.line}: {r.path}")
    flash = name == "flash"
    region = Region(
        name=name,
        base=r.get("base", _address),
        size=r.get("size", parse_size),
        wait_states=r.get("wait_states", _ranged(0, limits.WAIT_STATES_MAX if flash else 0,
                                                 "the 16-bit cost of the dearest instruction, MULS at 32 "
                                                 "cycles, plus one wait-state fetch" if flash else
                                                 "only flash wait states are modeled; other memory is "
                                                 "zero-wait (docs/cycle-model.md)"), 0),
        writable=r.get("writable", _bool, True),
    )
    align = limits.REGION_ALIGN
    if region.base % align or region.size % align:
        raise r.fail("base" if region.base % align else "size",
                     "regions must be 1 KiB aligned in base and size (the emulator maps memory in 1 KiB pages)")
    if region.end > 1 << 32:
        raise r.fail("size", "region runs past the end of the 32-bit address space")
    r.finish()
    return region


# The model class of each peripheral type. A chip file is checked against the windows
# the models occupy; the classes are imported when needed (they import this module).
_MODELS = {
    "systick": ("pkasim.peripherals.systick", "SysTick"),
    "nvic": ("pkasim.peripherals.nvic", "Nvic"),
    "scb": ("pkasim.peripherals.scb", "Scb"),
    "pka": ("pkasim.peripherals.pka", "Pka"),
    "usb": ("pkasim.peripherals.usb", "Usb"),
    "trng": ("pkasim.peripherals.trng", "Trng"),
}
# Every ARMv6-M core has an NVIC and an SCB at these addresses (ARMv6-M ARM B3.4,
# B3.2); a chip file that does not list them still gets them, under these names.
ARCHITECTURAL = {"nvic": 0xE000E100, "scb": 0xE000ED00}
# The devices of the core itself: one of each at most (SysTick is optional on ARMv6-M).
CORE_DEVICES = ("systick", "nvic", "scb")


def _model(ptype: str) -> type:
    module, cls = _MODELS[ptype]
    return getattr(importlib.import_module(module), cls)


def _read_peripheral(name: str, r: _Reader, irqs: int) -> PeripheralConfig:
    _name("peripheral", name, f"{r.source}:{r.node.line}: {r.path}")
    ptype = r.get("type", _choice(*PERIPHERAL_TYPES))
    base = r.get("base", _address)
    if base % limits.PERIPHERAL_ALIGN:
        raise r.fail("base", f"a peripheral's registers are words: its base must be word aligned, got 0x{base:x}")
    irq = r.get("irq", lambda v: v, None)
    if irq is not None and not (irq == "systick" or (isinstance(irq, int) and not isinstance(irq, bool) and 0 <= irq < irqs)):
        raise r.fail("irq", f"expected 'systick' or an IRQ number 0..{irqs - 1}, got {_shown(irq)}")
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


def read_bounded(path: str | Path, limit: int = limits.CONFIG_MAX_BYTES) -> bytes:
    """At most ``limit`` + 1 bytes of a file: /dev/zero or a huge file is refused by its
    reader, never read into memory whole; a FIFO with no writer is refused instead of
    blocking (pkasim.base.userfiles). Raises OSError as open() does."""
    return userfiles.read_bounded(path, limit, streams=True)


def load_yaml(path: str | Path) -> Any:
    """Another YAML input of pkasim's (a regression suite) as plain values, under a chip
    file's bounds: size, UTF-8, nesting, alias expansion, value length, core tags.
    Raises InputMissingError if it cannot be read, ConfigError (with the line) if it
    breaks a bound or is not YAML."""
    source = str(path)
    text = _read_text(path, "no such file", "cannot read", "a YAML input")
    try:
        _check_shape(text, source)
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, text, source) from None
    except (ValueError, OverflowError) as exc:  # a timestamp or number Python will not convert
        raise ConfigError(f"{source}: cannot read a value: {exc}") from None


def _read_text(path: str | Path, missing: str, unreadable: str, what: str = "a chip file") -> str:
    """An input file's text, bounded and checked as UTF-8; one line when it cannot be read."""
    source = str(path)
    try:
        data = read_bounded(path)
    except FileNotFoundError:
        raise InputMissingError(f"{source}: {missing}") from None
    except OSError as exc:
        raise InputMissingError(f"{source}: {unreadable}: {exc.strerror or exc}") from None
    return _decode(data, source, what)


def _decode(data: bytes, source: str, what: str = "a chip file") -> str:
    if len(data) > limits.CONFIG_MAX_BYTES:
        raise ConfigError(f"{source}: larger than {limits.CONFIG_MAX_BYTES >> 20} MiB; {what} is a few KiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ConfigError(f"{source}:{line}: not UTF-8 text: byte 0x{data[exc.start]:02x} at column {column}") from None


def load_config(path: str | Path | None = None) -> ChipConfig:
    """Read and check a chip description; raises ConfigError with file, key and line,
    or InputMissingError when the file cannot be read at all. A string that names no
    file may name a bundled chip (``ciu98320b``, ``presets/victor-radix16``); a Path is
    taken as it is."""
    path = resources.resolve_chip(path) if path is not None else DEFAULT_CONFIG
    source = str(path)
    return parse_config(_read_text(path, "no such config file", "cannot read config"), source)


def _resolve(text: str, source: str, chain: tuple[str, ...] = ()) -> _Node:
    """Compose a file and, when it says ``extends: BASE.yaml``, lay it over its base.

    A what-if chip then states only what differs. In the overlay a mapping merges key
    by key into the base's, any other value replaces the base's, and ``null`` removes
    the key. Errors still name the file and line each value came from. ``chain`` holds
    the files already on the way here (resolved), to tell a cycle from a long chain.
    """
    root = _compose(text, source)
    if not isinstance(root.value, dict) or "extends" not in root.value:
        return root
    chain = chain + (str(Path(source).resolve()),)
    ext = root.value.pop("extends")
    if not isinstance(ext.value, str) or not ext.value:
        raise ConfigError(f"{source}:{ext.line}: extends: expected the path of a base config")
    base_path = (Path(source).parent / ext.value) if not Path(ext.value).is_absolute() else Path(ext.value)
    if not base_path.exists() and (named := resources.bundled(ext.value)) is not None:
        base_path = named  # `extends: ciu98320b`: a bundled chip by name, from a chip file anywhere
    if str(base_path.resolve()) in chain:
        raise ConfigError(f"{source}:{ext.line}: extends: {ext.value} makes a cycle of base configs")
    if len(chain) >= limits.CONFIG_MAX_EXTENDS:
        raise ConfigError(f"{source}:{ext.line}: extends: a chain of more than {limits.CONFIG_MAX_EXTENDS} "
                          "config files")
    try:
        data = read_bounded(base_path)
    except OSError as exc:
        raise ConfigError(f"{source}:{ext.line}: extends: cannot read base config {base_path}"
                          f" ({exc.strerror or exc})") from None
    base = _resolve(_decode(data, str(base_path)), str(base_path), chain)
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


def load_layered(path: str | Path, overlays: Sequence[tuple[str, str]]) -> tuple[ChipConfig, Any]:
    """The chip file at ``path`` with ``overlays`` laid over it in order, each as an
    ``extends:`` child lays itself over its base (mappings merge key by key, null
    removes a key). ``overlays`` are (YAML text, source) pairs; an overlay's own
    ``extends:`` is dropped, so a preset written against the default chip applies its
    differences to ``path``. Returns the chip and its resolved description as plain
    values (what ``pkasim sweep`` keys its result cache on)."""
    path = resources.resolve_chip(path)
    source = str(path)
    root = _resolve(_read_text(path, "no such config file", "cannot read config"), source)
    for text, where in overlays:
        over = _compose(text, where)
        if not isinstance(over.value, dict):
            raise ConfigError(f"{where}:{over.line}: top level: expected a mapping")
        over.value.pop("extends", None)
        root = _merge(root, over)
    return _parse_root(root, source), _plain(root)


def parse_config(text: str, source: str = "<config>") -> ChipConfig:
    """Check YAML text against the schema (see configs/ciu98320b.yaml for the reference)."""
    return _parse_root(_resolve(text, source), source)


def _parse_root(root: _Node, source: str) -> ChipConfig:
    top = _Reader(root, "", source)
    chip = top.get("chip", _str)
    core = _read_core(top.child("core"))

    mem_reader = top.child("memory")
    memory: dict[str, Region] = {}
    total = 0
    for name in mem_reader.keys():
        reader = mem_reader.child(name)
        memory[name] = _read_region(name, reader)
        total += memory[name].size
        if total > limits.MEMORY_MAX_BYTES:
            raise reader.fail("size", f"brings the memory regions to {total:,} bytes; at most "
                                      f"{limits.MEMORY_MAX_BYTES >> 20} MiB in all (the host holds a copy of each)")
    for required in ("flash", "sram"):
        if required not in memory:
            raise ConfigError(f"{mem_reader.source}:{mem_reader.node.line}: memory.{required}: required region is missing")

    per_reader = top.child("peripherals") if "peripherals" in top.keys() else None
    peripherals: dict[str, PeripheralConfig] = {}
    if per_reader is not None:
        for name in per_reader.keys():
            peripherals[name] = _read_peripheral(name, per_reader.child(name), core.irqs)
    power = _read_power(top.child("power")) if "power" in top.keys() else default_power()
    top.finish()

    _check_overlaps(memory, mem_reader, source)
    _check_windows(memory, mem_reader, peripherals, source)
    return ChipConfig(chip=chip, core=core, memory=memory, peripherals=peripherals, source=source, power=power)


def _read_power(r: _Reader) -> PowerConfig:
    """The ``power:`` section: only the weights it names change the defaults."""
    power = default_power()
    if "cpu" in r.keys():
        cpu = r.child("cpu")
        for cls in cpu.keys():
            if cls not in CPU_CLASSES:
                raise cpu.fail(cls, f"unknown instruction class (known: {', '.join(CPU_CLASSES)})")
            terms = cpu.child(cls)
            for term in terms.keys():
                if term not in CPU_TERMS:
                    raise terms.fail(term, f"unknown term (known: {', '.join(CPU_TERMS)})")
                power.cpu[cls][term] = terms.get(term, weight)
            terms.finish()
        cpu.finish()
    if "pka" in r.keys():
        pka = r.child("pka")
        for term in pka.keys():
            if term not in PKA_TERMS:
                raise pka.fail(term, f"unknown term (known: {', '.join(PKA_TERMS)})")
            power.pka[term] = pka.get(term, weight)
        pka.finish()
    r.finish()
    return power


def _check_overlaps(memory: dict[str, Region], reader: _Reader, source: str) -> None:
    regions = sorted(memory.values(), key=lambda reg: reg.base)
    for a, b in zip(regions, regions[1:]):
        if b.base < a.end:
            node = reader.node.value[b.name]
            raise ConfigError(
                f"{node.source}:{node.line}: memory.{b.name}: overlaps memory.{a.name} "
                f"(0x{b.base:08x} < 0x{a.end:08x})"
            )


@dataclass(frozen=True)
class _Window:
    label: str  # memory.NAME or peripherals.NAME
    start: int
    end: int
    source: str
    line: int


def _check_windows(memory: dict[str, Region], mem_reader: _Reader, peripherals: dict[str, PeripheralConfig],
                   source: str) -> None:
    """No two address windows may share a byte: memory regions, peripheral register
    windows (their size comes from the model), and the NVIC and SCB every core has.

    Two devices in one window would answer the same address (the first one listed
    would win silently); a region under a device would never be reached.
    """
    windows: list[_Window] = []
    for region in memory.values():
        node = mem_reader.node.value[region.name]
        windows.append(_Window(f"memory.{region.name}", region.base, region.end, node.source, node.line))
    types: dict[str, PeripheralConfig] = {}
    for pc in peripherals.values():
        if pc.type in CORE_DEVICES and pc.type in types:
            raise ConfigError(f"{pc.where('type')}: peripherals.{pc.name}.type: an ARMv6-M core has one "
                              f"{pc.type}, already given as peripherals.{types[pc.type].name}")
        types.setdefault(pc.type, pc)
    for name, base in ARCHITECTURAL.items():
        if name not in types:
            if name in peripherals:
                pc = peripherals[name]
                raise ConfigError(f"{pc.where('')}: peripherals.{name}: the name '{name}' belongs to the core's "
                                  f"{name.upper()}, which a chip without a {name} entry still has")
            windows.append(_Window(f"the core's {name.upper()}", base, base + _model(name).size, "", 0))
    for pc in peripherals.values():
        size = _model(pc.type).window(pc)
        end = pc.base + size
        if end > 1 << 32:
            raise ConfigError(f"{pc.where('base')}: peripherals.{pc.name}.base: its 0x{size:x}-byte window "
                              "runs past the end of the 32-bit address space")
        windows.append(_Window(f"peripherals.{pc.name}", pc.base, end, pc.source, pc.lines.get("base", 0)))
    windows.sort(key=lambda w: w.start)
    for i, a in enumerate(windows):
        for b in windows[i + 1:]:
            if b.start >= a.end:
                break
            # Point at the one the user most likely just wrote: the top file's, later line.
            blame, other = (b, a) if (b.source == source, b.line) >= (a.source == source, a.line) else (a, b)
            raise ConfigError(
                f"{blame.source}:{blame.line}: {blame.label}: 0x{blame.start:08x}-0x{blame.end - 1:08x} overlaps "
                f"{other.label} (0x{other.start:08x}-0x{other.end - 1:08x})"
            )
