"""Hostile chip files (issue 11): each one a single `FILE:LINE: ...` line and exit 78,
never a traceback, a hang, or a value the model silently wraps or clamps."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest
from test_config import MINIMAL, config_error, edit

from pkasim import native
from pkasim.base import limits
from pkasim.base.errors import EXIT_CONFIG, ConfigError
from pkasim.chip.config import DEFAULT_CONFIG, load_config, parse_config

BASE = f"extends: {DEFAULT_CONFIG}\n"


def overlay_error(text: str, tmp_path: Path) -> tuple[int, str]:
    """Load ``text`` laid over the default chip; return (line, message) of its ConfigError."""
    path = tmp_path / "chip.yaml"
    path.write_text(BASE + text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert info.value.exit_code == EXIT_CONFIG
    assert "\n" not in message
    assert message.startswith(f"{path}:"), message
    return int(message[len(str(path)) + 1:].split(":", 1)[0]), message


def core(line: str) -> str:
    return edit("  clock_hz: 48 MHz\n", f"  clock_hz: 48 MHz\n  {line}\n")


# --------------------------------------------------------------------------- numbers

def test_a_5000_digit_integer_is_refused_on_its_line() -> None:
    line, _, problem = config_error(edit("clock_hz: 48 MHz", "clock_hz: " + "9" * 5000))
    assert line == 4
    assert "5000 characters" in problem


def test_a_1000_digit_integer_is_out_of_range_not_an_internal_error() -> None:
    line, key, problem = config_error(edit("clock_hz: 48 MHz", "clock_hz: " + "9" * 1000))
    assert (line, key) == (4, "core.clock_hz")
    assert "at most" in problem


def test_a_frequency_of_hundreds_of_digits_point_5_is_refused_not_overflowed() -> None:
    line, key, problem = config_error(edit("clock_hz: 48 MHz", f"clock_hz: '{'9' * 400}.5 Hz'"))
    assert (line, key) == (4, "core.clock_hz")
    assert "at most 4,294,967,295 Hz" in problem


def test_a_clock_the_firmware_cannot_read_in_32_bits_is_refused() -> None:
    _, key, _ = config_error(edit("clock_hz: 48 MHz", "clock_hz: 4.3 GHz"))
    assert key == "core.clock_hz"
    assert parse_config(edit("clock_hz: 48 MHz", f"clock_hz: {limits.CLOCK_HZ_MAX}")).core.clock_hz == limits.CLOCK_HZ_MAX


def test_decimal_frequencies_are_read_exactly() -> None:
    assert parse_config(edit("clock_hz: 48 MHz", "clock_hz: 0.000001 GHz")).core.clock_hz == 1000


def test_muls_cycles_32_point_0_is_refused() -> None:
    line, key, problem = config_error(core("muls_cycles: 32.0"))
    assert (line, key) == (5, "core.muls_cycles")
    assert "32.0" in problem


def test_muls_cycles_true_is_not_1() -> None:
    _, key, _ = config_error(core("muls_cycles: true"))
    assert key == "core.muls_cycles"


@pytest.mark.parametrize("key", ["exception_entry_cycles", "exception_return_cycles"])
@pytest.mark.parametrize("value", [2**64, 2**64 - 16, limits.EXCEPTION_CYCLES_MAX + 1])
def test_exception_cycles_beyond_the_limit_are_refused_not_wrapped(key: str, value: int) -> None:
    line, path, problem = config_error(core(f"{key}: {value}"))
    assert (line, path) == (5, f"core.{key}")
    assert str(value) in problem


@pytest.mark.parametrize("value", [2**32, 2**32 + 3, limits.WAIT_STATES_MAX + 1])
def test_flash_wait_states_beyond_the_cost_table_are_refused(value: int) -> None:
    text = edit("    size: 320 KiB\n", f"    size: 320 KiB\n    wait_states: {value}\n")
    line, key, problem = config_error(text)
    assert (line, key) == (9, "memory.flash.wait_states")
    assert f"0..{limits.WAIT_STATES_MAX}" in problem


def test_the_largest_wait_states_keep_the_dearest_instruction_cost_exact() -> None:
    """MULS (0x4348, muls r0, r1, r0) on the 32-cycle multiplier at a word-aligned address
    in flash costs 32 + wait states; at the limit that is 65,535, the most the decoder's
    16-bit cost holds (one more wait state would wrap it to 0)."""
    text = edit("    size: 320 KiB\n", f"    size: 320 KiB\n    wait_states: {limits.WAIT_STATES_MAX}\n",
                core("muls_cycles: 32"))
    cfg = parse_config(text)
    rules = native.Rules(cfg.core.muls_cycles, cfg.flash.wait_states, cfg.flash.base, cfg.flash.end)
    insn = native.Insn()
    native.load().pk_decode(0, 0x4348, 0, ctypes.byref(rules), ctypes.byref(insn))
    assert insn.cost == 32 + limits.WAIT_STATES_MAX == limits.INSTRUCTION_COST_MAX


def test_sram_wait_states_are_refused_as_not_modeled() -> None:
    text = edit("    size: 16 KiB\n", "    size: 16 KiB\n    wait_states: 2\n")
    line, key, problem = config_error(text)
    assert (line, key) == (12, "memory.sram.wait_states")
    assert "only flash wait states are modeled" in problem


def test_a_64_mib_flash_loads_and_runs(make_machine, build_dir: Path) -> None:
    """The issue's 64 MiB flash: the code cache grows with the code that runs, so a big
    flash costs its own size in host memory and nothing per byte besides."""
    cfg = parse_config(edit("size: 320 KiB", "size: 64 MiB"))
    m = make_machine(cfg)
    m.load(build_dir / "hello.elf")
    assert m.run(max_cycles=10**6).exit_code == 0


def test_memory_beyond_the_total_limit_is_refused() -> None:
    text = MINIMAL + "  big:\n    base: 0x60000000\n    size: 1024 MiB\n"
    line, key, problem = config_error(text)
    assert (line, key) == (14, "memory.big.size")
    assert "256 MiB" in problem


def test_a_value_longer_than_the_limit_is_refused() -> None:
    line, _, problem = config_error(edit("chip: TEST", "chip: " + "x" * (limits.CONFIG_MAX_SCALAR_CHARS + 1)))
    assert line == 1
    assert "characters" in problem


# --------------------------------------------------------------------------- YAML structure

def test_an_alias_inside_its_own_anchor_is_refused() -> None:
    line, _, problem = config_error(MINIMAL + "loop: &a [*a]\n")
    assert line == 12
    assert "*a" in problem and "contains it" in problem


def test_500_levels_of_nesting_are_refused() -> None:
    line, _, problem = config_error(MINIMAL + "deep: " + "[" * 500 + "]" * 500 + "\n")
    assert line == 12
    assert f"deeper than {limits.CONFIG_MAX_DEPTH}" in problem


def test_an_alias_that_nests_too_deep_once_expanded_is_refused() -> None:
    half = limits.CONFIG_MAX_DEPTH // 2 + 1
    text = MINIMAL + "a: &a " + "[" * half + "]" * half + "\nb: " + "[" * half + "*a" + "]" * half + "\n"
    _, _, problem = config_error(text)
    assert "deeper than" in problem


def test_a_billion_laughs_file_is_refused_before_it_expands() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)]
    line, _, problem = config_error(MINIMAL + "\n".join(lines) + "\n")
    assert 12 <= line <= 20
    assert f"more than {limits.CONFIG_MAX_NODES} values" in problem


def test_aliases_within_the_limits_still_work(tmp_path: Path) -> None:
    path = tmp_path / "chip.yaml"
    path.write_text(BASE + "peripherals:\n  pka:\n    timing:\n      montmul: [0.3523, 3, 16]\n"
                           "      modadd: &linear [0, 2, 8]\n      modsub: *linear\n"
                           "      add: [0, 1, 8]\n      sub: [0, 1, 8]\n")
    assert load_config(path).peripherals["pka"].params["timing"]["modsub"] == [0, 2, 8]


@pytest.mark.parametrize(("old", "new", "line", "key"), [
    ("core:\n  type: sc000\n  clock_hz: 48 MHz\n", "core: !!python/object:os.system {type: sc000, clock_hz: 1}\n",
     2, "core"),
    ("chip: TEST", "chip: !!python/name:os.system", 1, "chip"),
    ("chip: TEST", "chip: !!python/object/apply:os.system [echo]", 1, "chip"),
    ("chip: TEST", "chip: !!binary aGVsbG8=", 1, "chip"),
])
def test_python_and_other_yaml_tags_are_refused_by_name(old: str, new: str, line: int, key: str) -> None:
    assert config_error(edit(old, new))[:2] == (line, key)
    problem = config_error(edit(old, new))[2]
    assert "YAML tag !!" in problem and "not allowed" in problem


def test_a_non_utf8_config_names_the_line_of_the_bad_byte(tmp_path: Path) -> None:
    path = tmp_path / "chip.yaml"
    path.write_bytes(MINIMAL.encode() + b"\n# caf\xe9\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}:13: not UTF-8 text: byte 0xe9")


def test_dev_zero_as_config_is_refused_without_reading_it_all() -> None:
    with pytest.raises(ConfigError, match="larger than 1 MiB"):
        load_config("/dev/zero")


# --------------------------------------------------------------------------- extends

def chain(tmp_path: Path, files: int) -> Path:
    """file0.yaml extends file1.yaml ... extends the default chip; returns file0."""
    for i in range(files - 1):
        base = f"file{i + 1}.yaml" if i + 1 < files - 1 else str(DEFAULT_CONFIG)
        (tmp_path / f"file{i}.yaml").write_text(f"extends: {base}\nchip: level {i}\n")
    return tmp_path / "file0.yaml"


def test_a_12_file_linear_extends_chain_loads(tmp_path: Path) -> None:
    assert load_config(chain(tmp_path, 12)).chip == "level 0"


def test_an_extends_chain_beyond_the_limit_is_called_too_long_not_a_cycle(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(chain(tmp_path, limits.CONFIG_MAX_EXTENDS + 1))
    assert f"more than {limits.CONFIG_MAX_EXTENDS} config files" in str(info.value)
    assert "cycle" not in str(info.value)


def test_a_file_that_extends_itself_is_a_cycle(tmp_path: Path) -> None:
    path = tmp_path / "me.yaml"
    path.write_text("extends: me.yaml\n")
    with pytest.raises(ConfigError, match=r"me\.yaml:1: extends: me\.yaml makes a cycle"):
        load_config(path)


# --------------------------------------------------------------------------- windows and names

def test_a_pka_under_systick_and_the_nvic_is_refused(tmp_path: Path) -> None:
    line, message = overlay_error("peripherals:\n  pka:\n    base: 0xE000E000\n", tmp_path)
    assert line == 4
    assert "peripherals.pka: 0xe000e000-0xe000efff overlaps peripherals.systick" in message


def test_two_pkas_at_one_base_are_refused(tmp_path: Path) -> None:
    line, message = overlay_error("peripherals:\n  pka2:\n    type: pka\n    base: 0x40010000\n"
                                  "    ram_size: 3 KiB\n    max_words: 64\n    digit_bits: 32\n"
                                  "    timing: {}\n", tmp_path)
    assert line == 5
    assert "peripherals.pka2" in message and "overlaps peripherals.pka " in message


def test_memory_over_a_peripheral_is_a_config_error_with_a_line(tmp_path: Path) -> None:
    line, message = overlay_error("memory:\n  extra:\n    base: 0xE000E000\n    size: 4 KiB\n", tmp_path)
    assert line == 4
    assert "memory.extra" in message and "overlaps peripherals.systick" in message


def test_memory_over_the_nvic_every_core_has_is_refused() -> None:
    text = MINIMAL + "  extra:\n    base: 0xE000E000\n    size: 1 KiB\n"
    line, key, problem = config_error(text)
    assert (line, key) == (13, "memory.extra")
    assert "the core's NVIC" in problem


def test_a_peripheral_window_past_4_gib_is_refused() -> None:
    text = MINIMAL + "peripherals:\n  nvic:\n    type: nvic\n    base: 0xFFFFFF00\n"
    _, key, problem = config_error(text)
    assert key == "peripherals.nvic.base"
    assert "past the end of the 32-bit address space" in problem


def test_a_peripheral_base_that_is_not_word_aligned_is_refused() -> None:
    text = MINIMAL + "peripherals:\n  systick:\n    type: systick\n    base: 0xE000E011\n"
    line, key, _ = config_error(text)
    assert (line, key) == (15, "peripherals.systick.base")


def test_a_second_nvic_is_refused() -> None:
    text = MINIMAL + ("peripherals:\n  nvic:\n    type: nvic\n    base: 0xE000E100\n"
                      "  nvic2:\n    type: nvic\n    base: 0xE0000000\n")
    line, key, problem = config_error(text)
    assert (line, key) == (17, "peripherals.nvic2.type")
    assert "one nvic" in problem


def test_a_device_may_not_take_the_name_of_the_implied_nvic() -> None:
    text = MINIMAL + "peripherals:\n  nvic:\n    type: systick\n    base: 0xE000E010\n"
    _, key, problem = config_error(text)
    assert key == "peripherals.nvic"
    assert "belongs to the core's NVIC" in problem


def test_a_peripheral_named_p_colon_ka_is_refused_on_its_line(tmp_path: Path) -> None:
    line, message = overlay_error("peripherals:\n  p:ka:\n    type: pka\n    base: 0x40020000\n"
                                  "    ram_size: 3 KiB\n    max_words: 999\n    digit_bits: 32\n"
                                  "    timing: {}\n", tmp_path)
    assert line == 4
    assert "'p:ka' is not a plain identifier" in message


def test_a_pka_parameter_error_names_its_line(tmp_path: Path, make_machine) -> None:
    path = tmp_path / "chip.yaml"
    path.write_text(BASE + "peripherals:\n  pka:\n    max_words: 999\n")
    with pytest.raises(ConfigError) as info:
        make_machine(load_config(path))
    assert str(info.value).startswith(f"{path}:4: peripherals.pka.max_words:")


def test_pka_timing_beyond_32_bit_busy_cycles_is_refused(tmp_path: Path, make_machine) -> None:
    path = tmp_path / "chip.yaml"
    path.write_text(BASE + "peripherals:\n  pka:\n    timing:\n      montmul: [1.0e+300, 0, 0]\n")
    with pytest.raises(ConfigError) as info:
        make_machine(load_config(path))
    assert "peripherals.pka.timing.montmul" in str(info.value)
    assert "LASTCYC reports them in 32 bits" in str(info.value)


def test_a_region_named_with_a_colon_is_refused() -> None:
    text = MINIMAL + "  'ex:tra':\n    base: 0x30000000\n    size: 1 KiB\n"
    _, key, problem = config_error(text)
    assert key is None or "ex:tra" in problem
    assert "not a plain identifier" in problem
