"""ELF images: check that one fits the chip, and keep its segments, code and symbols.

An image is loaded the way a flash programmer does it: PT_LOAD segments by physical
(load) address, so initialised data lands in flash and the firmware's startup code
copies it. Symbols are kept for reports (PC as symbol+offset) and for --load/--dump.
"""

from __future__ import annotations

import bisect
import io
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from elftools.common.exceptions import ELFError
from elftools.elf.constants import SH_FLAGS
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from pkasim.base import limits, userfiles
from pkasim.base.errors import InputMissingError, LoadError
from pkasim.chip.config import ChipConfig, Region


@dataclass(frozen=True)
class Symbol:
    name: str
    address: int
    size: int
    kind: str  # "func" or "object"
    absolute: bool = False  # SHN_ABS: a linker constant (_min_stack_size), not a place in memory


@dataclass(frozen=True)
class Section:
    """An allocated section: where it runs (vma) and where its bytes are stored (lma)."""

    name: str
    vma: int
    lma: int
    size: int
    nobits: bool  # .bss-like: no bytes in the image, zeroed by the startup code


@dataclass
class Image:
    """A checked firmware image ready to be written into the machine's memory."""

    path: str
    entry: int
    segments: list[tuple[int, bytes]]  # (load address, bytes incl. zero fill)
    code: list[tuple[int, bytes]]  # Thumb code ranges, by the $t/$d mapping symbols
    symbols: dict[str, Symbol] = field(default_factory=dict)
    sections: list[Section] = field(default_factory=list)
    _func_starts: list[int] = field(default_factory=list)
    _funcs: list[Symbol] = field(default_factory=list)

    def symbol(self, name: str) -> Symbol:
        try:
            return self.symbols[name]
        except KeyError:
            raise LoadError(f"{self.path}: no symbol named '{name}'") from None

    def extent(self, name: str, config: ChipConfig) -> tuple[int, int, Region]:
        """Where the object ``name`` lives and how many bytes --load/--dump may touch:
        its size, or up to the end of its memory region when the symbol has none
        (``_ebss``). Linker constants and objects that do not fit their region are
        refused here, before any file is read or any byte written."""
        sym = self.symbol(name)
        if sym.absolute:
            raise LoadError(f"{self.path}: '{name}' is a linker constant (absolute symbol, value "
                            f"0x{sym.address:x}), not an object in memory")
        region = config.region_at(sym.address)
        if region is None:
            raise LoadError(f"{self.path}: '{name}' at 0x{sym.address:08x} is not in memory ({_regions(config)})")
        if sym.size and not region.contains(sym.address, sym.size):
            raise LoadError(f"{self.path}: '{name}' claims {sym.size:,} bytes at 0x{sym.address:08x}, past the "
                            f"end of {region.name} (0x{region.end:08x})")
        return sym.address, sym.size or region.end - sym.address, region

    def section_of(self, addr: int) -> Section | None:
        for sec in self.sections:
            if sec.vma <= addr < sec.vma + sec.size:
                return sec
        return None

    def describe(self, addr: int) -> str:
        """``name+0xoff`` for an address inside a function, else the hex address."""
        addr &= ~1
        i = bisect.bisect_right(self._func_starts, addr) - 1
        if i >= 0:
            sym = self._funcs[i]
            if addr < sym.address + max(sym.size, 2):
                off = addr - sym.address
                return f"{sym.name}+0x{off:x}" if off else sym.name
        return f"0x{addr:08x}"


def load_image(path: str | Path, config: ChipConfig) -> Image:
    """Read and check an ELF against the chip's memory map."""
    return _load(path, config, keep=False)[0]


def load_image_bytes(path: str | Path, config: ChipConfig) -> tuple[Image, bytes, os.stat_result]:
    """``load_image``, also giving the exact bytes the image was parsed from and the
    file's status once they were read: what a cache of loaded machines keys on
    (pkasim.core.reuse), so that the digest it keeps is that of the bytes loaded, not
    of whatever the file holds by the time it is hashed."""
    return _load(path, config, keep=True)


