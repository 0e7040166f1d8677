"""Hostile command lines and outputs (issue 11): documented exit codes, one line, and
reads bounded by what the target can hold."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli import assert_clean_error, run

from pkasim.base import limits
from pkasim.base.errors import EXIT_BAD_INPUT, EXIT_CONFIG, EXIT_IO, EXIT_NO_INPUT, EXIT_OS, EXIT_USAGE

SCRIPT = Path(sys.executable).parent / "pkasim"


def script(*argv: object, stdout=subprocess.PIPE, stderr=subprocess.PIPE) -> subprocess.CompletedProcess:
    """The console script, as a shell pipeline would run it."""
    return subprocess.run([str(SCRIPT), *map(str, argv)], stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
                          check=False)


# --------------------------------------------------------------------------- exit codes

def test_config_missing_exits_66(elf, capsys) -> None:
    code = run(["run", elf("hello"), "--config", "missing.yaml"])
    assert_clean_error(capsys.readouterr().err, code, EXIT_NO_INPUT, "missing.yaml: no such config file")


def test_memory_overlapping_a_peripheral_exits_78_with_its_line(elf, config, tmp_path: Path, capsys) -> None:
    chip = tmp_path / "c.yaml"
    chip.write_text(f"extends: {config.source}\nmemory:\n  extra:\n    base: 0xE000E000\n    size: 4 KiB\n")
    code = run(["run", elf("hello"), "--config", chip])
    assert_clean_error(capsys.readouterr().err, code, EXIT_CONFIG, f"{chip}:4: memory.extra:", "overlaps")


def test_max_cycles_beyond_the_64_bit_counter_exits_64(elf, capsys) -> None:
    code = run(["run", elf("hello"), "--max-cycles", str(limits.MAX_CYCLES_MAX + 1)])
    assert_clean_error(capsys.readouterr().err, code, EXIT_USAGE, "64-bit")


def test_max_cycles_of_5000_digits_exits_64(elf, capsys) -> None:
    code = run(["run", elf("hello"), "--max-cycles", "9" * 5000])
    err = capsys.readouterr().err
    assert_clean_error(err, code, EXIT_USAGE, "64-bit")
    assert len(err.splitlines()[-1]) < 200


# --------------------------------------------------------------------------- --load and --dump bounds

def test_load_of_dev_zero_into_main_reads_only_main_s_size(elf, capsys) -> None:
    code = run(["run", elf("hello"), "--load", "main=/dev/zero"])
    assert_clean_error(capsys.readouterr().err, code, EXIT_BAD_INPUT, "/dev/zero: more than", "the size of 'main'")


def test_load_of_dev_zero_into_a_zero_size_symbol_reads_only_to_the_end_of_its_region(elf, config, capsys) -> None:
    code = run(["run", elf("hello"), "--load", "_ebss=/dev/zero"])
    assert_clean_error(capsys.readouterr().err, code, EXIT_BAD_INPUT, "/dev/zero: more than", "to the end of sram")


def test_load_into_a_zero_size_symbol_that_fits_runs(elf, tmp_path: Path, capsys) -> None:
    data = tmp_path / "stack.bin"
    data.write_bytes(bytes(16))
    assert run(["run", elf("hello"), "-q", "--load", f"_ebss={data}"]) == 0


@pytest.mark.parametrize("symbol", ["_estack", "_min_stack_size", "_sidata"])
def test_load_onto_a_linker_constant_exits_65_and_writes_nothing(symbol: str, elf, tmp_path: Path, capsys) -> None:
    data = tmp_path / "big.bin"
    data.write_bytes(bytes(100_000))
    code = run(["run", elf("hello"), "--load", f"{symbol}={data}"])
    out, err = capsys.readouterr()
    assert_clean_error(err, code, EXIT_BAD_INPUT, f"'{symbol}' is a linker constant")
    assert out == ""  # nothing ran


def test_dump_of_a_symbol_claiming_0xffffffff_bytes_fails_before_the_run(elf, tmp_path: Path, capsys) -> None:
    from test_loader_hostile import symbol_entry

    data = bytearray(elf("hello").read_bytes())
    entry = symbol_entry(bytes(data), "main")
    data[entry + 8:entry + 12] = (0xFFFF_FFFF).to_bytes(4, "little")
    bad = tmp_path / "bigsym.elf"
    bad.write_bytes(bytes(data))
    code = run(["run", bad, "--dump", f"main={tmp_path / 'main.bin'}"])
    out, err = capsys.readouterr()
    assert_clean_error(err, code, EXIT_BAD_INPUT, "'main' claims 4,294,967,295 bytes")
    assert out == ""
    assert not (tmp_path / "main.bin").exists()


def test_dump_of_a_linker_constant_fails_before_the_run(elf, tmp_path: Path, capsys) -> None:
    code = run(["run", elf("hello"), "--dump", f"_estack={tmp_path / 'x.bin'}"])
    assert_clean_error(capsys.readouterr().err, code, EXIT_BAD_INPUT, "'_estack' is a linker constant")


# --------------------------------------------------------------------------- outputs that cannot be written

def test_output_to_a_closed_pipe_exits_74_with_one_line(elf) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # `| head -c1` once head has gone
    try:
        proc = script("run", elf("hello"), stdout=write_end)
    finally:
        os.close(write_end)
    err = proc.stderr.decode()
    assert proc.returncode == EXIT_IO, err
    assert "Traceback" not in err and "Exception ignored" not in err
    assert err.count("pkasim: error:") == 1
    assert "stdout: the reading end of the pipe was closed" in err


def test_output_to_dev_full_exits_74_with_one_line(elf) -> None:
    with open("/dev/full", "wb") as full:
        proc = script("run", elf("hello"), stdout=full)
    err = proc.stderr.decode()
    assert proc.returncode == EXIT_IO, err
    assert "Traceback" not in err and "Exception ignored" not in err
    assert "stdout: cannot write: No space left on device" in err


def test_json_to_dev_full_exits_74(elf) -> None:
    proc = script("run", elf("hello"), "-q", "--json", "/dev/full")
    assert proc.returncode == EXIT_IO
    assert "/dev/full: cannot write JSON" in proc.stderr.decode()


def test_dump_to_dev_full_exits_74(elf) -> None:
    proc = script("run", elf("hello"), "-q", "--dump", "main=/dev/full")
    assert proc.returncode == EXIT_IO
    assert "/dev/full: cannot write dump of 'main'" in proc.stderr.decode()


def test_stderr_to_dev_full_exits_74_without_a_traceback(elf) -> None:
    with open("/dev/full", "wb") as full:
        proc = script("run", elf("hello"), stderr=full)
    assert proc.returncode == EXIT_IO
    assert proc.stdout.decode().startswith("Hello from pkasim")


def test_help_to_dev_full_exits_74_with_one_line() -> None:
    with open("/dev/full", "wb") as full:
        proc = script("--help", stdout=full)
    err = proc.stderr.decode()
    assert proc.returncode == EXIT_IO, err
    assert err.count("\n") == 1 and "stdout: cannot write: No space left on device" in err


def test_a_usage_error_with_stderr_on_dev_full_still_exits_64() -> None:
    with open("/dev/full", "wb") as full:
        proc = script("run", stderr=full)
    assert proc.returncode == EXIT_USAGE


# --------------------------------------------------------------------------- trace outputs, diff and regress inputs

@pytest.mark.parametrize("option", ["--folded", "--trace-events", "--vcd", "--tarmac"])
def test_a_trace_to_dev_full_exits_74(option: str, elf, capsys) -> None:
    code = run(["run", elf("hello"), "-q", option, "/dev/full"])
    assert_clean_error(capsys.readouterr().err, code, EXIT_IO, "cannot write the traces (/dev/full)")


def test_diff_of_dev_zero_is_refused_without_reading_it_all(capsys) -> None:
    code = run(["diff", "/dev/zero", "/dev/zero"])
    assert_clean_error(capsys.readouterr().err, code, EXIT_BAD_INPUT, "/dev/zero: larger than 64 MiB")


def test_diff_of_json_nested_100000_deep_exits_65(tmp_path: Path, capsys) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    code = run(["diff", deep, deep])
    assert_clean_error(capsys.readouterr().err, code, EXIT_BAD_INPUT, "JSON nested too deep")


@pytest.mark.parametrize(("text", "phrase"), [
    ("cases: " + "[" * 2000 + "]" * 2000 + "\n", "nested deeper than 16 levels"),
    ("a0: &a0 [x, x, x, x, x, x, x, x, x]\n"
     + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 9)), "more than 10000 values"),
    ("cases: &a [*a]\n", "refers to a node that contains it"),
    ("cases: !!python/object/apply:os.system [echo]\n", "could not determine a constructor"),
])
def test_a_hostile_regress_suite_is_one_line_not_an_internal_error(text: str, phrase: str, tmp_path: Path,
                                                                    capsys) -> None:
    suite = tmp_path / "suite.yaml"
    suite.write_text(text)
    code = run(["regress", suite])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "internal error" not in err and "Traceback" not in err
    assert err.count("pkasim: error:") == 1 and phrase in err


def test_a_regress_suite_of_dev_zero_is_refused_without_reading_it_all(capsys) -> None:
    code = run(["regress", "/dev/zero"])
    err = capsys.readouterr().err
    assert code == 2
    assert "/dev/zero: larger than 1 MiB" in err


def test_running_out_of_host_memory_is_one_line_exit_71(elf, monkeypatch, capsys) -> None:
    from pkasim.core.machine import Machine

    def exhausted(self, image):
        raise MemoryError

    monkeypatch.setattr(Machine, "load", exhausted)
    code = run(["run", elf("hello")])
    assert_clean_error(capsys.readouterr().err, code, EXIT_OS, "out of host memory")


# --------------------------------------------------------------------------- --dump like --load

def test_dump_of_a_zero_size_symbol_writes_to_the_end_of_its_region_as_load_fills_it(elf, config, tmp_path,
                                                                                     capsys) -> None:
    """``_ebss`` has no size: --load fills from it to the end of SRAM, and --dump writes
    the same span (it once wrote an empty file, silently)."""
    from pkasim.chip.loader import load_image

    image = load_image(elf("hello"), config)
    start = image.symbol("_ebss").address
    out = tmp_path / "stack.bin"
    assert run(["run", elf("hello"), "-q", "--dump", f"_ebss={out}"]) == 0
    assert len(out.read_bytes()) == config.memory["sram"].end - start > 0
    assert run(["run", elf("hello"), "-q", "--load", f"_ebss={out}"]) == 0  # and it loads back


# --------------------------------------------------------------------------- inputs that are not files

@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    """A FIFO nobody writes to: an open for reading would wait for a writer for ever."""
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def test_a_firmware_that_is_a_fifo_is_refused_without_waiting_for_a_writer(fifo, capsys) -> None:
    code = run(["run", fifo])
    assert_clean_error(capsys.readouterr().err, code, EXIT_NO_INPUT, f"{fifo}: cannot open: not a regular file "
                                                                     "but a FIFO")


@pytest.mark.parametrize("argv", [
    ["run", "{hello}", "--config", "{fifo}"],
    ["run", "{hello}", "--load", "main={fifo}"],
    ["debug", "{hello}", "--commands", "{fifo}"],
    ["diff", "{fifo}", "{fifo}"],
    ["ct-check", "{ctleak}", "--secret", "ct_secret", "--random", "2", "--load", "ct_mode={fifo}"],
])
def test_an_input_fifo_with_no_writer_is_one_line_and_exit_66(argv, elf, fifo, capsys) -> None:
    """A stream will do for these (``--load x=<(...)``), but a FIFO no process writes
    to is refused at once: nothing would ever come."""
    code = run([a.format(hello=elf("hello"), ctleak=elf("ctleak"), fifo=fifo) for a in argv])
    assert_clean_error(capsys.readouterr().err, code, EXIT_NO_INPUT, f"{fifo}: ", "a FIFO (named pipe) with no "
                                                                                 "writer")


def test_a_regress_suite_that_is_a_fifo_exits_2(fifo, capsys) -> None:
    assert run(["regress", fifo]) == 2
    assert "a FIFO (named pipe) with no writer" in capsys.readouterr().err


def test_load_from_a_pipe_reads_it_like_a_file(elf, tmp_path, capsys) -> None:
    """``--load fault_kind=<(printf ...)``: the shell passes a pipe as /dev/fd/N."""
    read_end, write_end = os.pipe()
    os.write(write_end, (1).to_bytes(4, "little"))
    os.close(write_end)
    try:
        code = run(["run", elf("fault"), "-q", "--load", f"fault_kind=/dev/fd/{read_end}", "--max-cycles", "100000"])
    finally:
        os.close(read_end)
    assert code not in (EXIT_NO_INPUT, 70), capsys.readouterr().err


def test_ct_check_inputs_holding_a_fifo_are_refused_not_skipped(elf, tmp_path, capsys) -> None:
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    (inputs / "a").write_bytes(b"\0" * 4)
    (inputs / "b").write_bytes(b"\1" * 4)
    os.mkfifo(inputs / "c")
    code = run(["ct-check", elf("ctleak"), "--secret", "ct_secret", "--inputs", inputs])
    assert_clean_error(capsys.readouterr().err, code, EXIT_NO_INPUT, f"{inputs / 'c'}: cannot read: not a regular "
                                                                     "file but a FIFO")


def test_a_debug_script_on_stdin_over_1_mib_is_refused_not_cut_short(elf, monkeypatch, capsys) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"info registers\n" * 80_000)))
    code = run(["debug", elf("hello")])
    assert_clean_error(capsys.readouterr().err, code, EXIT_BAD_INPUT, "stdin: more than 1,048,576 bytes of commands")
