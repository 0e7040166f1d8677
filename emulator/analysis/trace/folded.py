"""Folded stacks: one line per call path, ``frame;frame;frame weight``.

The format of Brendan Gregg's stackcollapse scripts, read by flamegraph.pl and by
speedscope. The weight is exclusive cycles, so the weights sum to the cycles
observed (the run's total); a function's wait cycles (WFI sleep, spinning on the
PKA) stand as a ``[waiting]`` frame above it, and an interrupt handler sits above
an ``[exception NAME]`` frame on top of the code it interrupted.
"""

from __future__ import annotations

from pathlib import Path

from pkasim.analysis.profiler import Profiler


def format_folded(profiler: Profiler) -> str:
    """The folded text of a profile, lines sorted (deterministic)."""
    return "".join(f"{path} {weight}\n" for path, weight in profiler.folded())


def write_folded(profiler: Profiler, path: str | Path) -> None:
    Path(path).write_text(format_folded(profiler))
