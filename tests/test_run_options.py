"""`pkasim run`'s semihosting options: -- ARGS, --host-dir, and which logs -q and -v show.
The runs that need a C runtime to read argv, files and stdin are in test_runtimes.py."""

from __future__ import annotations

import logging
from pathlib import Path

from pkasim.base.errors import EXIT_NO_INPUT, EXIT_USAGE
from pkasim.cli.main import main


def run(argv: list) -> int:
    try:
        return main([str(a) for a in argv])
    except SystemExit as exc:
        return exc.code


def test_words_after_double_dash_are_not_pkasim_options(elf, capsys):
    assert run(["run", elf("hello"), "-q", "--", "--max-cycles", "1", "-v"]) == 0  # not taken as options
    assert capsys.readouterr().out.startswith("Hello from pkasim")


def test_words_without_double_dash_are_a_usage_error(elf, capsys):
    assert run(["run", elf("hello"), "-q", "extra"]) == EXIT_USAGE
    assert "unrecognized arguments: extra" in capsys.readouterr().err


def test_double_dash_belongs_to_run_only(capsys):
    assert run(["bench", "--", "x"]) == EXIT_USAGE
    assert "'bench' takes none" in capsys.readouterr().err


def test_host_dir_that_does_not_exist_exits_66(elf, tmp_path: Path, capsys):
    assert run(["run", elf("hello"), "-q", "--host-dir", tmp_path / "absent"]) == EXIT_NO_INPUT
    err = capsys.readouterr().err
    assert err.strip() == f"pkasim: error: --host-dir {tmp_path / 'absent'}: no such directory"


def test_host_dir_that_is_a_file_exits_66(elf, tmp_path: Path, capsys):
    (tmp_path / "f").write_text("")
    assert run(["run", elf("hello"), "-q", "--host-dir", tmp_path / "f"]) == EXIT_NO_INPUT
    assert "not a directory" in capsys.readouterr().err


def test_unimplemented_logs_are_hidden_without_v(elf, capsys):
    assert run(["run", elf("hello"), "-q"]) == 0
    assert not logging.getLogger("pkasim.unimp").isEnabledFor(logging.WARNING)
    assert logging.getLogger("pkasim.guest").isEnabledFor(logging.WARNING)


def test_unimplemented_logs_are_shown_with_v(elf, capsys):
    assert run(["-v", "run", elf("hello"), "-q"]) == 0
    assert logging.getLogger("pkasim.unimp").isEnabledFor(logging.WARNING)
