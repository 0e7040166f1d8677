"""The ``pkasim`` command: a thin layer over Machine (see README.md for the commands).

Every user mistake ends in one line on stderr and a documented exit code; a Python
traceback only appears for a bug in pkasim, and only with PKASIM_DEBUG=1.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence
from typing import IO

from rich.console import Console

from pkasim.base.errors import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_IO,
    EXIT_OS,
    EXIT_TERMINATED,
    EXIT_USAGE,
    OutputError,
    PkasimError,
    Terminated,
    UsageError,
)
from pkasim.chip.config import DEFAULT_CHIP
from pkasim.cli import apdu, card, ctcheck, debug, diff, gdbserver, profile, regress, sign, sweep, usb
from pkasim.cli.common import Guarded, add_run_options, run_firmware, write_text
from pkasim.cli.report import abnormal_exit, exit_code_for, print_summary, to_json
from pkasim.cli.traces import Traces, add_trace_options

COMMANDS = {"profile": profile, "diff": diff, "regress": regress, "sweep": sweep, "debug": debug,
            "gdbserver": gdbserver, "usb": usb, "sign": sign, "apdu": apdu, "card": card, "ct-check": ctcheck}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2; we document 64
        try:
            self.print_usage(sys.stderr)
            sys.stderr.write(f"pkasim: error: {message}\n")
        except (OSError, OutputError):
            pass  # stderr itself is closed or full: the exit code still says it
        sys.exit(EXIT_USAGE)

    def _print_message(self, message: str, file: IO[str] | None = None) -> None:
        """argparse drops the write errors of --help and usage text; a help page lost
        to a full disk or a closed pipe must still fail (exit 74), as any output does."""
        if message:
            stream = file or sys.stderr
            guarded = Guarded(stream, "stdout" if stream is sys.stdout else "stderr")
            guarded.write(message)
            guarded.flush()


class _Repeats(logging.Filter):
    """Show each distinct guest/model warning a few times, then count the rest."""

    LIMIT = 5

    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[str, int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key = record.getMessage()
        n = self.seen.get(key, 0) + 1
        self.seen[key] = n
        if n == self.LIMIT + 1:
            record.msg = f"{key} (repeated; further ones not shown)"
            record.args = ()
        return n <= self.LIMIT + 1


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="pkasim", description="Cycle-exact emulator of an ARM SC000 MCU with a public-key accelerator.")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv for debug)")
    parser.add_argument("-q", "--quiet", dest="quiet_first", action="store_true",
                        help="less output (for the commands that have -q: run, profile, ct-check, sweep, gdbserver)")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = sub.add_parser("run", help="run a firmware image headless and report cycles")
    add_run_options(run)
    run.add_argument("--json", metavar="FILE", help="write the run summary as JSON ('-' for stdout)")
    add_trace_options(run)

    bench = sub.add_parser("bench", help="RSA-2048 vs RSA-4096 (xRSA) vs software, on one or more chips")
    bench.add_argument("--config", action="append", default=[], metavar="FILE",
                       help="chip description, a YAML file or a bundled chip's name; repeat to compare chips "
                            f"side by side (default: {DEFAULT_CHIP})")
    bench.add_argument("--json", metavar="FILE", help="write every figure as JSON ('-' for stdout)")
    bench.add_argument("--plot", metavar="FILE", help="write a chart (.png or .svg)")
    bench.add_argument("--only", action="append", default=[], metavar="JOB",
                       help="run only these jobs (repeatable): " + ", ".join(j.key for j in bench_jobs()))
    bench.add_argument("--build-dir", default=None,
                       help="where the firmware images are (default: those 'make firmware' builds with pkasim)")
    for command in COMMANDS.values():
        command.add_parser(sub)
    for each in sub.choices.values():  # -v after the command too: pkasim run fw.elf -vv
        each.add_argument("-v", "--verbose", dest="verbose_after", action="count", default=0,
                          help="more log output (-vv for debug); before or after the command")
    return parser


def bench_jobs():
    from pkasim.rsa.bench import JOBS

    return JOBS


def _terminate(signum: int, frame: object) -> None:
    raise Terminated


def main(argv: Sequence[str] | None = None) -> int:
    # SIGTERM (kill PID) ends a command as Ctrl-C does, with its own line and code,
    # instead of killing the process mid-write with no word (README, exit codes).
    try:
        previous = signal.signal(signal.SIGTERM, _terminate)
    except ValueError:  # not the main thread (a caller's worker): leave signals alone
        previous = None
    try:
        return _guarded_main(argv)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _guarded_main(argv: Sequence[str] | None) -> int:
    try:
        try:
            code = _main(argv)
        except SystemExit as exc:  # argparse ends --help (0) and usage errors (64) this way
            code = exc.code if isinstance(exc.code, int) else EXIT_USAGE
        Guarded(sys.stdout, "stdout").flush()  # a closed pipe is reported here, not at interpreter exit
        return code
    except OutputError as exc:
        _quiet_broken_streams()
        _line(f"pkasim: error: {exc}")
        return exc.exit_code
    except OSError:
        # argparse's own --help or usage text could not be written: nothing to say it with.
        _quiet_broken_streams()
        return EXIT_IO
    except KeyboardInterrupt as exc:  # outside a command (parsing, the last flush): the same line
        return _interrupted(exc)


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    guest_args: list[str] | None = None
    if "--" in argv:  # everything after the first -- is the firmware's, untouched by argparse
        at = argv.index("--")
        argv, guest_args = argv[:at], argv[at + 1:]
    args = build_parser().parse_args(argv)
    args.guest_args = guest_args or []
    console = Console(file=Guarded(sys.stderr, "stderr"), stderr=True, highlight=False)
    args.verbose += args.verbose_after
    _setup_logging(args.verbose)
    if args.quiet_first:
        if not hasattr(args, "quiet"):
            _line(f"pkasim: error: '{args.command}' has no -q (quiet) mode")
            return EXIT_USAGE
        args.quiet = True
    if guest_args is not None and args.command not in ("run", "profile"):
        _line(f"pkasim: error: arguments after -- are the firmware's command line; '{args.command}' takes none")
        return EXIT_USAGE
    try:
        if args.command == "run":
            return _run(args, console)
        if args.command == "bench":
            from pkasim.cli.bench import run_bench

            return run_bench(args, console)
        if args.command in COMMANDS:
            return COMMANDS[args.command].main(args, console)
        raise UsageError(f"unknown command {args.command}")
    except OutputError:
        raise
    except PkasimError as exc:
        _line(f"pkasim: error: {exc}")
        return exc.exit_code
    except KeyboardInterrupt as exc:
        return _interrupted(exc)
    except MemoryError:  # not a bug: the host is short of memory (docs/robustness.md: what inputs cost)
        _line("pkasim: error: out of host memory")
        return EXIT_OS
    except Exception as exc:  # noqa: BLE001 - the one place that turns bugs into a clean line
        if os.environ.get("PKASIM_DEBUG"):
            raise
        _line(f"pkasim: internal error: {type(exc).__name__}: {exc} "
              "(set PKASIM_DEBUG=1 for a traceback, and please report it)")
        return EXIT_INTERNAL


def _interrupted(exc: KeyboardInterrupt) -> int:
    """Ctrl-C or SIGTERM: one line, 130 or 143 (what a shell reports for the signal)."""
    if isinstance(exc, Terminated):
        _line("pkasim: terminated")
        return EXIT_TERMINATED
    _line("pkasim: interrupted")
    return EXIT_INTERRUPTED


def _line(text: str) -> None:
    """One unwrapped line on stderr: error lines are for scripts as much as people.
    If stderr itself cannot be written, the exit code is all that is left to say it."""
    try:
        sys.stderr.write(" ".join(text.split("\n")) + "\n")
        sys.stderr.flush()
    except OSError:
        _quiet_broken_streams()


def _quiet_broken_streams() -> None:
    """Point stdout and stderr at /dev/null where writing them fails, so the interpreter's
    final flush does not print a traceback about a pipe that is already gone."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, stream.fileno())
                os.close(devnull)
            except (OSError, ValueError):
                pass


def _setup_logging(verbose: int) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("pkasim: %(name)s: %(message)s"))
    handler.addFilter(_Repeats())
    root = logging.getLogger("pkasim")
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG)
    root.propagate = False
    # What the model does not implement is for -v; guest mistakes show by default.
    logging.getLogger("pkasim.unimp").setLevel(logging.NOTSET if verbose else logging.ERROR)


def _run(args: argparse.Namespace, console: Console) -> int:
    traces = Traces(args)
    machine, result = run_firmware(args, console, traces.attach if traces.wanted else None)
    traces.close(console)
    if args.json:
        write_text(args.json, json.dumps(to_json(machine, result, args.firmware), indent=2) + "\n", "JSON")
    if not args.quiet:
        print_summary(console, machine, result, args.firmware)
    elif (result.lockup is not None or result.reason.value in ("budget", "sleep-forever", "stuck")
          or abnormal_exit(machine, result)):
        _line(f"pkasim: {result.message}")
    return exit_code_for(result)


if __name__ == "__main__":
    sys.exit(main())
