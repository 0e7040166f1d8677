"""Chip-file mutation, structure-aware, as hypothesis strategies.

A mutant starts from the reference chip (configs/ciu98320b.yaml) as a tree and changes
it where the schema looks: a value replaced by a hostile one (huge, negative, a float
where an integer goes, a string with a unit, a list, a mapping, null), a key removed
or added, a peripheral renamed, copied or moved onto another's address. The YAML text
may then be bent as a hand-written file can be: anchors and aliases (billion laughs,
self-reference), deep nesting, tags, bytes that are not UTF-8, a 5000-digit number,
``extends:`` pointing at itself, at nothing or at /dev/zero.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml
from fuzzing import REPO
from hypothesis import strategies as st

REFERENCE = REPO / "configs" / "ciu98320b.yaml"

HOSTILE_VALUES = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 2, 31, 32, 33, 223, 224, 255, 256, 1024, 65535, 65536, 2**24, 2**32 - 1, 2**32,
                     2**64 - 16, 2**64, 10**30, 0xE000E000, 0xE000E010, 0xE000E100, 0xE000ED00, 0x40010000,
                     0xFFFFFFFF, 0xFFFFFC00]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text(max_size=12),
    st.sampled_from(["48 MHz", "0 Hz", "-1 Hz", "4.3 GHz", "9" * 400 + ".5 Hz", "1.5 kHz", "16 KiB", "0 KiB",
                     "4096 MiB", "17 MiB", "1.5 KiB", "320K", "systick", "p:ka", "sc000", "cortex-m0", "",
                     "0x40010000", "1e9"]),
    st.lists(st.integers(min_value=-5, max_value=2**33), max_size=4),
    st.dictionaries(st.sampled_from(["montmul", "add", "x", "type", "base"]), st.integers(), max_size=3),
)
NAMES = st.sampled_from(["pka2", "p:ka", "nvic", "scb", "systick", "extra", "9lives", "a" * 70, "pkä", "flash",
                         "sram", ""])
TYPES = st.sampled_from(["systick", "nvic", "scb", "pka", "gpu"])


def reference() -> dict:
    return yaml.safe_load(REFERENCE.read_text())


def paths(tree: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key path in the tree (mappings and list indices), the root excluded."""
    out = []
    if isinstance(tree, dict):
        for key, value in tree.items():
            out.append(prefix + (key,))
            out += paths(value, prefix + (key,))
    elif isinstance(tree, list):
        for i, value in enumerate(tree):
            out.append(prefix + (i,))
            out += paths(value, prefix + (i,))
    return out


def _get(tree: Any, path: tuple) -> Any:
    for key in path:
        tree = tree[key]
    return tree


def _parent(tree: Any, path: tuple) -> Any:
    for key in path[:-1]:
        tree = tree[key]
    return tree


