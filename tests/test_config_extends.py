"""A what-if chip file names its base with ``extends:`` and states only what differs."""

from __future__ import annotations

from pathlib import Path

import pytest

from pkasim.base.errors import ConfigError
from pkasim.chip.config import DEFAULT_CONFIG, load_config


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_overlay_changes_one_value_and_keeps_the_rest(tmp_path):
    path = write(tmp_path, "slow.yaml", f"extends: {DEFAULT_CONFIG}\ncore:\n  muls_cycles: 32\n")
    cfg, base = load_config(path), load_config()
    assert cfg.core.muls_cycles == 32
    assert cfg.core.clock_hz == base.core.clock_hz
    assert cfg.memory == base.memory


def test_relative_base_is_found_beside_the_overlay(tmp_path):
    write(tmp_path, "base.yaml", DEFAULT_CONFIG.read_text())
    path = write(tmp_path, "fast.yaml", "extends: base.yaml\ncore:\n  clock_hz: 96 MHz\n")
    assert load_config(path).core.clock_hz == 96_000_000


def test_null_removes_a_key_of_the_base(tmp_path):
    path = write(tmp_path, "x.yaml", f"extends: {DEFAULT_CONFIG}\nperipherals:\n  systick: null\n")
    assert "systick" not in load_config(path).peripherals


def test_error_in_the_overlay_names_the_overlay_file_and_line(tmp_path):
    path = write(tmp_path, "bad.yaml", f"extends: {DEFAULT_CONFIG}\ncore:\n  muls_cycles: 7\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value).startswith(f"{path}:3: core.muls_cycles:")


def test_error_in_the_base_names_the_base_file(tmp_path):
    base = write(tmp_path, "base.yaml", DEFAULT_CONFIG.read_text().replace("muls_cycles: 1", "muls_cycles: 5"))
    path = write(tmp_path, "x.yaml", "extends: base.yaml\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value).startswith(f"{base}:")
    assert "core.muls_cycles" in str(err.value)


def test_a_cycle_of_bases_is_an_error(tmp_path):
    write(tmp_path, "a.yaml", "extends: b.yaml\n")
    path = write(tmp_path, "b.yaml", "extends: a.yaml\n")
    with pytest.raises(ConfigError, match="cycle"):
        load_config(path)


def test_a_missing_base_is_an_error(tmp_path):
    path = write(tmp_path, "x.yaml", "extends: nowhere.yaml\n")
    with pytest.raises(ConfigError, match=r"x\.yaml:1: extends: cannot read base config"):
        load_config(path)