def _load(path: str | Path, config: ChipConfig, keep: bool) -> tuple[Image, bytes, os.stat_result]:
    path = Path(path)
    name = str(path)
    try:
        fh = userfiles.open_input(path, streams=True)  # never waits for a FIFO's writer
    except FileNotFoundError:
        raise InputMissingError(f"{name}: no such file") from None
    except OSError as exc:
        raise InputMissingError(f"{name}: cannot open: {exc.strerror}") from None
    with fh:
        info = os.fstat(fh.fileno())
        if stat.S_ISFIFO(info.st_mode):  # a device reads (and fails the magic check); a pipe cannot seek
            raise InputMissingError(f"{name}: cannot open: not a regular file but a FIFO (named pipe); "
                                    "an ELF is read by seeking in it")
        if stat.S_ISREG(info.st_mode) and info.st_size > limits.ELF_MAX_BYTES:
            raise LoadError(f"{name}: {info.st_size:,} bytes; an ELF of at most "
                            f"{limits.ELF_MAX_BYTES >> 20} MiB is read")
        data = b""
        stream: BinaryIO = fh
        if keep:
            data = fh.read(limits.ELF_MAX_BYTES + 1)
            if len(data) > limits.ELF_MAX_BYTES:
                raise LoadError(f"{name}: more than {limits.ELF_MAX_BYTES >> 20} MiB; an ELF of at most "
                                f"{limits.ELF_MAX_BYTES >> 20} MiB is read")
            info = os.fstat(fh.fileno())
            stream = io.BytesIO(data)
        try:
            return _read(ELFFile(stream), name, config), data, info
        except ELFError as exc:
            text = str(exc)
            if "expected" in text and "found" in text:  # a structure cut short by end of file
                raise LoadError(f"{name}: truncated ELF file ({text})") from None
            raise LoadError(f"{name}: not a valid ELF file: {text}") from None
        except (ValueError, KeyError, IndexError, OSError) as exc:
            # pyelftools reports truncation and garbage in headers this way
            raise LoadError(f"{name}: malformed or truncated ELF: {exc}") from None


def _read(elf: ELFFile, name: str, config: ChipConfig) -> Image:
    if elf.elfclass != 32 or not elf.little_endian:
        endian = "little" if elf.little_endian else "big"
        raise LoadError(f"{name}: expected a 32-bit little-endian ELF, got {elf.elfclass}-bit {endian}-endian")
    if elf["e_machine"] != "EM_ARM":
        raise LoadError(f"{name}: expected an ARM ELF (EM_ARM), got {elf['e_machine']}")
    if elf["e_type"] != "ET_EXEC":
        raise LoadError(f"{name}: expected an executable (ET_EXEC), got {elf['e_type']}; link the object first")

    segments: list[tuple[int, bytes]] = []
    for i, seg in enumerate(elf.iter_segments()):
        if seg["p_type"] != "PT_LOAD" or seg["p_memsz"] == 0:
            continue
        paddr, vaddr, filesz, memsz = seg["p_paddr"], seg["p_vaddr"], seg["p_filesz"], seg["p_memsz"]
        if filesz > memsz:
            raise LoadError(f"{name}: segment {i} has more bytes in the file ({filesz:,}) than in memory ({memsz:,})")
        # Where it runs, zero fill (.bss) included, must be memory: a segment that claims
        # more than the chip has is refused rather than loaded short.
        vregion = config.region_at(vaddr)
        if vregion is None or not vregion.contains(vaddr, memsz):
            raise LoadError(f"{name}: segment {i} runs at 0x{vaddr:08x}-0x{vaddr + memsz:08x} and does not fit "
                            f"the memory map of {config.chip} ({_regions(config)})")
        # Zero fill beyond filesz belongs to the run-time address (.bss); the startup
        # code clears it, so only the file bytes are programmed at the load address.
        if filesz == 0:
            continue
        region = config.region_at(paddr)
        if region is None or not region.contains(paddr, filesz):
            raise LoadError(
                f"{name}: segment {i} at 0x{paddr:08x}-0x{paddr + filesz:08x} does not fit "
                f"the memory map of {config.chip} ({_regions(config)})"
            )
        data = seg.data()  # read only once it is known to fit
        if len(data) != filesz:
            raise LoadError(f"{name}: segment {i} is truncated ({len(data)} of {filesz} bytes in the file)")
        segments.append((paddr, data))
    if not segments:
        raise LoadError(f"{name}: has no loadable segments")

    symbols, funcs, mapping = _symbols(elf, name)
    code = _code_ranges(elf, mapping, name, config)
    entry = elf["e_entry"]
    image = Image(path=name, entry=entry, segments=segments, code=code, symbols=symbols,
                  sections=_sections(elf))
    image._funcs = sorted(funcs, key=lambda s: s.address)
    image._func_starts = [s.address for s in image._funcs]
    _check_vectors(image, config)
    return image


