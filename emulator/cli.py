"""The ``pkasim`` command: a thin layer over Machine (see README.md for the commands).

Every user mistake ends in one line on stderr and a documented exit code; a Python
traceback only appears for a bug in pkasim, and only with PKASIM_DEBUG=1.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from .config import DEFAULT_CONFIG, load_config
from .errors import EXIT_INTERNAL, EXIT_USAGE, InputMissingError, LoadError, PkasimError, UsageError
from .hostfiles import HostDir
from .machine import Machine
from .report import abnormal_exit, exit_code_for, print_summary, to_json

DEFAULT_BUDGET_SECONDS = 600  # modeled seconds before a run that never exits is stopped


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2; we document 64
        self.print_usage(sys.stderr)
        sys.stderr.write(f"pkasim: error: {message}\n")
        sys.exit(EXIT_USAGE)


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


def _parse_int(text: str) -> int:
    try:
        value = int(text.replace("_", ""), 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text!r}")
    return value


def _pair(text: str) -> tuple[str, str]:
    sym, sep, path = text.partition("=")
    if not sep or not sym or not path:
        raise argparse.ArgumentTypeError(f"expected SYMBOL=FILE, got {text!r}")
    return sym, path


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="pkasim", description="Cycle-exact emulator of an ARM SC000 MCU with a public-key accelerator.")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv for debug)")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = sub.add_parser("run", help="run a firmware image headless and report cycles")
    run.add_argument("firmware", help="the ELF image to run")
    run.add_argument("--config", default=str(DEFAULT_CONFIG), help="chip description (YAML); default: %(default)s")
    run.add_argument("--max-cycles", type=_parse_int, default=None,
                     help=f"stop after this many cycles (default: {DEFAULT_BUDGET_SECONDS} modeled seconds; 0 = no limit)")
    run.add_argument("--json", metavar="FILE", help="write the run summary as JSON ('-' for stdout)")
    run.add_argument("--load", metavar="SYMBOL=FILE", type=_pair, action="append", default=[],
                     help="before reset, fill the object SYMBOL names with the bytes of FILE (repeatable)")
    run.add_argument("--dump", metavar="SYMBOL=FILE", type=_pair, action="append", default=[],
                     help="after the run, write the bytes of the object SYMBOL names to FILE (repeatable)")
    run.add_argument("--host-dir", metavar="DIR",
                     help="let the firmware open, create, rename and remove files inside DIR through "
                          "semihosting (nothing outside it; default: no host files)")
    run.add_argument("-q", "--quiet", action="store_true", help="no summary and no progress bar")
    run.epilog = ("Arguments after -- are the firmware's command line (argv[1:]; argv[0] is FIRMWARE). "
                  "The firmware's console input is pkasim's stdin.")

    bench = sub.add_parser("bench", help="RSA-2048 vs RSA-4096 (xRSA) vs software, on one or more chips")
    bench.add_argument("--config", action="append", default=[], metavar="FILE",
                       help="chip description; repeat to compare chips side by side (default: the default chip)")
    bench.add_argument("--json", metavar="FILE", help="write every figure as JSON ('-' for stdout)")
    bench.add_argument("--plot", metavar="FILE", help="write a chart (.png or .svg)")
    bench.add_argument("--only", action="append", default=[], metavar="JOB",
                       help="run only these jobs (repeatable): " + ", ".join(j.key for j in bench_jobs()))
    bench.add_argument("--build-dir", default=None, help="where the firmware images are (default firmware/build)")
    return parser


def bench_jobs():
    from .bench import JOBS

    return JOBS


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    guest_args: list[str] | None = None
    if "--" in argv:  # everything after the first -- is the firmware's, untouched by argparse
        at = argv.index("--")
        argv, guest_args = argv[:at], argv[at + 1:]
    args = build_parser().parse_args(argv)
    args.guest_args = guest_args or []
    console = Console(stderr=True, highlight=False)
    _setup_logging(args.verbose)
    if guest_args is not None and args.command != "run":
        _line(f"pkasim: error: arguments after -- are the firmware's command line; '{args.command}' takes none")
        return EXIT_USAGE
    try:
        if args.command == "run":
            return _run(args, console)
        if args.command == "bench":
            from .bench_cli import run_bench

            return run_bench(args, console)
        raise UsageError(f"unknown command {args.command}")
    except PkasimError as exc:
        _line(f"pkasim: error: {exc}")
        return exc.exit_code
    except KeyboardInterrupt:
        _line("pkasim: interrupted")
        return 130
    except Exception as exc:  # noqa: BLE001 - the one place that turns bugs into a clean line
        if os.environ.get("PKASIM_DEBUG"):
            raise
        _line(f"pkasim: internal error: {type(exc).__name__}: {exc} "
              "(set PKASIM_DEBUG=1 for a traceback, and please report it)")
        return EXIT_INTERNAL


def _line(text: str) -> None:
    """One unwrapped line on stderr: error lines are for scripts as much as people."""
    sys.stderr.write(" ".join(text.split("\n")) + "\n")
    sys.stderr.flush()


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


def _read_file(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise InputMissingError(f"{path}: no such file") from None
    except OSError as exc:
        raise InputMissingError(f"{path}: cannot read: {exc.strerror}") from None


class _ThroughConsole:
    """Firmware output shown line by line above a live progress bar (both on the
    terminal), so the bar never writes over it. Partial lines wait for their newline."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.pending = ""

    def write(self, data: bytes) -> int:
        self.pending += data.decode("utf-8", errors="replace")
        *lines, self.pending = self.pending.split("\n")
        for line in lines:
            self.console.print(line, markup=False, highlight=False, soft_wrap=True)
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        if self.pending:
            self.console.print(self.pending, markup=False, highlight=False, soft_wrap=True)
            self.pending = ""


