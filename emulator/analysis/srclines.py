"""Source lines of code addresses, from an ELF's DWARF line tables (pyelftools).

``SourceLines(path).at(addr)`` gives ``(file, line)`` for the line-table row that
covers ``addr`` (the last row at or below it within its sequence), or None when the
image has no line information there (built without -g, stripped, library code).
"""

from __future__ import annotations

import bisect
import os
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from pkasim.base import userfiles


class SourceLines:
    """The line table of one ELF, read once."""

    def __init__(self, path: str | Path) -> None:
        self._starts: list[int] = []
        self._rows: list[tuple[int, int, str | None, int]] = []  # (address, end of sequence, file, line)
        try:
            with userfiles.open_input(path, streams=True) as fh:
                elf = ELFFile(fh)
                if not elf.has_dwarf_info():
                    return
                self._read(elf)
        except (OSError, ELFError, ValueError, KeyError, IndexError, AssertionError):
            self._starts, self._rows = [], []  # unreadable line info: addresses only

    def _read(self, elf: ELFFile) -> None:
        dwarf = elf.get_dwarf_info()
        rows: list[tuple[int, int, str | None, int]] = []
        for cu in dwarf.iter_CUs():
            prog = dwarf.line_program_for_CU(cu)
            if prog is None:
                continue
            names = _file_names(prog, cu)
            seq: list[tuple[int, str | None, int]] = []
            for entry in prog.get_entries():
                st = entry.state
                if st is None:
                    continue
                if st.end_sequence:
                    if seq and seq[0][0] == 0:  # a discarded section's sequence (-Wl,--gc-sections)
                        seq = []
                        continue
                    for i, (addr, name, line) in enumerate(seq):
                        end = seq[i + 1][0] if i + 1 < len(seq) else st.address
                        rows.append((addr, end, name, line))
                    seq = []
                    continue
                seq.append((st.address, names.get(st.file), st.line))
        rows.sort(key=lambda r: r[0])
        self._rows = rows
        self._starts = [r[0] for r in rows]

    def at(self, addr: int) -> tuple[str, int] | None:
        """(file, line) of the code at ``addr``, or None."""
        addr &= ~1
        i = bisect.bisect_right(self._starts, addr) - 1
        if i < 0:
            return None
        start, end, name, line = self._rows[i]
        if not (start <= addr < end) or name is None or line <= 0:
            return None
        return name, line

    def rows(self) -> list[tuple[int, int, str | None, int]]:
        """Every line-table row: (start address, end address, file, line), by address."""
        return list(self._rows)

    def describe(self, addr: int) -> str:
        """``file:line`` (the path relative to the working directory when below it), or ''."""
        where = self.at(addr)
        if where is None:
            return ""
        name, line = where
        try:
            rel = os.path.relpath(name)
            if not rel.startswith(".."):
                name = rel
        except ValueError:
            pass
        return f"{name}:{line}"


def _file_names(prog, cu) -> dict[int, str]:  # noqa: ANN001 - pyelftools objects
    """File index -> path, for DWARF 2-4 (1-based) and 5 (0-based) line programs."""
    header = prog.header
    dirs = [d.decode(errors="replace") if isinstance(d, bytes) else str(d) for d in header["include_directory"]]
    comp_dir = ""
    top = cu.get_top_DIE()
    if "DW_AT_comp_dir" in top.attributes:
        value = top.attributes["DW_AT_comp_dir"].value
        comp_dir = value.decode(errors="replace") if isinstance(value, bytes) else str(value)
    version = header["version"]
    out: dict[int, str] = {}
    for i, entry in enumerate(header["file_entry"]):
        name = entry.name.decode(errors="replace") if isinstance(entry.name, bytes) else str(entry.name)
        d = entry.dir_index
        if version >= 5:
            base = dirs[d] if d < len(dirs) else ""
            index = i
        else:
            base = dirs[d - 1] if 0 < d <= len(dirs) else comp_dir
            index = i + 1
        path = name if os.path.isabs(name) else os.path.join(base or comp_dir, name)
        if not os.path.isabs(path) and comp_dir:
            path = os.path.join(comp_dir, path)
        out[index] = os.path.normpath(path)
    return out
