"""Empty the address ranges the linker left in the DWARF of code it threw away.

    python firmware/tools/dwarf_dead.py IMAGE.elf      # rewrites IMAGE.elf in place

Why: the images link with --gc-sections. A function the linker discards keeps its
DWARF (DW_TAG_subprogram, its inlined calls and lexical blocks), and the relocation of
its DW_AT_low_pc resolves to 0, so the entry claims [0, size). On most hosts address 0
holds nothing, and debuggers skip ranges that start there; on this chip flash starts
at 0 and real code lies inside those ranges. zig's compiler_rt, linked into every zig
image, contributes about 2,000 such entries (its __udivmoddi4 claims 0x000-0x5b4), our
own sources a few. gdb then places a PC of code without debug info (bn.c's assembly
bn_muladdc_thumb at 0x54c) in compiler_rt's __udivmoddi4 and prints "(Internal error: pc
0x54c in read in CU, but not in symtab.)" at every stop there, in `bt` and `finish`.
lld's `-z dead-reloc-in-nonalloc=.debug_info=...` would pick another tombstone, but
zig cc refuses the option, and GNU ld has no such option.

What it does: for every debugging entry (.debug_info) whose DW_AT_low_pc is 0 and whose DW_AT_high_pc
is an offset (a DW_FORM_data* length, DWARF 4 and 5), it writes a length of 0. An
entry with high <= low describes no code: gdb, lldb and pyelftools all skip it. Address
0 is the vector table on every pkasim chip (data, never a function), so no real entry
starts there. Nothing but those length bytes changes: code, symbols and every other
debugging entry stay as they were.
"""

from __future__ import annotations

import sys
from pathlib import Path

from elftools.elf.elffile import ELFFile

LENGTH_FORMS = {"DW_FORM_data1": 1, "DW_FORM_data2": 2, "DW_FORM_data4": 4, "DW_FORM_data8": 8,
                "DW_FORM_udata": None, "DW_FORM_sdata": None}


def dead_ranges(path: Path) -> list[tuple[int, bytes]]:
    """(file offset, new bytes) of every DW_AT_high_pc length to make 0."""
    patches: list[tuple[int, bytes]] = []
    with path.open("rb") as fh:
        elf = ELFFile(fh)
        if not elf.has_dwarf_info():
            return patches
        section = elf.get_section_by_name(".debug_info")
        if section is None or section["sh_type"] == "SHT_NOBITS":
            return patches
        if section.compressed or elf.elfclass != 32:
            raise SystemExit(f"{path}: only uncompressed 32-bit DWARF is handled")
        patches += _dead_fdes(elf)
        base = section["sh_offset"]
        for cu in elf.get_dwarf_info().iter_CUs():
            top = cu.get_top_DIE()
            for die in cu.iter_DIEs():
                if die is top:  # a CU's low_pc 0 is the base of its DW_AT_ranges, not a tombstone
                    continue
                low, high = die.attributes.get("DW_AT_low_pc"), die.attributes.get("DW_AT_high_pc")
                if low is None or high is None or low.value != 0 or high.form not in LENGTH_FORMS or high.value == 0:
                    continue
                size = LENGTH_FORMS[high.form]
                if size is None:  # LEB128: 0 written in as many bytes as the value had (0x80 ... 0x80 0x00)
                    size = _leb_size(fh, base + high.offset)
                    patches.append((base + high.offset, bytes([0x80] * (size - 1) + [0])))
                else:
                    patches.append((base + high.offset, bytes(size)))
    return patches


def _dead_fdes(elf: ELFFile) -> list[tuple[int, bytes]]:
    """.debug_frame's FDEs of discarded code: initial_location 0, address_range its size.
    gdb unwinds a PC inside one with that function's rules (a PC in code without CFI
    then looks like the outermost frame: no `bt`, no `finish`); a range of 0 covers
    nothing. 32-bit DWARF: length, CIE pointer, initial_location, address_range."""
    section = elf.get_section_by_name(".debug_frame")
    if section is None or section["sh_type"] == "SHT_NOBITS" or section.compressed:
        return []
    data, base, patches, at = section.data(), section["sh_offset"], [], 0
    while at + 16 <= len(data):
        length = int.from_bytes(data[at:at + 4], "little")
        if length == 0xFFFFFFFF or length < 12:  # 64-bit DWARF (not made for this core) or a terminator
            break
        cie = int.from_bytes(data[at + 4:at + 8], "little")
        start = int.from_bytes(data[at + 8:at + 12], "little")
        size = int.from_bytes(data[at + 12:at + 16], "little")
        if cie != 0xFFFFFFFF and start == 0 and size:
            patches.append((base + at + 12, bytes(4)))
        at += 4 + length
    return patches


def _leb_size(fh, offset: int) -> int:
    fh.seek(offset)
    size = 1
    while fh.read(1)[0] & 0x80:
        size += 1
    return size


def fix(path: Path) -> int:
    """Rewrite ``path``; return the number of entries emptied."""
    patches = dead_ranges(path)
    if patches:
        data = bytearray(path.read_bytes())
        for offset, new in patches:
            data[offset:offset + len(new)] = new
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    return len(patches)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 64
    for name in argv:
        fix(Path(name))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
