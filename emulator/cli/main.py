"""The ``pkasim`` command: a thin layer over Machine (see README.md for the commands).

Every user mistake ends in one line on stderr and a documented exit code; a Python
traceback only appears for a bug in pkasim, and only with PKASIM_DEBUG=1.

Start-up is kept short: this module imports no model code, and only the chosen
subcommand's module is imported (the others appear in ``--help`` from the table below),
so ``pkasim --version`` loads no emulator and ``pkasim run`` loads neither matplotlib,
pyarrow, Dask nor cryptography (docs/packaging.md).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys
from collections.abc import Sequence
from typing import IO

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
)
from pkasim.cli.streams import Guarded, quiet_broken_streams, say

# Every subcommand: its module (which offers add_parser(subparsers) and
# main(args, console) -> int) and its one-line help, shown by `pkasim --help` without
# importing the module. tests/test_packaging.py checks each line against its module's.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("pkasim.cli.run", "run a firmware image headless and report cycles"),
    "bench": ("pkasim.cli.bench", "RSA-2048 vs RSA-4096 (xRSA) vs software, and the ECC operations, on one or more "
                                  "chips"),
    "profile": ("pkasim.cli.profile", "per-function cycle profile of a run (inclusive, exclusive, waiting, PKA)"),
    "diff": ("pkasim.cli.diff", "compare two profiles (pkasim profile --json) function by function"),
    "regress": ("pkasim.cli.regress", "check cycle, function, PKA and size metrics against reviewed baselines"),
    "sweep": ("pkasim.cli.sweep", "run a grid of chips, images, key sizes and keys; tables, plots, summary"),
    "debug": ("pkasim.cli.debug", "step debugger: full-screen TUI, or scripted with --commands"),
    "gdbserver": ("pkasim.cli.gdbserver", "serve the emulated chip to gdb (remote protocol over TCP)"),
    "usb": ("pkasim.cli.usb", "the USB device: enumerate it and print its descriptors (like lsusb -v)"),
    "sign": ("pkasim.cli.sign", "sign a file on the emulated OpenPGP card over USB, with the latency breakdown"),
    "apdu": ("pkasim.cli.apdu", "send raw APDUs (hex lines) to the emulated card over USB"),
    "card": ("pkasim.cli.card", "serve the emulated card to pcscd (vsmartcard vpcd): a PC/SC reader"),
    "ct-check": ("pkasim.cli.ctcheck", "check that control flow, memory addresses and PKA timing do not depend "
                                       "on secret inputs"),
    "faults": ("pkasim.cli.faults", "fault-injection campaign: skip, bit flips, PKA results; outcomes per fault"),
    "power": ("pkasim.cli.power", "simulated power traces of a firmware window (NumPy .npy, Riscure .trs)"),
    "tvla": ("pkasim.cli.tvla", "fixed-vs-random leakage assessment (Welch's t-test, TVLA) of a firmware window"),
    "cpa": ("pkasim.cli.cpa", "correlation power analysis of a trace set against a key-dependent intermediate"),
    "configs": ("pkasim.cli.configs", "list the bundled chip files (names for --config) and sweep examples"),
    "init": ("pkasim.cli.init", "start a firmware project: C sources, linker script and a Makefile "
                                "(zig clang or arm-none-eabi-gcc)"),
}


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


class _Version(argparse.Action):
    """``--version``: pkasim's, the Unicorn engine's and the default chip file's, worked
    out only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print pkasim's version, Unicorn's and the default chip file's, and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        parser._print_message(version_text(), sys.stdout)
        parser.exit()


