"""ELF images: malformed or unfitting files are one-line LoadErrors; symbols and code ranges are kept."""

from __future__ import annotations

import io
import struct
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pkasim.base.errors import EXIT_BAD_INPUT, EXIT_NO_INPUT, InputMissingError, LoadError
from pkasim.chip.config import parse_config
from pkasim.chip.loader import load_image

# Elf32_Ehdr field offsets
EI_CLASS, EI_DATA, E_TYPE, E_MACHINE = 4, 5, 16, 18
E_PHOFF, E_SHOFF, E_PHENTSIZE, E_PHNUM = 28, 32, 42, 44
# Elf32_Phdr field offsets
P_TYPE, P_OFFSET, P_PADDR, P_FILESZ = 0, 4, 12, 16
PT_LOAD = 1


@pytest.fixture(scope="module")
def hello_bytes(build_dir: Path) -> bytes:
    return (build_dir / "hello.elf").read_bytes()


def patched(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into("<" + fmt, out, offset, value)
    return bytes(out)


def load_phdrs(data: bytes) -> list[tuple[int, int, int, int]]:
    """(file offset of the header, p_type, p_offset, p_filesz) for each program header."""
    phoff, = struct.unpack_from("<I", data, E_PHOFF)
    entsize, num = struct.unpack_from("<HH", data, E_PHENTSIZE)
    out = []
    for i in range(num):
        at = phoff + i * entsize
        p_type, p_offset = struct.unpack_from("<II", data, at + P_TYPE)
        p_filesz, = struct.unpack_from("<I", data, at + P_FILESZ)
        out.append((at, p_type, p_offset, p_filesz))
    return out


def first_load_phdr(data: bytes) -> tuple[int, int, int, int]:
    return next(ph for ph in load_phdrs(data) if ph[1] == PT_LOAD and ph[3] > 0)


def assert_load_error(path: Path, config) -> str:
    with pytest.raises(LoadError) as info:
        load_image(path, config)
    assert type(info.value) is LoadError
    assert info.value.exit_code == EXIT_BAD_INPUT == 65
    message = str(info.value)
    assert "\n" not in message, f"not one line: {message!r}"
    assert message.startswith(f"{path}: ")
    return message


def write(tmp_path: Path, data: bytes, name: str = "bad.elf") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


# --------------------------------------------------------------------------- malformed files

def test_garbage_bytes_are_not_an_elf(tmp_path: Path, config) -> None:
    message = assert_load_error(write(tmp_path, bytes(range(256)) * 8), config)
    assert "ELF" in message


def test_garbage_after_the_elf_magic_is_not_an_elf(tmp_path: Path, config) -> None:
    assert_load_error(write(tmp_path, b"\x7fELF" + b"\xa5" * 1000), config)


def test_empty_file_is_not_an_elf(tmp_path: Path, config) -> None:
    assert_load_error(write(tmp_path, b""), config)


def truncation_points(data: bytes) -> dict[str, int]:
    phoff, = struct.unpack_from("<I", data, E_PHOFF)
    shoff, = struct.unpack_from("<I", data, E_SHOFF)
    entsize, num = struct.unpack_from("<HH", data, E_PHENTSIZE)
    _, _, seg_offset, seg_size = first_load_phdr(data)
    return {
        "inside e_ident": 10,
        "inside the ELF header": 40,
        "inside the program header table": phoff + entsize + 5,
        "after the program headers, before any segment": phoff + num * entsize + 4,
        "inside the first segment": seg_offset + seg_size // 2,
        "inside the section header table": shoff + 60,
        "one byte short": len(data) - 1,
    }


@pytest.mark.parametrize("where", [
    "inside e_ident",
    "inside the ELF header",
    "inside the program header table",
    "after the program headers, before any segment",
    "inside the first segment",
    "inside the section header table",
    "one byte short",
])
def test_truncated_elf_is_a_load_error(where: str, hello_bytes: bytes, tmp_path: Path, config) -> None:
    cut = truncation_points(hello_bytes)[where]
    assert 0 < cut < len(hello_bytes)
    assert_load_error(write(tmp_path, hello_bytes[:cut]), config)


def test_truncated_segment_says_which_segment(hello_bytes: bytes, tmp_path: Path, config) -> None:
    _, _, seg_offset, seg_size = first_load_phdr(hello_bytes)
    message = assert_load_error(write(tmp_path, hello_bytes[: seg_offset + seg_size // 2]), config)
    assert "segment" in message
    assert "truncated" in message


def test_64_bit_elf_is_refused(hello_bytes: bytes, tmp_path: Path, config) -> None:
    message = assert_load_error(write(tmp_path, patched(hello_bytes, EI_CLASS, "B", 2)), config)
    assert "32-bit" in message


def test_big_endian_elf_is_refused(hello_bytes: bytes, tmp_path: Path, config) -> None:
    message = assert_load_error(write(tmp_path, patched(hello_bytes, EI_DATA, "B", 2)), config)
    assert "little-endian" in message


@pytest.mark.parametrize("byte", [EI_CLASS, EI_DATA])
def test_invalid_ident_byte_is_refused(byte: int, hello_bytes: bytes, tmp_path: Path, config) -> None:
    assert_load_error(write(tmp_path, patched(hello_bytes, byte, "B", 0)), config)


@pytest.mark.parametrize("machine", [3, 62])  # EM_386, EM_X86_64
def test_non_arm_elf_is_refused(machine: int, hello_bytes: bytes, tmp_path: Path, config) -> None:
    message = assert_load_error(write(tmp_path, patched(hello_bytes, E_MACHINE, "H", machine)), config)
    assert "EM_ARM" in message


@pytest.mark.parametrize("e_type", [1, 3])  # ET_REL, ET_DYN
def test_non_executable_elf_is_refused(e_type: int, hello_bytes: bytes, tmp_path: Path, config) -> None:
    message = assert_load_error(write(tmp_path, patched(hello_bytes, E_TYPE, "H", e_type)), config)
    assert "ET_EXEC" in message


def test_image_larger_than_flash_does_not_fit(build_dir: Path) -> None:
    image = build_dir / "compute.elf"
    data = image.read_bytes()
    tiny = parse_config(
        "chip: TINY\ncore:\n  type: sc000\n  clock_hz: 48 MHz\n"
        "memory:\n  flash:\n    base: 0\n    size: 1 KiB\n  sram:\n    base: 0x20000000\n    size: 16 KiB\n",
        "tiny.yaml",
    )
    flash_end = sum(ph[3] for ph in load_phdrs(data) if ph[1] == PT_LOAD and ph[3] > 0)
    assert flash_end > 1024, "test bug: compute.elf must not fit in 1 KiB"
    message = assert_load_error(image, tiny)
    assert "does not fit" in message
    assert "TINY" in message


@pytest.mark.parametrize("paddr", [0x3000_0000, 0x0004_FFF0])  # unmapped; straddling the end of flash
def test_segment_outside_the_memory_map_does_not_fit(paddr: int, hello_bytes: bytes, tmp_path: Path, config) -> None:
    at = first_load_phdr(hello_bytes)[0]
    message = assert_load_error(write(tmp_path, patched(hello_bytes, at + P_PADDR, "I", paddr)), config)
    assert f"0x{paddr:08x}" in message
    assert "does not fit" in message


def test_segment_size_past_the_end_of_the_file_is_a_load_error(hello_bytes: bytes, tmp_path: Path, config) -> None:
    at = first_load_phdr(hello_bytes)[0]
    assert_load_error(write(tmp_path, patched(hello_bytes, at + P_FILESZ, "I", 0x7FFF_FFFF)), config)


def test_missing_file_is_input_missing(tmp_path: Path, config) -> None:
    path = tmp_path / "nope.elf"
    with pytest.raises(InputMissingError) as info:
        load_image(path, config)
    assert info.value.exit_code == EXIT_NO_INPUT == 66
    assert str(info.value).startswith(f"{path}: ")
    assert "\n" not in str(info.value)


def test_a_directory_is_input_missing(tmp_path: Path, config) -> None:
    with pytest.raises(InputMissingError) as info:
        load_image(tmp_path, config)
    assert info.value.exit_code == 66


def test_machine_load_raises_the_same_load_error(make_machine, tmp_path: Path) -> None:
    with pytest.raises(LoadError):
        make_machine().load(write(tmp_path, b"not an elf"))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(st.integers(0, 255), st.integers(0, 255)), min_size=1, max_size=8))
def test_mutated_headers_load_or_raise_load_error(edits, hello_bytes: bytes, tmp_path: Path, config) -> None:
    data = bytearray(hello_bytes)
    for offset, value in edits:
        data[offset] = value
    path = write(tmp_path, bytes(data), "mutant.elf")
    try:
        load_image(path, config)
    except LoadError as exc:
        assert "\n" not in str(exc)
        assert str(exc).startswith(f"{path}: ")


# --------------------------------------------------------------------------- what an image keeps

@pytest.fixture(scope="module")
def hello(build_dir: Path, config):
    return load_image(build_dir / "hello.elf", config)


def test_symbols_are_kept(hello) -> None:
    for name in ("main", "Reset_Handler"):
        sym = hello.symbols[name]
        assert sym.kind == "func"
        assert sym.address % 2 == 0  # the Thumb bit is stripped
        assert sym.size > 0
    assert hello.entry & ~1 == hello.symbols["Reset_Handler"].address


def test_unknown_symbol_is_a_load_error_naming_it(hello) -> None:
    with pytest.raises(LoadError, match="no symbol named 'no_such_symbol'"):
        hello.symbol("no_such_symbol")


def test_describe_gives_symbol_plus_offset(hello) -> None:
    main = hello.symbols["main"].address
    assert hello.describe(main) == "main"
    assert hello.describe(main + 2) == "main+0x2"
    assert hello.describe(main + 3) == "main+0x2"  # the Thumb bit is ignored
    assert hello.describe(hello.symbols["Reset_Handler"].address + 0x10) == "Reset_Handler+0x10"


def test_describe_outside_any_function_gives_the_address(hello) -> None:
    assert hello.describe(0x2000_0000) == "0x20000000"


def mapping_spans(path: Path) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """($t spans, $d spans) of the executable sections, read independently of the loader."""
    code, data = [], []
    with path.open("rb") as fh:
        elf = ELFFile(fh)
        marks = sorted((s["st_value"], s.name[:2]) for s in elf.get_section_by_name(".symtab").iter_symbols()
                       if s.name in ("$t", "$d") or s.name.startswith(("$t.", "$d.")))
        for sec in elf.iter_sections():
            if not sec["sh_flags"] & 0x4 or sec["sh_type"] != "SHT_PROGBITS":  # SHF_EXECINSTR
                continue
            start, end = sec["sh_addr"], sec["sh_addr"] + sec["sh_size"]
            inside = [m for m in marks if start <= m[0] < end]
            for (addr, kind), nxt in zip(inside, inside[1:] + [(end, "")]):
                if nxt[0] > addr:
                    (code if kind == "$t" else data).append((addr, nxt[0]))
    return code, data


@pytest.mark.parametrize("name", ["hello", "fault", "compute"])
def test_code_ranges_exclude_literal_pools(name: str, build_dir: Path, config) -> None:
    path = build_dir / f"{name}.elf"
    image = load_image(path, config)
    thumb, pools = mapping_spans(path)
    assert pools, "test bug: the image has no literal pools to exclude"
    ranges = [(addr, addr + len(data)) for addr, data in image.code]
    for lo, hi in pools:
        for a, b in ranges:
            assert b <= lo or a >= hi, f"code range 0x{a:x}-0x{b:x} covers literal pool 0x{lo:x}-0x{hi:x}"
    covered = {a for lo, hi in ranges for a in range(lo, hi)}
    for lo, hi in thumb:
        assert set(range(lo, hi)) <= covered, f"Thumb code 0x{lo:x}-0x{hi:x} missing from the code ranges"


def test_code_range_bytes_are_the_image_bytes(hello) -> None:
    flash = bytearray(0x1000)
    for base, data in hello.segments:
        if base < len(flash):
            flash[base:base + len(data)] = data
    for addr, data in hello.code:
        assert bytes(flash[addr:addr + len(data)]) == data


def test_a_loaded_image_runs(make_machine, build_dir: Path) -> None:
    machine = make_machine()
    machine.load(build_dir / "hello.elf")
    result = machine.run(max_cycles=10**6)
    assert result.exit_code == 0
    assert machine.stdout.getvalue().startswith(b"Hello from pkasim")
    assert machine.stderr.getvalue() == b"hello: this line goes to stderr\n"


def test_symtab_of_the_wrong_type_is_a_load_error(hello_bytes: bytes, tmp_path: Path, config) -> None:
    shoff, = struct.unpack_from("<I", hello_bytes, E_SHOFF)
    shentsize, = struct.unpack_from("<H", hello_bytes, 46)
    index = next(i for i, sec in enumerate(ELFFile(io.BytesIO(hello_bytes)).iter_sections()) if sec.name == ".symtab")
    data = patched(hello_bytes, shoff + index * shentsize + 4, "I", 1)  # sh_type = SHT_PROGBITS
    assert_load_error(write(tmp_path, data), config)
