"""Options every command shares: -v/-vv and -q before or after the command, and help
pages that print no path into pkasim's own tree (a user's `pkasim run --help` shows
`ciu98320b`, not /home/.../configs/...; tests/test_packaging.py checks the chip's name)."""

from __future__ import annotations

import pytest

from pkasim.cli.main import build_parser, main

COMMANDS = sorted(build_parser()._subparsers._group_actions[0].choices)  # noqa: SLF001 - argparse's own table


def stderr_of(capsys, argv: list[str]) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


@pytest.mark.parametrize("argv", [["-vv", "run", "HELLO", "-q"], ["run", "HELLO", "-q", "-vv"],
                                  ["-v", "run", "-v", "HELLO", "-q"]])
def test_vv_traces_semihosting_before_or_after_the_command(capsys, elf, argv):
    argv = [str(elf("hello")) if a == "HELLO" else a for a in argv]
    code, err = stderr_of(capsys, argv)
    assert code == 0
    assert "pkasim.semihosting: SYS_WRITE0" in err


def test_one_v_does_not_trace_semihosting(capsys, elf):
    code, err = stderr_of(capsys, ["run", str(elf("hello")), "-q", "-v"])
    assert code == 0 and "SYS_WRITE0" not in err


@pytest.mark.parametrize("argv", [["-q", "run", "HELLO"], ["run", "HELLO", "-q"]])
def test_q_before_or_after_the_command_drops_the_summary(capsys, elf, argv):
    argv = [str(elf("hello")) if a == "HELLO" else a for a in argv]
    code, err = stderr_of(capsys, argv)
    assert code == 0
    assert "cycles" not in err


def test_q_before_a_command_without_a_quiet_mode_is_a_usage_error(capsys):
    code, err = stderr_of(capsys, ["-q", "diff", "a.json", "b.json"])
    assert code == 64
    assert err.strip() == "pkasim: error: 'diff' has no -q (quiet) mode"


@pytest.mark.parametrize("command", COMMANDS)
def test_help_prints_no_path_into_the_checkout(capsys, repo, command):
    with pytest.raises(SystemExit) as stop:
        build_parser().parse_args([command, "--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert str(repo) not in out and "/configs/" not in out and "firmware/build" not in out, out
