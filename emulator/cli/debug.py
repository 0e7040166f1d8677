"""``pkasim debug FW.elf [--config F] [--load SYM=FILE] [--commands FILE]``: the
step debugger (emulator/debugger, docs/debugger.md).

On a terminal it opens the full-screen TUI; with ``--commands FILE`` (or when stdin
is not a terminal) the same command engine reads commands one per line and prints
plain text: ``(pkasim) COMMAND`` and what it answered. Scripted mode exits 0 when
every command ran, 64 when any was refused (its ``error:`` line says why).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable

from rich.console import Console

from pkasim.base import limits
from pkasim.base.errors import EXIT_USAGE, LoadError
from pkasim.chip.config import load_config
from pkasim.cli.common import (
    Guarded,
    add_config_option,
    load_inputs,
    parse_int,
    read_file,
    setup_semihosting,
    symbol_file,
)
from pkasim.core.machine import Machine

MAX_SCRIPT_BYTES = limits.SCRIPT_MAX_BYTES  # a command file larger than this is refused


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("debug", help="step debugger: full-screen TUI, or scripted with --commands")
    p.add_argument("firmware", help="the ELF image to debug")
    add_config_option(p)
    p.add_argument("--load", metavar="SYMBOL=FILE", type=symbol_file, action="append", default=[],
                   help="before reset, fill the object SYMBOL names with the bytes of FILE (repeatable)")
    p.add_argument("--host-dir", metavar="DIR", help="host files the firmware may use (as for run)")
    p.add_argument("--commands", metavar="FILE", help="run the commands in FILE ('-' for stdin) with plain output")
    p.add_argument("--no-reverse", action="store_true", help="no snapshots: reverse execution is off")
    p.add_argument("--snapshot-interval", metavar="CYCLES", type=parse_int, default=None,
                   help="cycles between time-travel snapshots (default 1,000,000)")


def build_machine(args: argparse.Namespace, stdout, stderr) -> Machine:
    """The chip with the image and its --load inputs, at reset."""
    config = load_config(args.config)
    machine = Machine(config, stdout=stdout, stderr=stderr, stdin=None)
    machine.load(args.firmware)
    args.guest_args = []
    setup_semihosting(machine, args)
    load_inputs(machine, args)
    return machine


def make_debugger(machine: Machine, args: argparse.Namespace):
    from pkasim.debugger.engine import Debugger
    from pkasim.debugger.timetravel import DEFAULT_INTERVAL

    interval = args.snapshot_interval or DEFAULT_INTERVAL
    return Debugger(machine, reverse=not args.no_reverse, interval_cycles=interval)


def run_script(debugger, lines: Iterable[str], out) -> int:
    """Each command echoed after the prompt, then its answer; 64 if any was refused."""
    failed = False
    for raw in lines:
        line = raw.rstrip("\n")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        out.write(f"(pkasim) {line.strip()}\n")
        answer = debugger.execute(line)
        for text in answer:
            out.write(text + "\n")
        failed = failed or any(a.startswith("error:") for a in answer)
        out.flush()
        if debugger.quit:
            break
    return EXIT_USAGE if failed else 0


def _script_lines(args: argparse.Namespace) -> list[str]:
    """The script, read once and bounded: a file (a pipe will do: ``--commands <(...)``)
    or stdin. More than 1 MiB is refused, not cut short."""
    if args.commands in (None, "-"):
        stream = getattr(sys.stdin, "buffer", None)
        data = stream.read(MAX_SCRIPT_BYTES + 1) if stream is not None else \
            sys.stdin.read(MAX_SCRIPT_BYTES + 1).encode("utf-8", "surrogateescape")
        if len(data) > MAX_SCRIPT_BYTES:
            raise LoadError(f"stdin: more than {MAX_SCRIPT_BYTES:,} bytes of commands (the command file's limit)")
    else:
        data = read_file(args.commands, MAX_SCRIPT_BYTES, "the command file's limit (1 MiB)")
    return data.decode("utf-8", errors="replace").splitlines()


def main(args: argparse.Namespace, console: Console) -> int:
    scripted = args.commands is not None or not sys.stdin.isatty() or not sys.stdout.isatty()
    if scripted:
        lines = _script_lines(args)  # before the machine: a missing script costs no ELF load
        out = Guarded(sys.stdout, "stdout")
        machine = build_machine(args, Guarded(sys.stdout.buffer, "stdout"), Guarded(sys.stderr.buffer, "stderr"))
        debugger = make_debugger(machine, args)
        return run_script(debugger, lines, out)
    from pkasim.debugger.tui import run_tui

    return run_tui(lambda sink: make_debugger(build_machine(args, sink, sink), args), str(args.firmware), console)
