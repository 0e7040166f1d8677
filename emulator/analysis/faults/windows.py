"""Where in the golden run faults go: a window.

* ``all`` (the default): every instruction from reset to the end of the run;
* ``NAME`` or ``NAME#K``: a function, from the first instruction of its first (K-th)
  call through its return, callees and interrupts included;
* ``cycles:A-B``: the instructions that start at a cycle from A to B;
* ``FILE:L`` or ``FILE:L1-L2``: the instructions of those source lines (DWARF line
  table; FILE matches the end of the compiled path, ``verifypin.c`` or
  ``images/verifypin.c``), wherever the run executes them.

The window forms are pkasim.analysis.windows' (power traces take the same); a window
resolves, against the golden run, to a ``Span``: the first and last
instruction numbers (and cycles) it covers, plus, for source lines, the addresses
that count.
"""

from __future__ import annotations

from dataclasses import dataclass

from pkasim.analysis.windows import CallFinder, Window, describe_path, line_ranges, parse_window

__all__ = ["CallFinder", "Span", "Window", "describe_path", "line_ranges", "parse_window"]


@dataclass(frozen=True)
class Span:
    """The part of the golden run a window covers: instruction numbers ``first`` to
    ``last`` (inclusive) starting at cycles ``first_cycle``..``last_cycle``;
    ``addresses`` (sorted, disjoint [start, end) ranges), when not empty, limits the
    faults to instructions there."""

    first: int
    last: int
    first_cycle: int
    last_cycle: int
    addresses: tuple[tuple[int, int], ...] = ()

    def holds(self, pc: int) -> bool:
        if not self.addresses:
            return True
        return any(lo <= pc < hi for lo, hi in self.addresses)
