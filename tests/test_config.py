"""Chip descriptions: the documented defaults, units, and one-line `FILE:LINE: key.path: problem` errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pkasim.base.errors import EXIT_CONFIG, ConfigError, InputMissingError
from pkasim.chip.config import DEFAULT_CONFIG, load_config, parse_config, parse_frequency, parse_size

KiB = 1024

# A minimal valid chip; the line numbers below are the ones errors must point at.
MINIMAL = """\
chip: TEST
core:
  type: sc000
  clock_hz: 48 MHz
memory:
  flash:
    base: 0x00000000
    size: 320 KiB
  sram:
    base: 0x20000000
    size: 16 KiB
"""
#  1 chip        5 memory:      9 sram:
#  2 core:       6 flash:      10 base
#  3 type        7 base        11 size
#  4 clock_hz    8 size

ERROR_RE = re.compile(r"^(?P<file>[^\n:]+):(?P<line>\d+): (?:(?P<key>[\w.<>]+): )?(?P<problem>.+)$")


def edit(old: str, new: str, text: str = MINIMAL) -> str:
    assert old in text, f"test bug: {old!r} not in the config"
    return text.replace(old, new, 1)


def config_error(text: str, source: str = "chip.yaml") -> tuple[int, str | None, str]:
    """Parse ``text`` expecting a ConfigError; return (line, key path, problem)."""
    with pytest.raises(ConfigError) as info:
        parse_config(text, source)
    return split_error(info.value, source)


def split_error(exc: ConfigError, source: str) -> tuple[int, str | None, str]:
    assert type(exc) is ConfigError
    assert exc.exit_code == EXIT_CONFIG == 78
    message = str(exc)
    assert "\n" not in message, f"not one line: {message!r}"
    m = ERROR_RE.match(message)
    assert m, f"not FILE:LINE: key: problem: {message!r}"
    assert m["file"] == source
    return int(m["line"]), m["key"], m["problem"]


# --------------------------------------------------------------------------- the default chip

def test_default_config_is_the_ciu98320b_file(config, repo: Path) -> None:
    assert DEFAULT_CONFIG == repo / "configs" / "ciu98320b.yaml"
    assert config.source == str(DEFAULT_CONFIG)
    assert config.chip == "CIU98320B"


def test_default_config_core_runs_at_48_mhz_with_the_fast_multiplier(config) -> None:
    assert config.core.type == "sc000"
    assert config.core.clock_hz == 48_000_000
    assert config.core.muls_cycles == 1


def test_default_config_flash_is_320_kib_at_0_with_no_wait_states(config) -> None:
    assert config.flash.base == 0
    assert config.flash.size == 320 * KiB
    assert config.flash.wait_states == 0


def test_default_config_sram_is_16_kib_at_0x20000000(config) -> None:
    assert config.sram.base == 0x2000_0000
    assert config.sram.size == 16 * KiB


def test_default_config_pka_ram_is_3_kib(config) -> None:
    assert config.peripherals["pka"].params["ram_size"] == 3 * KiB


def test_default_config_maps_systick_nvic_and_scb_at_their_architectural_addresses(config) -> None:
    bases = {p.type: p.base for p in config.peripherals.values()}
    assert bases == {"systick": 0xE000E010, "nvic": 0xE000E100, "scb": 0xE000ED00, "pka": 0x40010000,
                     "usb": 0x40020000, "trng": 0x40030000}
    assert config.peripherals["systick"].params["reference_clock_hz"] == 48_000_000


def test_optional_keys_get_their_documented_defaults() -> None:
    cfg = parse_config(MINIMAL)
    assert cfg.core.muls_cycles == 1
    assert cfg.core.vtor is False
    assert cfg.core.irqs == 32
    assert cfg.core.exception_entry_cycles == 16
    assert cfg.flash.wait_states == 0
    assert cfg.sram.writable is True
    assert cfg.peripherals == {}


def test_region_at_finds_the_region_holding_an_address(config) -> None:
    assert config.region_at(0x2000_3FFF).name == "sram"
    assert config.region_at(0x2000_4000) is None


# --------------------------------------------------------------------------- units

@pytest.mark.parametrize(("raw", "size"), [
    ("16 KiB", 16 * KiB),
    ("320K", 320 * KiB),
    (16384, 16 * KiB),
    ("16384", 16 * KiB),
    ("3 KiB", 3 * KiB),
    ("1 MiB", 1024 * KiB),
    ("2kb", 2 * KiB),
])
def test_sizes_accept_integers_and_unit_strings(raw, size: int) -> None:
    assert parse_size(raw) == size
    text = edit("size: 16 KiB", f"size: {raw!r}" if isinstance(raw, str) else f"size: {raw}")
    assert parse_config(text).sram.size == size


@pytest.mark.parametrize(("raw", "hz"), [
    ("48 MHz", 48_000_000),
    ("48MHz", 48_000_000),
    (48_000_000, 48_000_000),
    ("32.768 kHz", 32_768),
    ("1 GHz", 1_000_000_000),
])
def test_frequencies_accept_hertz_and_unit_strings(raw, hz: int) -> None:
    assert parse_frequency(raw) == hz
    assert parse_config(edit("clock_hz: 48 MHz", f"clock_hz: {raw}")).core.clock_hz == hz


def test_muls_cycles_32_selects_the_small_multiplier() -> None:
    text = edit("  clock_hz: 48 MHz\n", "  clock_hz: 48 MHz\n  muls_cycles: 32\n")
    assert parse_config(text).core.muls_cycles == 32


@pytest.mark.parametrize("irqs", [1, 32])
def test_irqs_accepts_1_to_32(irqs: int) -> None:
    text = edit("  clock_hz: 48 MHz\n", f"  clock_hz: 48 MHz\n  irqs: {irqs}\n")
    assert parse_config(text).core.irqs == irqs


# --------------------------------------------------------------------------- errors

def test_unknown_top_level_key_is_reported_on_its_line() -> None:
    line, key, problem = config_error(MINIMAL + "colour: blue\n")
    assert (line, key) == (12, "colour")
    assert "unknown key" in problem


def test_unknown_nested_key_is_reported_with_its_full_path() -> None:
    line, key, problem = config_error(edit("  clock_hz: 48 MHz\n", "  clock_hz: 48 MHz\n  turbo: true\n"))
    assert (line, key) == (5, "core.turbo")
    assert "unknown key" in problem


def test_unknown_key_in_a_region_is_reported_with_its_full_path() -> None:
    line, key, problem = config_error(edit("    size: 16 KiB\n", "    size: 16 KiB\n    colour: blue\n"))
    assert (line, key) == (12, "memory.sram.colour")
    assert "unknown key" in problem


def test_missing_required_key_names_it() -> None:
    line, key, problem = config_error(edit("  clock_hz: 48 MHz\n", ""))
    assert key == "core.clock_hz"
    assert "missing" in problem
    assert line in (2, 3)  # the `core:` header or the first line of the section


def test_missing_required_section_names_it() -> None:
    text = MINIMAL.split("memory:")[0]
    line, key, problem = config_error(text)
    assert (line, key) == (1, "memory")
    assert "missing" in problem


def test_missing_sram_region_names_it() -> None:
    text = MINIMAL.split("  sram:")[0]
    _, key, problem = config_error(text)
    assert key == "memory.sram"
    assert "missing" in problem


def test_overlapping_regions_name_both() -> None:
    line, key, problem = config_error(edit("base: 0x20000000", "base: 0x00040000"))
    assert key == "memory.sram"
    assert "overlaps" in problem
    assert "memory.flash" in problem
    assert line in (9, 10)  # the `sram:` header or its base


@pytest.mark.parametrize("bad", ["16 parsecs", "lots", "-16 KiB", "1.5 KiB", "0"])
def test_bad_size_string_is_reported_on_its_line(bad: str) -> None:
    line, key, problem = config_error(edit("size: 16 KiB", f"size: {bad!r}"))
    assert (line, key) == (11, "memory.sram.size")
    assert repr(bad) in problem


@pytest.mark.parametrize("bad", ["fast", "48 parsecs", "0 Hz", "-1"])
def test_bad_frequency_is_reported_on_its_line(bad: str) -> None:
    line, key, _ = config_error(edit("clock_hz: 48 MHz", f"clock_hz: {bad}"))
    assert (line, key) == (4, "core.clock_hz")


def test_negative_wait_states_are_refused() -> None:
    line, key, problem = config_error(edit("    size: 320 KiB\n", "    size: 320 KiB\n    wait_states: -1\n"))
    assert (line, key) == (9, "memory.flash.wait_states")
    assert "negative" in problem


@pytest.mark.parametrize("muls", [0, 2, 16, "fast"])
def test_muls_cycles_other_than_1_or_32_is_refused(muls) -> None:
    line, key, problem = config_error(edit("  clock_hz: 48 MHz\n", f"  clock_hz: 48 MHz\n  muls_cycles: {muls}\n"))
    assert (line, key) == (5, "core.muls_cycles")
    assert "1, 32" in problem


@pytest.mark.parametrize("irqs", [0, 33, -1])
def test_irqs_out_of_range_is_refused(irqs: int) -> None:
    line, key, problem = config_error(edit("  clock_hz: 48 MHz\n", f"  clock_hz: 48 MHz\n  irqs: {irqs}\n"))
    assert (line, key) == (5, "core.irqs")
    assert str(irqs) in problem


def test_invalid_yaml_syntax_is_reported_on_its_line() -> None:
    line, _, problem = config_error(edit("  type: sc000\n", "  type: sc000: extra\n"))
    assert line == 3
    assert "YAML" in problem


def test_unclosed_bracket_is_invalid_yaml() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(edit("clock_hz: 48 MHz", "clock_hz: [48 MHz"), "chip.yaml")
    _, _, problem = split_error(info.value, "chip.yaml")
    assert "not valid YAML" in problem


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n"])
def test_empty_file_is_refused(text: str) -> None:
    line, _, problem = config_error(text)
    assert line == 1
    assert "empty" in problem


def test_a_top_level_that_is_not_a_mapping_is_refused() -> None:
    line, _, problem = config_error("- chip\n- core\n")
    assert line == 1
    assert "mapping" in problem


def test_duplicate_top_level_key_is_reported_on_the_second_one() -> None:
    line, key, problem = config_error(MINIMAL + "chip: OTHER\n")
    assert (line, key) == (12, "chip")
    assert "duplicate" in problem


def test_duplicate_nested_key_is_reported_on_the_second_one_with_its_full_path() -> None:
    line, key, problem = config_error(edit("  type: sc000\n", "  type: sc000\n  type: cortex-m0\n"))
    assert (line, key) == (4, "core.type")
    assert "duplicate" in problem


def test_region_base_not_1_kib_aligned_is_refused() -> None:
    line, key, problem = config_error(edit("base: 0x20000000", "base: 0x20000100"))
    assert (line, key) == (10, "memory.sram.base")
    assert "1 KiB aligned" in problem


def test_region_size_not_1_kib_aligned_is_refused() -> None:
    line, key, problem = config_error(edit("size: 16 KiB", "size: 1500"))
    assert (line, key) == (11, "memory.sram.size")
    assert "1 KiB aligned" in problem


def test_region_past_the_32_bit_address_space_is_refused() -> None:
    line, key, _ = config_error(edit("base: 0x20000000", "base: 0xFFFFFC00"))
    assert (line, key) == (11, "memory.sram.size")


def test_peripheral_irq_out_of_range_is_refused() -> None:
    text = MINIMAL + "peripherals:\n  systick:\n    type: systick\n    base: 0xE000E010\n    irq: 40\n"
    line, key, _ = config_error(text)
    assert (line, key) == (16, "peripherals.systick.irq")


def test_unknown_peripheral_type_is_refused() -> None:
    text = MINIMAL + "peripherals:\n  gpu:\n    type: gpu\n    base: 0x50000000\n"
    line, key, _ = config_error(text)
    assert (line, key) == (14, "peripherals.gpu.type")


def test_misspelt_peripheral_parameter_is_refused() -> None:
    text = MINIMAL + "peripherals:\n  systick:\n    type: systick\n    base: 0xE000E010\n    refrence_clock_hz: 1 MHz\n"
    line, key, problem = config_error(text)
    assert (line, key) == (16, "peripherals.systick.refrence_clock_hz")
    assert "reference_clock_hz" in problem  # the message lists the parameters it knows


def test_bad_peripheral_frequency_is_reported_without_internals() -> None:
    text = MINIMAL + "peripherals:\n  systick:\n    type: systick\n    base: 0xE000E010\n    reference_clock_hz: [1, 2]\n"
    line, key, problem = config_error(text)
    assert (line, key) == (16, "peripherals.systick.reference_clock_hz")
    assert "[1, 2]" in problem
    assert "_Node" not in problem


@pytest.mark.parametrize("cpuid", ["abc", "[1]", "-5"])
def test_bad_scb_cpuid_is_refused(cpuid: str) -> None:
    text = MINIMAL + f"peripherals:\n  scb:\n    type: scb\n    base: 0xE000ED00\n    cpuid: {cpuid}\n"
    line, key, _ = config_error(text)
    assert (line, key) == (16, "peripherals.scb.cpuid")


def test_unknown_yaml_tag_is_a_config_error() -> None:
    line, key, _ = config_error(edit("chip: TEST", "chip: !foo TEST"))
    assert (line, key) == (1, "chip")


def test_non_scalar_key_is_a_config_error() -> None:
    line, _, _ = config_error(MINIMAL + "? [a, b]\n: 1\n")
    assert line == 12


# --------------------------------------------------------------------------- load_config and files

def test_load_config_reads_a_file(tmp_path: Path) -> None:
    path = tmp_path / "chip.yaml"
    path.write_text(MINIMAL)
    cfg = load_config(path)
    assert cfg.source == str(path)
    assert cfg.sram.size == 16 * KiB


def test_load_config_errors_name_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "chip.yaml"
    path.write_text(edit("  clock_hz: 48 MHz\n", "  clock_hz: 48 MHz\n  turbo: true\n"))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert split_error(info.value, str(path))[:2] == (5, "core.turbo")


def test_load_config_of_an_empty_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    line, _, problem = split_error(info.value, str(path))
    assert line == 1
    assert "empty" in problem


def test_nonexistent_config_file_is_input_missing_exit_66(tmp_path: Path) -> None:
    path = tmp_path / "missing.yaml"
    with pytest.raises(InputMissingError) as info:
        load_config(path)
    assert info.value.exit_code == 66
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    assert "no such" in message


def test_a_directory_as_config_is_input_missing_exit_66(tmp_path: Path) -> None:
    with pytest.raises(InputMissingError) as info:
        load_config(tmp_path)
    assert info.value.exit_code == 66
    assert str(info.value).startswith(f"{tmp_path}: cannot read config")


def test_config_that_is_not_utf8_is_a_config_error_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(MINIMAL.replace("TEST", "T\xc9ST").encode("latin-1"))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    line, _, problem = split_error(info.value, str(path))
    assert line == 1
    assert "not UTF-8" in problem and "0xc9" in problem