def _sections(elf: ELFFile) -> list[Section]:
    loads = [seg for seg in elf.iter_segments() if seg["p_type"] == "PT_LOAD"]
    out = []
    for sec in elf.iter_sections():
        if not sec["sh_flags"] & SH_FLAGS.SHF_ALLOC or sec["sh_size"] == 0:
            continue
        vma = sec["sh_addr"]
        lma = vma
        for seg in loads:
            if seg["p_vaddr"] <= vma < seg["p_vaddr"] + seg["p_memsz"]:
                lma = seg["p_paddr"] + (vma - seg["p_vaddr"])
                break
        out.append(Section(sec.name, vma, lma, sec["sh_size"], sec["sh_type"] == "SHT_NOBITS"))
    return out


def _regions(config: ChipConfig) -> str:
    return ", ".join(f"{r.name} 0x{r.base:08x}-0x{r.end:08x}" for r in config.memory.values())


def _symbols(elf: ELFFile, name: str) -> tuple[dict[str, Symbol], list[Symbol], list[tuple[int, int, str]]]:
    symbols: dict[str, Symbol] = {}
    funcs: list[Symbol] = []
    mapping: list[tuple[int, int, str]] = []  # (section index, address, "$t" or "$d")
    symtab = elf.get_section_by_name(".symtab")
    if symtab is None:
        return symbols, funcs, mapping  # stripped: reports show addresses only
    if not isinstance(symtab, SymbolTableSection):
        raise LoadError(f"{name}: .symtab is not a symbol table (corrupt section headers)")
    for sym in symtab.iter_symbols():
        name = sym.name
        stype = sym["st_info"]["type"]
        if name in ("$t", "$d", "$a") or name.startswith(("$t.", "$d.")):
            # Mapping symbols mark code and data inside their own section only (a $d of
            # a debug section has an address that may fall inside .text).
            if isinstance(sym["st_shndx"], int):
                mapping.append((sym["st_shndx"], sym["st_value"], name[:2]))
            continue
        if not name or stype not in ("STT_FUNC", "STT_OBJECT", "STT_NOTYPE") or sym["st_shndx"] == "SHN_UNDEF":
            continue
        addr = sym["st_value"]
        kind = "func" if stype == "STT_FUNC" else "object"
        if kind == "func":
            addr &= ~1
        s = Symbol(name=name, address=addr, size=sym["st_size"], kind=kind, absolute=sym["st_shndx"] == "SHN_ABS")
        if kind == "func":
            funcs.append(s)
        if name not in symbols or symbols[name].kind != "func":
            symbols[name] = s
    mapping.sort()
    return symbols, funcs, mapping


def _code_ranges(elf: ELFFile, mapping: list[tuple[int, int, str]], name: str,
                 config: ChipConfig) -> list[tuple[int, bytes]]:
    """Executable section bytes split at their own $d mapping symbols (literal pools, tables)."""
    ranges: list[tuple[int, bytes]] = []
    for index, sec in enumerate(elf.iter_sections()):
        if not sec["sh_flags"] & SH_FLAGS.SHF_EXECINSTR or sec["sh_type"] != "SHT_PROGBITS":
            continue
        start, size = sec["sh_addr"], sec["sh_size"]
        region = config.region_at(start)
        if sec["sh_flags"] & SH_FLAGS.SHF_ALLOC and (region is None or not region.contains(start, size)):
            # Its instructions are decoded for the cycle tables: a section header that
            # claims more than memory holds is refused, not decoded byte by byte.
            raise LoadError(f"{name}: code section {sec.name} at 0x{start:08x}-0x{start + size:08x} does not fit "
                            f"the memory map of {config.chip} ({_regions(config)})")
        if not sec["sh_flags"] & SH_FLAGS.SHF_ALLOC:
            continue
        data = sec.data()
        end = start + len(data)
        marks = [(a, k) for i, a, k in mapping if i == index and start <= a < end]
        if not marks or marks[0][0] != start:
            marks.insert(0, (start, "$t"))
        for (a, kind), nxt in zip(marks, marks[1:] + [(end, "")]):
            if kind == "$t" and nxt[0] > a:
                ranges.append((a, data[a - start : nxt[0] - start]))
    return ranges


def _check_vectors(image: Image, config: ChipConfig) -> None:
    """The reset vector must be where the core fetches it: address 0 of flash."""
    flash = config.flash
    first = next((data for base, data in image.segments if base == flash.base), None)
    if first is None or len(first) < 8:
        raise LoadError(f"{image.path}: no vector table at 0x{flash.base:08x} (the core reads SP and PC from there at reset)")
