"""Hostile ELFs and symbols (issue 11): headers that claim more than the chip has, and
symbols that are not objects in memory, are refused before anything is read or written."""

from __future__ import annotations

import io
import struct
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile
from test_loader import P_FILESZ, assert_load_error, first_load_phdr, patched, write

from pkasim.base import limits
from pkasim.base.errors import LoadError
from pkasim.chip.loader import load_image

P_MEMSZ = 20
SH_SIZE = 20


@pytest.fixture(scope="module")
def hello_bytes(build_dir: Path) -> bytes:
    return (build_dir / "hello.elf").read_bytes()


@pytest.fixture(scope="module")
def hello(build_dir: Path, config):
    return load_image(build_dir / "hello.elf", config)


def section_header(data: bytes, name: str) -> int:
    """File offset of the named section's header."""
    elf = ELFFile(io.BytesIO(data))
    index = next(i for i, sec in enumerate(elf.iter_sections()) if sec.name == name)
    return elf["e_shoff"] + index * elf["e_shentsize"]


def symbol_entry(data: bytes, name: str) -> int:
    """File offset of the named symbol's Elf32_Sym entry."""
    symtab = ELFFile(io.BytesIO(data)).get_section_by_name(".symtab")
    index = next(i for i, sym in enumerate(symtab.iter_symbols()) if sym.name == name)
    return symtab["sh_offset"] + index * symtab["sh_entsize"]


# --------------------------------------------------------------------------- segments and sections

def test_a_first_segment_claiming_p_memsz_0xfffffff0_is_refused(hello_bytes: bytes, tmp_path: Path, config) -> None:
    at = first_load_phdr(hello_bytes)[0]
    message = assert_load_error(write(tmp_path, patched(hello_bytes, at + P_MEMSZ, "I", 0xFFFFFFF0)), config)
    assert "segment 0 runs at 0x00000000-0xfffffff0 and does not fit" in message


def test_a_segment_with_more_file_bytes_than_memory_bytes_is_refused(hello_bytes: bytes, tmp_path: Path,
                                                                      config) -> None:
    at, _, _, filesz = first_load_phdr(hello_bytes)
    message = assert_load_error(write(tmp_path, patched(hello_bytes, at + P_MEMSZ, "I", filesz - 4)), config)
    assert "more bytes in the file" in message


def test_a_segment_too_big_for_the_chip_is_refused_before_it_is_read(hello_bytes: bytes, tmp_path: Path,
                                                                      config) -> None:
    at = first_load_phdr(hello_bytes)[0]
    data = patched(patched(hello_bytes, at + P_FILESZ, "I", 0x7FFF_0000), at + P_MEMSZ, "I", 0x7FFF_0000)
    assert "does not fit" in assert_load_error(write(tmp_path, data), config)


def test_a_code_section_claiming_more_than_memory_is_refused(hello_bytes: bytes, tmp_path: Path, config) -> None:
    data = patched(hello_bytes, section_header(hello_bytes, ".text") + SH_SIZE, "I", 0xFFFF_FFF0)
    message = assert_load_error(write(tmp_path, data), config)
    assert "code section .text" in message and "does not fit" in message


def test_an_elf_larger_than_the_limit_is_refused_unread(hello_bytes: bytes, tmp_path: Path, config) -> None:
    path = write(tmp_path, hello_bytes)
    with path.open("r+b") as fh:
        fh.truncate(limits.ELF_MAX_BYTES + 1)  # sparse: no disk space used
    message = assert_load_error(path, config)
    assert f"at most {limits.ELF_MAX_BYTES >> 20} MiB" in message


# --------------------------------------------------------------------------- symbols for --load / --dump

def test_linker_constants_are_marked_absolute(hello) -> None:
    assert hello.symbols["_min_stack_size"].absolute
    assert hello.symbols["_estack"].absolute
    assert not hello.symbols["main"].absolute


