"""What the ELF's debug information tells the debugger: the line table (address to
file:line and back) and the call frame information (.debug_frame) that unwinds the
stack. Read with pyelftools, once per image; an image without it still debugs, by
instruction and symbol."""

from __future__ import annotations

import bisect
import os
from dataclasses import dataclass
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.dwarf.callframe import FDE, RegisterRule
from elftools.elf.elffile import ELFFile

from pkasim.base import limits, userfiles

LR, SP = 14, 13
SOURCE_MAX = limits.SOURCE_MAX_BYTES  # a source file the debugger shows; a larger one is not shown
_SOURCE_SUFFIXES = (".c", ".h", ".s", ".S", ".cc", ".cpp")


@dataclass(frozen=True)
class Line:
    address: int
    file: str  # the path as the compiler recorded it, joined to its directory
    line: int


@dataclass(frozen=True)
class FrameRule:
    """How to find the caller at one PC: CFA = register + offset; where the saved
    registers are, as offsets from the CFA."""

    cfa_reg: int
    cfa_offset: int
    saved: dict[int, int]


class DebugInfo:
    """The line table and frame table of one ELF (empty when it has no DWARF)."""

    def __init__(self, path: str | Path) -> None:
        self.rows: list[Line] = []  # is_stmt rows, by address
        self._ends: list[int] = []  # ends of the address ranges the rows cover
        self._fdes: list[tuple[int, int, list]] = []  # (start, end, decoded rows)
        self._fde_starts: list[int] = []
        self._sources: dict[str, list[str] | None] = {}
        try:
            with userfiles.open_input(path, streams=True) as fh:
                elf = ELFFile(fh)
                if elf.has_dwarf_info():
                    dwarf = elf.get_dwarf_info()
                    self._read_lines(dwarf)
                    self._read_frames(dwarf)
        except (OSError, ELFError, ValueError, KeyError, AssertionError):
            self.rows = []

    @property
    def has_lines(self) -> bool:
        return bool(self.rows)

    # ------------------------------------------------------------------ lines
    def _read_lines(self, dwarf) -> None:
        rows: list[tuple[int, str, int, int]] = []  # (address, file, line, end of row)
        for cu in dwarf.iter_CUs():
            top = cu.get_top_DIE()
            name = top.attributes.get("DW_AT_name")
            if name is None or not name.value.decode(errors="replace").endswith(_SOURCE_SUFFIXES):
                continue  # the toolchain's compiler_rt (Zig, 57,000 rows): no C source to show
            lp = dwarf.line_program_for_CU(cu)
            if lp is None:
                continue
            comp_dir = top.attributes.get("DW_AT_comp_dir")
            comp = comp_dir.value.decode(errors="replace") if comp_dir else ""
            dirs = [d.decode(errors="replace") if isinstance(d, bytes) else str(d)
                    for d in lp["include_directory"]]
            files = lp["file_entry"]
            version = lp["version"]
            prev = None
            seq_start = None  # a sequence at address 0 is a function the linker dropped
            for entry in lp.get_entries():
                st = entry.state
                if st is None:
                    continue
                if seq_start is None:
                    seq_start = st.address
                if prev is not None and st.address > prev[0] and seq_start != 0:
                    rows.append((prev[0], prev[1], prev[2], st.address))
                if st.end_sequence:
                    prev = seq_start = None
                    continue
                if not st.is_stmt:
                    continue
                index = st.file if version >= 5 else st.file - 1
                if not 0 <= index < len(files):
                    prev = None
                    continue
                fe = files[index]
                fname = fe.name.decode(errors="replace")
                d = fe.dir_index if version >= 5 else fe.dir_index - 1
                base = dirs[d] if 0 <= d < len(dirs) else ""
                full = os.path.join(comp, base, fname) if not os.path.isabs(fname) else fname
                prev = (st.address, os.path.normpath(full), st.line)
        rows.sort()
        self.rows = [Line(a, f, n) for a, f, n, _ in rows]
        self._ends = [e for _, _, _, e in rows]
        self._addrs = [a for a, _, _, _ in rows]

    def line_at(self, pc: int) -> Line | None:
        """The source line the instruction at ``pc`` belongs to."""
        if not self.rows:
            return None
        i = bisect.bisect_right(self._addrs, pc) - 1
        if i < 0 or pc >= self._ends[i]:
            return None
        return self.rows[i]

    def line_starts(self, pc: int) -> bool:
        """``pc`` is the first address of a line-table row."""
        i = bisect.bisect_left(self._addrs, pc)
        return i < len(self._addrs) and self._addrs[i] == pc

    def address_of(self, file: str, line: int) -> tuple[int, Line] | None:
        """The lowest address of ``file:line`` (or of the next line with code)."""
        name = os.path.basename(file)
        candidates = [r for r in self.rows if os.path.basename(r.file) == name or r.file.endswith(file)]
        if not candidates:
            return None
        for want in range(line, line + 50):
            hits = [r for r in candidates if r.line == want]
            if hits:
                best = min(hits, key=lambda r: r.address)
                return best.address, best
        return None

    def source(self, file: str) -> list[str] | None:
        """The lines of a source file, if it is still where the compiler saw it."""
        if file not in self._sources:
            # The name comes from the ELF: a regular file only, bounded (a hostile image
            # could name /dev/zero or a FIFO).
            try:
                data = userfiles.read_bounded(file, SOURCE_MAX)
            except OSError:
                data = None
            self._sources[file] = (data.decode("utf-8", errors="replace").splitlines()
                                   if data is not None and len(data) <= SOURCE_MAX else None)
        return self._sources[file]

    # ------------------------------------------------------------------ frames
    def _read_frames(self, dwarf) -> None:
        if not dwarf.has_CFI():
            return
        for entry in dwarf.CFI_entries():
            if not isinstance(entry, FDE):
                continue
            start = entry.header["initial_location"]
            end = start + entry.header["address_range"]
            try:
                table = entry.get_decoded().table
            except (KeyError, ValueError, AssertionError):
                continue
            self._fdes.append((start, end, table))
        self._fdes.sort(key=lambda f: f[0])
        self._fde_starts = [f[0] for f in self._fdes]

    def frame_rule(self, pc: int) -> FrameRule | None:
        """How to unwind from ``pc`` (None: no frame information covers it)."""
        i = bisect.bisect_right(self._fde_starts, pc) - 1
        if i < 0:
            return None
        start, end, table = self._fdes[i]
        if pc >= end:
            return None
        row = None
        for r in table:
            if r["pc"] <= pc:
                row = r
            else:
                break
        if row is None or "cfa" not in row:
            return None
        cfa = row["cfa"]
        saved = {reg: rule.arg for reg, rule in row.items()
                 if isinstance(reg, int) and isinstance(rule, RegisterRule) and rule.type == RegisterRule.OFFSET}
        return FrameRule(cfa.reg, cfa.offset, saved)