def version_text() -> str:
    """Three lines: pkasim, the Unicorn engine (its Python package and the library it
    loaded), the default chip (its ``chip:`` name and the SHA-256 of the file)."""
    import re

    import unicorn

    import pkasim
    from pkasim.base import resources

    lines = [f"pkasim {pkasim.__version__}"]
    from pkasim.native import engine

    major, minor, _ = unicorn.uc_version()
    which = (f"pkasim's engine {engine.patchset()}" if engine.selected() == "patched"
             else f"the stock wheel's library {major}.{minor}")
    lines.append(f"unicorn {unicorn.__version__} ({which})")
    chip = resources.default_chip()
    try:
        text = chip.read_text(encoding="utf-8", errors="replace")
        named = re.search(r"^chip:\s*(.+?)\s*(?:#.*)?$", text, re.MULTILINE)
        title = named.group(1).strip("'\"") if named else "?"
        lines.append(f"chip {resources.DEFAULT_CHIP}: {title}, sha256 {resources.file_digest(chip)[:16]} ({chip})")
    except OSError as exc:
        lines.append(f"chip {resources.DEFAULT_CHIP}: cannot read {chip} ({exc.strerror or exc})")
    return "\n".join(lines) + "\n"


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


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of the whole command line. ``command`` names the one subcommand whose
    module is imported for its options (the others are listed by name and help only);
    None imports them all, "" none (``pkasim --help``, ``--version``)."""
    parser = _Parser(prog="pkasim", description="Cycle-exact emulator of an ARM SC000 MCU with a public-key accelerator.")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv for debug)")
    parser.add_argument("-q", "--quiet", dest="quiet_first", action="store_true",
                        help="less output (for the commands that have -q: run, profile, ct-check, sweep, gdbserver)")
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, (module, help_text) in COMMANDS.items():
        if command is None or name == command:
            importlib.import_module(module).add_parser(sub)
        else:
            sub.add_parser(name, help=help_text)
    for each in sub.choices.values():  # -v after the command too: pkasim run fw.elf -vv
        each.add_argument("-v", "--verbose", dest="verbose_after", action="count", default=0,
                          help="more log output (-vv for debug); before or after the command")
    return parser


def command_of(argv: Sequence[str]) -> str:
    """The subcommand an argument list names: its first word that is not an option (the
    top-level options take no value), or "" when there is none."""
    return next((a for a in argv if not a.startswith("-")), "")


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
        quiet_broken_streams()
        say(f"pkasim: error: {exc}")
        return exc.exit_code
    except OSError:
        # argparse's own --help or usage text could not be written: nothing to say it with.
        quiet_broken_streams()
        return EXIT_IO
    except KeyboardInterrupt as exc:  # outside a command (parsing, the last flush): the same line
        return _interrupted(exc)


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    guest_args: list[str] | None = None
    if "--" in argv:  # everything after the first -- is the firmware's, untouched by argparse
        at = argv.index("--")
        argv, guest_args = argv[:at], argv[at + 1:]
    try:
        command = command_of(argv)
        parser = build_parser(command if command in COMMANDS else "")
        args = parser.parse_args(argv)
        args.guest_args = guest_args or []
        from rich.console import Console

        console = Console(file=Guarded(sys.stderr, "stderr"), stderr=True, highlight=False)
        args.verbose += args.verbose_after
        _setup_logging(args.verbose)
        if args.quiet_first:
            if not hasattr(args, "quiet"):
                say(f"pkasim: error: '{args.command}' has no -q (quiet) mode")
                return EXIT_USAGE
            args.quiet = True
        if guest_args is not None and args.command not in ("run", "profile"):
            say(f"pkasim: error: arguments after -- are the firmware's command line; '{args.command}' takes none")
            return EXIT_USAGE
        return importlib.import_module(COMMANDS[args.command][0]).main(args, console)
    except (OutputError, SystemExit):
        raise
    except PkasimError as exc:
        say(f"pkasim: error: {exc}")
        return exc.exit_code
    except KeyboardInterrupt as exc:
        return _interrupted(exc)
    except MemoryError:  # not a bug: the host is short of memory (docs/robustness.md: what inputs cost)
        say("pkasim: error: out of host memory")
        return EXIT_OS
    except Exception as exc:  # noqa: BLE001 - the one place that turns bugs into a clean line
        if os.environ.get("PKASIM_DEBUG"):
            raise
        say(f"pkasim: internal error: {type(exc).__name__}: {exc} "
            "(set PKASIM_DEBUG=1 for a traceback, and please report it)")
        return EXIT_INTERNAL


def _interrupted(exc: KeyboardInterrupt) -> int:
    """Ctrl-C or SIGTERM: one line, 130 or 143 (what a shell reports for the signal)."""
    if isinstance(exc, Terminated):
        say("pkasim: terminated")
        return EXIT_TERMINATED
    say("pkasim: interrupted")
    return EXIT_INTERRUPTED


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


if __name__ == "__main__":
    sys.exit(main())
