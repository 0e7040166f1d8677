"""ELF mutation: real firmware images with their headers, program headers, section
headers and symbols bent the way a broken or hostile toolchain would bend them.

Mutations are structure-aware: a field (p_memsz, sh_size, st_value, e_phnum, ...) gets a
value that tends to break loaders (0, all ones, just past the end of flash, a size
that wraps the address space, the field's own value off by one), so most mutants get
past the magic-number check and reach the checks that matter. A few are plain byte
flips, truncations or appended garbage.
"""

from __future__ import annotations

import io
import random
import struct
from dataclasses import dataclass
from pathlib import Path

from elftools.elf.elffile import ELFFile

SEED_IMAGES = ("hello", "fault", "systick", "compute")

# (name, offset in the structure, struct format)
EHDR = [("e_type", 16, "H"), ("e_machine", 18, "H"), ("e_entry", 24, "I"), ("e_phoff", 28, "I"),
        ("e_shoff", 32, "I"), ("e_phentsize", 42, "H"), ("e_phnum", 44, "H"), ("e_shentsize", 46, "H"),
        ("e_shnum", 48, "H"), ("e_shstrndx", 50, "H")]
PHDR = [("p_type", 0, "I"), ("p_offset", 4, "I"), ("p_vaddr", 8, "I"), ("p_paddr", 12, "I"),
        ("p_filesz", 16, "I"), ("p_memsz", 20, "I"), ("p_flags", 24, "I")]
SHDR = [("sh_name", 0, "I"), ("sh_type", 4, "I"), ("sh_flags", 8, "I"), ("sh_addr", 12, "I"),
        ("sh_offset", 16, "I"), ("sh_size", 20, "I"), ("sh_link", 24, "I"), ("sh_entsize", 36, "I")]
SYM = [("st_value", 4, "I"), ("st_size", 8, "I"), ("st_info", 12, "B"), ("st_shndx", 14, "H")]

FLASH_END, SRAM_END = 0x50000, 0x20004000


@dataclass(frozen=True)
class Field:
    name: str
    offset: int
    fmt: str


def fields(data: bytes) -> list[Field]:
    """Every header field and the symbols' fields of an ELF, by file offset."""
    elf = ELFFile(io.BytesIO(data))
    out = [Field(f"ehdr.{n}", o, f) for n, o, f in EHDR]
    for i in range(elf["e_phnum"]):
        base = elf["e_phoff"] + i * elf["e_phentsize"]
        out += [Field(f"phdr[{i}].{n}", base + o, f) for n, o, f in PHDR]
    for i in range(elf["e_shnum"]):
        base = elf["e_shoff"] + i * elf["e_shentsize"]
        out += [Field(f"shdr[{i}].{n}", base + o, f) for n, o, f in SHDR]
    symtab = elf.get_section_by_name(".symtab")
    if symtab is not None:
        for i in range(min(symtab.num_symbols(), 400)):
            base = symtab["sh_offset"] + i * symtab["sh_entsize"]
            out += [Field(f"sym[{i}].{n}", base + o, f) for n, o, f in SYM]
    return out


def _value(rng: random.Random, old: int, fmt: str) -> int:
    mask = (1 << (8 * struct.calcsize(fmt))) - 1
    choices = [0, 1, 2, 0x7F, 0x80, mask, mask - 15, mask >> 1, (mask >> 1) + 1, old + 1, old - 1, old * 2,
               old + 0x1000, FLASH_END, FLASH_END - 4, SRAM_END, SRAM_END - 4, 0x30000000, 0xE000E000,
               rng.getrandbits(8 * struct.calcsize(fmt))]
    return rng.choice(choices) & mask


def mutate(data: bytes, rng: random.Random, table: list[Field]) -> tuple[bytes, str]:
    """One mutant of ``data`` and a short description of what was done."""
    out = bytearray(data)
    done = []
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3, 5))):
        kind = rng.random()
        if kind < 0.75:
            f = rng.choice(table)
            old, = struct.unpack_from("<" + f.fmt, out, f.offset)
            new = _value(rng, old, f.fmt)
            struct.pack_into("<" + f.fmt, out, f.offset, new)
            done.append(f"{f.name}=0x{new:x}")
        elif kind < 0.9:
            at = rng.randrange(len(out))
            out[at] = rng.randrange(256)
            done.append(f"byte[0x{at:x}]=0x{out[at]:02x}")
        elif kind < 0.96:
            cut = rng.randrange(len(out))
            del out[cut:]
            done.append(f"truncated at 0x{cut:x}")
            break
        else:
            extra = rng.randbytes(rng.randrange(1, 4096))
            out += extra
            done.append(f"+{len(extra)} garbage bytes")
    return bytes(out), "; ".join(done)


def seeds(build: Path) -> dict[str, tuple[bytes, list[Field]]]:
    """The seed images and their field tables."""
    out = {}
    for name in SEED_IMAGES:
        data = (build / f"{name}.elf").read_bytes()
        out[name] = (data, fields(data))
    return out


def case(rng: random.Random, corpus: dict[str, tuple[bytes, list[Field]]], workdir: Path,
         max_cycles: int) -> tuple[list[str], str]:
    """A mutant written to ``workdir`` and the command line that runs it."""
    name = rng.choice(sorted(corpus))
    data, table = corpus[name]
    mutant, what = mutate(data, rng, table)
    path = workdir / "mutant.elf"
    path.write_bytes(mutant)
    argv = ["run", str(path), "--max-cycles", str(max_cycles), "-q"]
    extra = rng.random()
    if extra < 0.15:
        argv += ["--dump", f"main={workdir / 'dump.bin'}"]
    elif extra < 0.25:
        small = workdir / "word.bin"
        small.write_bytes(rng.randbytes(4))
        argv += ["--load", f"{rng.choice(['fault_kind', 'systick_count', 'main', '_ebss'])}={small}"]
    return argv + ["--json", str(workdir / "run.json")], f"{name}: {what}"