def _run(args: argparse.Namespace, console: Console) -> int:
    config = load_config(args.config)
    show_progress = not args.quiet and console.is_terminal
    sinks: list[_ThroughConsole] = []
    stdin = getattr(sys.stdin, "buffer", None)
    if show_progress and sys.stdout.isatty():
        sinks = [_ThroughConsole(console), _ThroughConsole(console)]
        machine = Machine(config, stdout=sinks[0], stderr=sinks[1], stdin=stdin)
    else:
        machine = Machine(config, stdin=stdin)
    machine.load(args.firmware)
    _setup_semihosting(machine, args)
    for symbol, path in args.load:
        machine.write_symbol(symbol, _read_file(path))
    if args.dump:
        for symbol, _ in args.dump:
            machine.image.symbol(symbol)  # fail before the run, not after it
    budget = args.max_cycles
    if budget is None:
        budget = DEFAULT_BUDGET_SECONDS * config.core.clock_hz
    elif budget == 0:
        budget = None
    bar_total = budget if args.max_cycles else None  # a bar against the default budget says nothing

    if show_progress:
        with Progress(TextColumn("[bold]running[/bold]"), BarColumn(), TextColumn("{task.fields[status]}"),
                      TimeElapsedColumn(), console=console, transient=True) as bar:
            task = bar.add_task("run", total=bar_total, status="")

            def tick(cycles: int) -> None:
                bar.update(task, completed=cycles,
                           status=f"{cycles:,} cycles = {cycles / config.core.clock_hz:.3f} s modeled")

            result = machine.run(max_cycles=budget, progress=tick)
            for sink in sinks:
                sink.close()
    else:
        result = machine.run(max_cycles=budget)
    sys.stdout.flush()

    for symbol, path in args.dump:
        data = machine.read_symbol(symbol)
        try:
            Path(path).write_bytes(data)
        except OSError as exc:
            raise LoadError(f"{path}: cannot write dump of '{symbol}': {exc.strerror}") from None
    if args.json:
        text = json.dumps(to_json(machine, result, args.firmware), indent=2) + "\n"
        if args.json == "-":
            sys.stdout.write(text)
        else:
            try:
                Path(args.json).write_text(text)
            except OSError as exc:
                raise LoadError(f"{args.json}: cannot write JSON: {exc.strerror}") from None
    if not args.quiet:
        print_summary(console, machine, result, args.firmware)
    elif (result.lockup is not None or result.reason.value in ("budget", "sleep-forever", "stuck")
          or abnormal_exit(machine, result)):
        _line(f"pkasim: {result.message}")
    machine.semihosting.close_files()
    return exit_code_for(result)


def _setup_semihosting(machine: Machine, args: argparse.Namespace) -> None:
    """The firmware's command line (FIRMWARE then the words after --) and host directory."""
    sh = machine.semihosting
    sh.argv = [args.firmware, *args.guest_args]
    if args.host_dir is not None:
        path = Path(args.host_dir)
        if not path.exists():
            raise InputMissingError(f"--host-dir {args.host_dir}: no such directory")
        if not path.is_dir():
            raise InputMissingError(f"--host-dir {args.host_dir}: not a directory")
        sh.host_dir = HostDir(path)


if __name__ == "__main__":
    sys.exit(main())