@pytest.mark.parametrize("name", ["_min_stack_size", "_estack"])
def test_the_extent_of_a_linker_constant_is_refused(name: str, hello, config) -> None:
    with pytest.raises(LoadError, match=f"'{name}' is a linker constant"):
        hello.extent(name, config)


def test_the_extent_of_a_sized_symbol_is_its_size(hello, config) -> None:
    main = hello.symbols["main"]
    assert hello.extent("main", config) == (main.address, main.size, config.flash)


def test_the_extent_of_a_zero_size_symbol_runs_to_the_end_of_its_region(hello, config) -> None:
    ebss = hello.symbols["_ebss"]
    assert ebss.size == 0
    assert hello.extent("_ebss", config) == (ebss.address, config.sram.end - ebss.address, config.sram)


def test_the_extent_of_a_symbol_claiming_0xffffffff_bytes_is_refused(hello_bytes: bytes, tmp_path: Path,
                                                                     config) -> None:
    data = patched(hello_bytes, symbol_entry(hello_bytes, "main") + 8, "I", 0xFFFF_FFFF)
    image = load_image(write(tmp_path, data), config)
    with pytest.raises(LoadError, match="'main' claims 4,294,967,295 bytes .* past the end of flash"):
        image.extent("main", config)


def test_the_extent_of_a_symbol_outside_memory_is_refused(hello_bytes: bytes, tmp_path: Path, config) -> None:
    data = patched(hello_bytes, symbol_entry(hello_bytes, "main") + 4, "I", 0x3000_0000)
    image = load_image(write(tmp_path, data), config)
    with pytest.raises(LoadError, match="'main' at 0x30000000 is not in memory"):
        image.extent("main", config)


def test_symbol_entry_helper_finds_main(hello_bytes: bytes, hello) -> None:
    value, = struct.unpack_from("<I", hello_bytes, symbol_entry(hello_bytes, "main") + 4)
    assert value & ~1 == hello.symbols["main"].address


# --------------------------------------------------------------------------- the same bounds through the API

def test_write_symbol_refuses_a_linker_constant(make_machine, build_dir: Path) -> None:
    m = make_machine()
    m.load(build_dir / "hello.elf")
    flash_before = m.read_memory(0x400, 64)
    with pytest.raises(LoadError, match="'_min_stack_size' is a linker constant"):
        m.write_symbol("_min_stack_size", bytes(64))
    assert m.read_memory(0x400, 64) == flash_before


def test_write_symbol_into_a_zero_size_symbol_stops_at_the_end_of_its_region(make_machine, build_dir: Path,
                                                                            config) -> None:
    m = make_machine()
    m.load(build_dir / "hello.elf")
    room = config.sram.end - m.image.symbols["_ebss"].address
    with pytest.raises(LoadError, match=f"do not fit in '_ebss' \\({room} bytes\\)"):
        m.write_symbol("_ebss", bytes(room + 1))
    m.write_symbol("_ebss", b"\x5a" * 8)
    assert m.read_symbol("_ebss", 8) == b"\x5a" * 8


# --------------------------------------------------------------------------- stripped images

def unsymbolled(data: bytes) -> bytes:
    """The image as `strip` leaves it for the loader: no .symtab, so no $t/$d mapping
    symbols, and nothing tells literal pools from code."""
    elf = ELFFile(io.BytesIO(data))
    sections = {sec.name: (i, sec) for i, sec in enumerate(elf.iter_sections())}
    index, _ = sections[".symtab"]
    return patched(data, elf["e_shoff"] + index * elf["e_shentsize"], "I", sections[".strtab"][1]["sh_name"])


def test_a_stripped_image_whose_literal_pools_decode_as_vfp_runs(build_dir: Path, tmp_path: Path,
                                                                 make_machine) -> None:
    path = write(tmp_path, unsymbolled((build_dir / "nested.elf").read_bytes()))
    m = make_machine()
    m.load(path)
    assert m.run(max_cycles=10**6).exit_code == 0
