"""`pkasim sweep`'s input: the sweep file's schema and the grid it expands to.

A sweep file is read by the chip files' bounded YAML reader; every mistake is one
line naming the file and the key, exit 78 (README, exit codes). Chip axes become
overlays laid over the base chip: ``pka.maxlen`` is generated (max_words and
ram_size), ``preset`` is an overlay file, any other dotted key sets that key.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pkasim.chip.config import load_config
from pkasim.cli.main import main
from pkasim.sweep.grid import expand
from pkasim.sweep.spec import read_sweep

SHIPPED = Path(__file__).resolve().parent.parent / "configs" / "sweeps" / "rsa4096-10ops.yaml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return path


def cli_error(capsys, path: Path) -> tuple[int, str]:
    code = main(["sweep", str(path), "--cache", str(path.parent / "c.sqlite"), "--out", str(path.parent / "o")])
    return code, capsys.readouterr().err


def test_the_shipped_sweep_reads_and_expands_to_its_full_grid():
    sweep = read_sweep(SHIPPED)
    points = expand(sweep)
    assert len(points) == 2 * 2 * 2 * 2 * 7  # firmware x key sizes x keys x maxlen x widths
    assert sweep.plot_x == "pka.digit_bits" and sweep.goal == {"key_bits": 4096, "ops_per_s": 10}
    assert {p.algorithm for p in points if p.key_bits == 4096} == {"xRSA", "native"}


def test_generated_maxlen_4096_is_the_native4096_chip(repo, tmp_path):
    path = write(tmp_path, f"chip: {repo}/configs/ciu98320b.yaml\naxes:\n  firmware: [xrsa_opt.elf]\n"
                           "  key_bits: [4096]\n  chip:\n    pka.maxlen: [4096]\n")
    chip = expand(read_sweep(path))[0].chip.config
    native = load_config(repo / "configs" / "native4096.yaml")
    assert chip.peripherals["pka"].params == native.peripherals["pka"].params


def test_a_preset_axis_lays_the_preset_file_over_the_base_chip(repo, tmp_path):
    path = write(tmp_path, f"chip: {repo}/configs/ciu98320b.yaml\naxes:\n  firmware: [xrsa_opt.elf]\n"
                           f"  key_bits: [2048]\n  chip:\n    preset: [null, {repo}/configs/presets/fdfm-radix17.yaml]\n"
                           "    core.clock_hz: [24 MHz]\n")
    points = expand(read_sweep(path))
    pkas = [p.chip.config.peripherals["pka"].params for p in points]
    assert [p["digit_bits"] for p in pkas] == [32, 17]
    assert pkas[1]["timing"]["montmul"] == [2, 8, 4]
    assert {p.chip.config.core.clock_hz for p in points} == {24_000_000}
    assert [p.labels()["preset"] for p in points][0] == "none"


@pytest.mark.parametrize(("text", "message"), [
    ("axes: {firmware: [x.elf]}\nbogus: 1\n", "bogus: unknown key"),
    ("axes: {firmware: [x.elf], key_bits: [1024]}\n", "axes.key_bits: expected 2048 or 4096, got 1024"),
    ("axes: {firmware: [x.elf], chip: {pka.maxlen: [3000]}}\n", "axes.chip.pka.maxlen: expected a width in bits"),
    ("axes: {firmware: [x.elf], keys: 0}\n", "axes.keys: expected a count"),
    ("axes: {firmware: []}\n", "axes.firmware: an empty list makes an empty grid"),
    ("axes: {firmware: [x.elf]}\nmetrics: [speed]\n", "metrics: unknown metric 'speed'"),
    ("axes: {firmware: [x.elf], chip: {pka.max_words: [999]}}\n", "max_words"),
    ("axes: [1, 2\n", "not valid YAML"),
    ("axes: {firmware: [x.elf], key_bits: [2048.0]}\n", "axes.key_bits: expected 2048 or 4096, got 2048.0"),
    ("axes: {firmware: [x.elf], key_bits: [true]}\n", "axes.key_bits: expected 2048 or 4096, got True"),
    ("axes: {firmware: [x.elf]}\nfunctions: 42\n", "functions: expected a list of function names, got 42"),
    ("axes: {firmware: [x.elf], chip: {pka.digit_bits: [12345678901234567890]}}\n",
     "axes.chip.pka.digit_bits: 12345678901234567890 does not fit a 64-bit column"),
    ("axes: {firmware: [x.elf], chip: {core.clock_hz: [.nan]}}\n", "axes.chip.core.clock_hz: expected a finite"),
    ("axes: {firmware: [x.elf], chip: {pka.digit_bits: [32]}}\nplot: {x: [pka.digit_bits]}\n", "plot.x:"),
    ("axes: {firmware: [x.elf]}\ngoal: {ops_per_s: .inf}\n", "goal.ops_per_s: expected a positive number"),
    ("axes: {firmware: [x.elf]}\ngoal: {ops_per_s: 10, key_bits: [4096]}\n", "goal.key_bits: expected"),
])
def test_a_bad_sweep_file_is_one_line_and_exit_78(capsys, tmp_path, text, message):
    code, err = cli_error(capsys, write(tmp_path, text))
    assert code == 78
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_missing_sweep_file_is_exit_66(capsys, tmp_path):
    code, err = cli_error(capsys, tmp_path / "none.yaml")
    assert code == 66 and "no such file" in err


def test_a_missing_image_is_exit_65_before_any_run(capsys, tmp_path):
    code, err = cli_error(capsys, write(tmp_path, "axes: {firmware: [nothing.elf], key_bits: [2048]}\n"))
    assert code == 65 and "nothing.elf: not built" in err


def test_dask_without_a_scheduler_is_a_usage_error(capsys, tmp_path):
    assert main(["sweep", str(write(tmp_path, "axes: {firmware: [x.elf]}\n")), "--engine", "dask"]) == 64
    assert "--scheduler" in capsys.readouterr().err


def test_an_unreachable_scheduler_is_one_line_and_exit_69():
    from pkasim.sweep.engines import DaskEngine, SchedulerUnavailable

    with pytest.raises(SchedulerUnavailable, match="tcp://127.0.0.1:9: no Dask scheduler answers") as err:
        DaskEngine("tcp://127.0.0.1:9", timeout=1)
    assert err.value.exit_code == 69 and "\n" not in str(err.value)


@pytest.mark.parametrize("image", ["/dev/zero", "fifo"])
def test_an_image_that_is_not_a_regular_file_is_refused_without_reading_it(capsys, tmp_path, image):
    """/dev/zero was read until the kernel killed the process; a FIFO blocked for ever."""
    import os

    if image == "fifo":
        image = str(tmp_path / "fifo.elf")
        os.mkfifo(image)
    code, err = cli_error(capsys, write(tmp_path, f"axes: {{firmware: [{image}], key_bits: [2048]}}\n"))
    assert code == 65, err
    assert f"{image}: cannot read: not a regular file" in err and err.count("pkasim: error:") == 1


def test_a_preset_of_dev_zero_is_refused_by_size(capsys, tmp_path):
    code, err = cli_error(capsys, write(tmp_path, "axes: {firmware: [x.elf], chip: {preset: [/dev/zero]}}\n"))
    assert code == 78 and "larger than 1 MiB" in err
