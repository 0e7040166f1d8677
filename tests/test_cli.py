"""The `pkasim` command: output, JSON, exit codes, --load/--dump, and clean one-line errors."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pkasim.cli.main import main

SYSTICK_COUNT = 10


@pytest.fixture
def wide_console(monkeypatch) -> None:
    """Lay the rich summary out at a fixed width, whatever terminal runs the tests."""
    monkeypatch.setenv("COLUMNS", "120")


def run(argv: list[str]) -> int:
    """``main(argv)`` as the console script sees it (argparse errors exit instead of returning)."""
    try:
        return main([str(a) for a in argv])
    except SystemExit as exc:
        return exc.code


def flat(text: str) -> str:
    """Text with rich's line wrapping undone, for looking up phrases."""
    return re.sub(r"\s+", " ", text)


def u32(tmp_path: Path, name: str, value: int) -> Path:
    path = tmp_path / name
    path.write_bytes(value.to_bytes(4, "little"))
    return path


def json_from_stdout(out: str) -> dict:
    """The JSON document `--json -` writes after the firmware's own output."""
    lines = out.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.rstrip() == "{")
    return json.loads("".join(lines[start:]))


def squeezed(text: str) -> str:
    """Text without any whitespace: immune to where rich breaks long lines, even inside a path."""
    return re.sub(r"\s+", "", text)


def assert_clean_error(err: str, code: int, expected: int, *phrases: str) -> None:
    assert code == expected, err
    assert "Traceback" not in err
    assert "internal error" not in err
    assert err.count("pkasim: error:") == 1, err
    for phrase in phrases:
        assert squeezed(phrase) in squeezed(err)


# --------------------------------------------------------------------------- runs

def test_run_prints_the_firmware_output_and_a_summary(elf, capsys, wide_console) -> None:
    code = run(["run", elf("hello")])
    out, err = capsys.readouterr()
    assert code == 0
    assert out == "Hello from pkasim: ARM SC000 (ARMv6-M) at 48 MHz\n!\n"
    assert "hello: this line goes to stderr\n" in err
    summary = flat(err)
    for label in ("firmware", "result exit code 0", "instructions", "cycles", "modeled time"):
        assert label in summary