@st.composite
def tree_mutant(draw) -> dict:
    """The reference tree with one to four structural mutations."""
    tree = reference()
    for _ in range(draw(st.sampled_from([1, 1, 1, 2, 2, 3, 4]))):
        # Numbers first: hypothesis draws (and shrinks to) the front of the list most.
        every = sorted(paths(tree), key=lambda p: (not isinstance(_get(tree, p), (int, float)), -len(p)))
        if not every:
            break
        path = draw(st.sampled_from(every))
        parent = _parent(tree, path)
        key = path[-1]
        op = draw(st.sampled_from(["set", "set", "set", "delete", "add", "rename", "copy", "move"]))
        if op == "set":
            old = parent[key]
            if isinstance(old, int) and not isinstance(old, bool) and draw(st.booleans()):
                # Near the reference value: mutants the schema accepts run on the machine too.
                parent[key] = draw(st.integers(min_value=max(0, old // 2 - 4), max_value=old * 2 + 4))
            else:
                parent[key] = draw(HOSTILE_VALUES)
        elif op == "delete":
            del parent[key]
        elif op == "add" and isinstance(parent, dict):
            parent[draw(NAMES)] = draw(HOSTILE_VALUES)
        elif op == "rename" and isinstance(parent, dict):
            new = draw(NAMES)
            parent[new] = parent.pop(key)
        elif op == "copy":
            peripherals = tree.get("peripherals")
            if isinstance(peripherals, dict) and peripherals:
                source = draw(st.sampled_from(sorted(peripherals, key=str)))
                clone = copy.deepcopy(peripherals[source])
                if isinstance(clone, dict) and draw(st.booleans()):
                    clone["type"] = draw(TYPES)
                peripherals[draw(NAMES)] = clone
        elif op == "move":
            peripherals = tree.get("peripherals")
            if isinstance(peripherals, dict) and peripherals:
                name = draw(st.sampled_from(sorted(peripherals, key=str)))
                if isinstance(peripherals[name], dict):
                    peripherals[name]["base"] = draw(st.sampled_from(
                        [0, 0x20000000, 0x20003FFC, 0xE000E000, 0xE000E010, 0xE000E100, 0xE000ED00, 0x40010000,
                         0x40010400, 0xFFFFFFFC, 0xE000E102]))
    return tree


def _billion_laughs(levels: int) -> str:
    lines = ["lol0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"lol{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


# Text-level bends: each takes the YAML text and returns the mutant's bytes.
TEXT_BENDS = {
    "none": lambda t: t.encode(),
    "billion laughs": lambda t: (t + _billion_laughs(9)).encode(),
    "self alias": lambda t: (t + "loop: &a [1, *a]\n").encode(),
    "deep nesting": lambda t: (t + "deep: " + "[" * 500 + "]" * 500 + "\n").encode(),
    "deep mapping": lambda t: (t + "".join("  " * i + f"k{i}:\n" for i in range(60)) + "  " * 60 + "v\n").encode(),
    "python tag": lambda t: t.replace("core:", "core: !!python/object:os.system", 1).encode(),
    "python name tag": lambda t: t.replace("chip:", "chip: !!python/name:os.system #", 1).encode(),
    "custom tag": lambda t: t.replace("memory:", "memory: !chip", 1).encode(),
    "not utf-8": lambda t: t.encode()[: len(t) // 2] + b"\xff\xfe\xc3" + t.encode()[len(t) // 2:],
    "5000 digits": lambda t: (t + "huge: " + "9" * 5000 + "\n").encode(),
    "long frequency": lambda t: t.replace("clock_hz:", f"clock_hz: '{'9' * 900}.5 Hz' #", 1).encode(),
    "extends itself": lambda t: ("extends: {self}\n" + t).encode(),
    "extends nothing": lambda t: ("extends: no/such/base.yaml\n" + t).encode(),
    "extends dev zero": lambda t: ("extends: /dev/zero\n" + t).encode(),
    "extends reference": lambda t: (f"extends: {REFERENCE}\n" + t).encode(),
    "merge key": lambda t: (t + "base: &b {x: 1}\nmerged:\n  <<: *b\n").encode(),
    "empty": lambda t: b"",
    "nul byte": lambda t: t.encode() + b"\x00\n",
    "duplicate key": lambda t: (t + "chip: again\n").encode(),
    "two documents": lambda t: (t + "---\nchip: two\n").encode(),
}
BENDS = st.sampled_from(sorted(TEXT_BENDS))


@st.composite
def chip_file(draw) -> tuple[bytes, str]:
    """A mutant chip file's bytes and a description. ``{self}`` in the text stands for
    the file's own path (filled in when it is written)."""
    tree = draw(tree_mutant())
    try:
        text = yaml.safe_dump(tree, sort_keys=False, allow_unicode=True)
    except (yaml.YAMLError, ValueError):  # a value PyYAML cannot write: keep the reference
        text = REFERENCE.read_text()
    bend = draw(st.sampled_from(["none"] * 12 + sorted(TEXT_BENDS)))
    return TEXT_BENDS[bend](text), bend
