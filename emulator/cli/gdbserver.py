"""``pkasim gdbserver FW.elf [--config F] [--load SYMBOL=FILE] [--port N]``: debug the
emulated chip from gdb or an IDE over GDB's remote protocol (docs/gdbserver.md).

Builds the machine like ``pkasim run`` (the image loaded, --load inputs written,
reset), listens on 127.0.0.1 (``--host`` to change it), serves one gdb session and
exits 0 when gdb detaches or kills the target.
"""

from __future__ import annotations

import argparse
import sys

from rich.console import Console

from pkasim.base.errors import EXIT_OS, PkasimError, UsageError
from pkasim.chip.config import load_config
from pkasim.cli.common import Guarded, add_run_options, load_inputs, parse_int, setup_semihosting
from pkasim.core.machine import Machine

DEFAULT_PORT = 3333
DEFAULT_INTERVAL = 1_000_000  # cycles between time-travel snapshots


class ListenError(PkasimError):
    """The port cannot be listened on (in use, not allowed)."""

    exit_code = EXIT_OS


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("gdbserver", help="serve the emulated chip to gdb (remote protocol over TCP)")
    add_run_options(p)
    p.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help="TCP port (default %(default)s; 0 picks a free one and prints it)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default %(default)s)")
    p.add_argument("--snapshot-interval", metavar="CYCLES", type=parse_int, default=DEFAULT_INTERVAL,
                   help="cycles between snapshots for reverse execution (default %(default)s)")
    p.epilog = ("Then in gdb: target remote localhost:PORT. --max-cycles bounds each continue; "
                "--dump is written when the session ends.")


def build_machine(args: argparse.Namespace) -> Machine:
    """The machine as ``pkasim run`` builds it, stopped at reset."""
    config = load_config(args.config)
    machine = Machine(config, stdout=Guarded(sys.stdout.buffer, "stdout"),
                      stderr=Guarded(sys.stderr.buffer, "stderr"), stdin=getattr(sys.stdin, "buffer", None))
    machine.load(args.firmware)
    setup_semihosting(machine, args)
    load_inputs(machine, args)
    return machine


def main(args: argparse.Namespace, console: Console) -> int:
    from pkasim.debugger.gdbserver.server import Target, listen, serve

    if args.snapshot_interval < 1:
        raise UsageError("--snapshot-interval must be at least 1 cycle")
    try:
        srv = listen(args.host, args.port)
    except OSError as exc:
        raise ListenError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    try:
        machine = build_machine(args)
        target = Target(machine, interval_cycles=args.snapshot_interval, max_cycles=args.max_cycles or None)
    except BaseException:
        srv.close()
        raise
    host, port = srv.getsockname()[:2]

    def say(text: str) -> None:
        if not args.quiet:
            console.print(f"pkasim gdbserver: {text}", markup=False, highlight=False, soft_wrap=True)

    console.print(f"pkasim gdbserver: {args.firmware} at {machine.describe(machine.pc)}, "
                  f"listening on {host}:{port}", markup=False, highlight=False, soft_wrap=True)
    try:
        serve(srv, target, say)
    finally:
        srv.close()
    from pathlib import Path

    for symbol, path in args.dump:
        Path(path).write_bytes(machine.read_symbol(symbol))
    machine.semihosting.close_files()
    return 0
