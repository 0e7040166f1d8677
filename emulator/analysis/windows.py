"""Where in a run an analysis looks: a window (``--window``), for fault campaigns and
power traces alike.

* ``all`` (the default): every instruction from reset to the end of the run;
* ``NAME`` or ``NAME#K``: a function, from the first instruction of its first (K-th)
  call through its return, callees and interrupts included;
* ``cycles:A-B``: the instructions that start at a cycle from A to B;
* ``FILE:L`` or ``FILE:L1-L2``: the instructions of those source lines (DWARF line
  table; FILE matches the end of the compiled path, ``verifypin.c`` or
  ``images/verifypin.c``), wherever the run executes them.

Each analysis resolves a window against a reference run of its own: a power trace
takes the cycles from the window's first instruction to the end of its last.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from pkasim.analysis.srclines import SourceLines
from pkasim.base.errors import LoadError, UsageError
from pkasim.base.kinds import Kind
from pkasim.core.observe import Event, ObservedImage, Observer


@dataclass(frozen=True)
class Window:
    """A parsed ``--window`` value."""

    text: str
    kind: str  # "all", "function", "cycles", "lines"
    name: str = ""  # function name, or source file
    call: int = 1  # which call of the function (1 = the first)
    lo: int = 0  # cycles or lines
    hi: int = 0

    def __str__(self) -> str:
        return self.text


def _number(text: str, what: str) -> int:
    try:
        value = int(text.replace("_", ""), 0)
    except ValueError:
        raise UsageError(f"--window: {what} {text!r} is not a whole number") from None
    if value < 0:
        raise UsageError(f"--window: {what} {text!r} is negative")
    return value


def parse_window(text: str | None) -> Window:
    """A window from its ``--window`` text (UsageError for one that means nothing)."""
    if text is None or text == "all":
        return Window("all", "all")
    text = text.strip()
    if text.startswith("cycles:"):
        lo, sep, hi = text[7:].partition("-")
        if not sep:
            raise UsageError(f"--window {text}: expected cycles:A-B")
        a, b = _number(lo, "cycle"), _number(hi, "cycle")
        if b < a:
            raise UsageError(f"--window {text}: the range ends before it starts")
        return Window(text, "cycles", lo=a, hi=b)
    m = re.fullmatch(r"(?P<file>[^:]+\.[A-Za-z0-9]+):(?P<lo>\d+)(?:-(?P<hi>\d+))?", text)
    if m is not None:
        lo = int(m["lo"])
        hi = int(m["hi"]) if m["hi"] else lo
        if hi < lo:
            raise UsageError(f"--window {text}: the line range ends before it starts")
        return Window(text, "lines", name=m["file"], lo=lo, hi=hi)
    m = re.fullmatch(r"(?P<name>[A-Za-z_.$][A-Za-z0-9_.$]*)(?:#(?P<k>\d+))?", text)
    if m is None:
        raise UsageError(f"--window {text}: expected a function (NAME or NAME#K), cycles:A-B or FILE:L1-L2")
    k = int(m["k"]) if m["k"] else 1
    if k < 1:
        raise UsageError(f"--window {text}: calls are counted from 1")
    return Window(text, "function", name=m["name"], call=k)


def line_ranges(elf: str, window: Window) -> tuple[tuple[int, int], ...]:
    """The code address ranges of a FILE:L1-L2 window (merged); UsageError if none."""
    lines = SourceLines(elf)
    want = window.name.replace("\\", "/")
    ranges: list[tuple[int, int]] = []
    files: set[str] = set()
    for start, end, name, line in lines.rows():
        if name is None:
            continue
        path = name.replace("\\", "/")
        if path != want and not path.endswith("/" + want.lstrip("./")):
            continue
        files.add(path)
        if window.lo <= line <= window.hi and end > start:
            ranges.append((start, end))
    if not files:
        raise UsageError(f"--window {window.text}: no source file {window.name} in the DWARF line table of {elf} "
                         "(built without -g?)")
    if not ranges:
        raise UsageError(f"--window {window.text}: no code on those lines of {sorted(files)[0]}")
    ranges.sort()
    merged = [ranges[0]]
    for lo, hi in ranges[1:]:
        if lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
        else:
            merged.append((lo, hi))
    return tuple(merged)


class CallFinder(Observer):
    """Finds the K-th call of a function and its return in the golden run (the
    native observer's CALL and RETURN events, no Python call per instruction)."""

    def __init__(self, name: str, call: int) -> None:
        self.name = name
        self.call = call
        self.calls = 0
        self.index = -1
        self.entry: Event | None = None
        self.exit: Event | None = None

    def start(self, info: ObservedImage) -> None:
        if self.name not in info.functions:
            raise LoadError(f"{info.path}: no function named '{self.name}'")
        self.index = info.functions.index(self.name)

    def events(self, batch: Sequence[Event]) -> None:
        if self.exit is not None:
            return
        for e in batch:
            if self.entry is None:
                if e.kind == Kind.CALL and e.a == self.index:
                    self.calls += 1
                    if self.calls == self.call:
                        self.entry = e
            elif e.kind in (Kind.RETURN, Kind.RESET) and e.depth < self.entry.depth:
                self.exit = e
                return


def describe_path(path: str) -> str:
    """A source path relative to the working directory when below it."""
    try:
        rel = os.path.relpath(path)
        return path if rel.startswith("..") else rel
    except ValueError:
        return path