def test_quiet_run_prints_only_the_firmware_output(elf, capsys) -> None:
    assert run(["run", elf("hello"), "-q"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("Hello from pkasim")
    assert err == "hello: this line goes to stderr\n"


def test_json_file_has_the_documented_keys_and_types(elf, tmp_path: Path, capsys, config) -> None:
    report = tmp_path / "run.json"
    assert run(["run", elf("systick"), "-q", "--json", report]) == 0
    data = json.loads(report.read_text())
    assert data["schema"] == "pkasim.run/1"
    assert data["reason"] == "exit"
    assert data["exit_code"] == 0
    for key in ("instructions", "cycles"):
        assert type(data[key]) is int and data[key] > 0
    for key in ("modeled_seconds", "wall_seconds"):
        assert type(data[key]) is float and data[key] >= 0
    assert data["clock_hz"] == config.core.clock_hz == 48_000_000
    assert data["modeled_seconds"] == data["cycles"] / data["clock_hz"]
    assert data["exceptions"] == {"SysTick": SYSTICK_COUNT}
    assert capsys.readouterr().out == "SysTick interrupts: 10\n"  # the JSON went to the file


def test_json_dash_writes_to_stdout_after_the_firmware_output(elf, capsys) -> None:
    assert run(["run", elf("systick"), "-q", "--json", "-"]) == 0
    out, _ = capsys.readouterr()
    assert out.startswith("SysTick interrupts: 10\n")
    data = json_from_stdout(out)
    assert data["schema"] == "pkasim.run/1"
    assert data["exit_code"] == 0


def test_runs_are_deterministic(elf, tmp_path: Path) -> None:
    first, second = tmp_path / "1.json", tmp_path / "2.json"
    assert run(["run", elf("systick"), "-q", "--json", first]) == 0
    assert run(["run", elf("systick"), "-q", "--json", second]) == 0
    a, b = json.loads(first.read_text()), json.loads(second.read_text())
    assert (a["cycles"], a["instructions"], a["sleep_cycles"]) == (b["cycles"], b["instructions"], b["sleep_cycles"])


def test_firmware_exit_code_is_passed_through(elf, tmp_path: Path, capsys) -> None:
    code = run(["run", elf("fault"), "-q",
                "--load", f"fault_kind={u32(tmp_path, 'kind', 1)}",
                "--load", f"fault_handler_mode={u32(tmp_path, 'mode', 1)}"])
    out, err = capsys.readouterr()
    assert code == 3
    assert out == "HardFault caught\n"
    assert "Traceback" not in err


def test_fault_kind_0_exits_0(elf, tmp_path: Path, capsys) -> None:
    assert run(["run", elf("fault"), "-q", "--load", f"fault_kind={u32(tmp_path, 'kind', 0)}"]) == 0
    assert capsys.readouterr().out == "no fault\n"


def test_lockup_exits_125_and_reports_the_fault(elf, tmp_path: Path, capsys, wide_console) -> None:
    code = run(["run", elf("fault"),
                "--load", f"fault_kind={u32(tmp_path, 'kind', 1)}",
                "--load", f"fault_handler_mode={u32(tmp_path, 'mode', 0)}"])
    _, err = capsys.readouterr()
    assert code == 125
    assert "Traceback" not in err
    text = flat(err)
    assert "locked up" in text
    assert "unaligned" in text
    assert "fault_unaligned_ldr" in text
    for reg in ("r0=0x", "sp=0x", "lr=0x", "pc=0x", "xpsr=0x"):
        assert reg in text


def test_lockup_json_names_the_reason_and_exit_code(elf, tmp_path: Path, capsys) -> None:
    run(["run", elf("fault"), "-q", "--json", "-", "--load", f"fault_kind={u32(tmp_path, 'kind', 1)}"])
    data = json_from_stdout(capsys.readouterr().out)
    assert data["reason"] == "lockup"
    assert data["exit_code"] == 125
    assert data["firmware_exit_code"] is None
    assert data["fault"]["symbol"].startswith("fault_unaligned_ldr")


def test_cycle_budget_exits_124(elf, capsys) -> None:
    code = run(["run", elf("systick"), "--max-cycles", "1000"])
    out, err = capsys.readouterr()
    assert code == 124
    assert "budget" in flat(err)
    assert "SysTick interrupts" not in out
    assert "Traceback" not in err


def test_cycle_budget_json_reports_the_cycles_run(elf, capsys) -> None:
    assert run(["run", elf("systick"), "-q", "--max-cycles", "1_000", "--json", "-"]) == 124
    out, err = capsys.readouterr()
    data = json_from_stdout(out)
    assert data["reason"] == "budget"
    assert data["exit_code"] == 124
    assert data["cycles"] >= 1000
    assert "budget" in err  # -q still says why the run stopped


def test_dump_writes_the_symbol_bytes(elf, tmp_path: Path) -> None:
    dump = tmp_path / "count.bin"
    assert run(["run", elf("systick"), "-q", "--dump", f"systick_count={dump}"]) == 0
    assert dump.read_bytes() == SYSTICK_COUNT.to_bytes(4, "little")


# --------------------------------------------------------------------------- errors

def test_load_of_an_unknown_symbol_exits_65(elf, tmp_path: Path, capsys) -> None:
    code = run(["run", elf("hello"), "--load", f"no_such_symbol={u32(tmp_path, 'v', 1)}"])
    out, err = capsys.readouterr()
    assert_clean_error(err, code, 65, "no_such_symbol")
    assert out == ""  # nothing ran


def test_load_of_a_missing_file_exits_66(elf, tmp_path: Path, capsys) -> None:
    missing = tmp_path / "missing.bin"
    code = run(["run", elf("fault"), "--load", f"fault_kind={missing}"])
    _, err = capsys.readouterr()
    assert_clean_error(err, code, 66, "missing.bin")


def test_load_bigger_than_the_symbol_exits_65(elf, tmp_path: Path, capsys) -> None:
    big = tmp_path / "big.bin"
    big.write_bytes(bytes(64))
    code = run(["run", elf("fault"), "--load", f"fault_kind={big}"])
    assert_clean_error(capsys.readouterr().err, code, 65, "fault_kind")


def test_load_into_bss_exits_65(elf, tmp_path: Path, capsys) -> None:
    code = run(["run", elf("systick"), "--load", f"systick_count={u32(tmp_path, 'v', 5)}"])
    assert_clean_error(capsys.readouterr().err, code, 65, "systick_count")


def test_dump_of_an_unknown_symbol_fails_before_the_run(elf, tmp_path: Path, capsys) -> None:
    code = run(["run", elf("hello"), "--dump", f"no_such_symbol={tmp_path / 'x.bin'}"])
    out, err = capsys.readouterr()
    assert_clean_error(err, code, 65, "no_such_symbol")
    assert out == ""
    assert not (tmp_path / "x.bin").exists()


def test_missing_firmware_exits_66(tmp_path: Path, capsys) -> None:
    code = run(["run", tmp_path / "nope.elf"])
    assert_clean_error(capsys.readouterr().err, code, 66, "nope.elf")


def test_missing_config_exits_66(elf, tmp_path: Path, capsys) -> None:
    code = run(["run", elf("hello"), "--config", tmp_path / "nope.yaml"])
    assert_clean_error(capsys.readouterr().err, code, 66, "nope.yaml")


def test_bad_config_exits_78_naming_file_line_and_key(elf, config, tmp_path: Path, capsys) -> None:
    bad = tmp_path / "c.yaml"
    bad.write_text(Path(config.source).read_text() + "colour: blue\n")
    line = len(bad.read_text().splitlines())
    code = run(["run", elf("hello"), "--config", bad])
    assert_clean_error(capsys.readouterr().err, code, 78, f"c.yaml:{line}: colour: unknown key")


def test_malformed_elf_exits_65(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.elf"
    bad.write_bytes(b"\x7fELF garbage")
    code = run(["run", bad])
    out, err = capsys.readouterr()
    assert_clean_error(err, code, 65, "bad.elf")
    assert out == ""


@pytest.mark.parametrize("argv", [
    [],
    ["run"],
    ["frobnicate"],
    ["run", "x.elf", "--bogus"],
    ["run", "x.elf", "--max-cycles", "lots"],
    ["run", "x.elf", "--max-cycles", "-5"],
    ["run", "x.elf", "--load", "no_equals_sign"],
    ["run", "x.elf", "--dump", "=file"],
])
def test_bad_arguments_exit_64(argv: list[str], capsys) -> None:
    code = run(argv)
    _, err = capsys.readouterr()
    assert_clean_error(err, code, 64)
    assert err.startswith("usage: pkasim")


def test_help_exits_0(capsys) -> None:
    assert run(["run", "--help"]) == 0
    assert "--max-cycles" in capsys.readouterr().out


def test_a_long_error_message_stays_on_one_line(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")  # what rich assumes when stderr is a pipe
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    code = run(["run", deep / "nope.elf"])
    err = capsys.readouterr().err
    assert code == 66
    assert err == f"pkasim: error: {deep / 'nope.elf'}: no such file\n"


# --------------------------------------------------------------------------- the console script

def test_console_script_runs_hello(elf, tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "pkasim"
    report = tmp_path / "run.json"
    proc = subprocess.run([str(script), "run", str(elf("hello")), "--json", str(report)],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Hello from pkasim: ARM SC000 (ARMv6-M) at 48 MHz\n!\n"
    assert "hello: this line goes to stderr" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert json.loads(report.read_text())["exit_code"] == 0


def test_console_script_exit_code_for_a_malformed_elf(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "pkasim"
    bad = tmp_path / "bad.elf"
    bad.write_bytes(b"garbage")
    proc = subprocess.run([str(script), "run", str(bad)], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 65
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("pkasim: error: ")
