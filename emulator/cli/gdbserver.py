"""``pkasim gdbserver FW.elf [--config F] [--load SYMBOL=FILE] [--port N]``: debug the
emulated chip from gdb or an IDE over GDB's remote protocol (docs/gdbserver.md).

Builds the machine like ``pkasim run`` (the image loaded, --load inputs written,
reset), listens on 127.0.0.1 (``--host`` to change it), serves one gdb session and
exits 0 when gdb detaches or kills the target.

The server has no authentication and reads and writes the whole target, so it
serves this machine only unless told otherwise in so many words: ``--host 0.0.0.0``
or ``--host ::`` (every interface) or the address of one interface, with a warning
on stderr. ``--host ''`` (an unset shell variable) and ``--host 0``, which the socket
layer would quietly take as every interface, are refused.
"""

from __future__ import annotations

import argparse
import sys

from rich.console import Console

from pkasim.base.errors import EXIT_OS, PkasimError, UsageError
from pkasim.chip.config import load_config
from pkasim.cli.common import Guarded, add_run_options, dump_outputs, load_inputs, parse_int, setup_semihosting
from pkasim.core.machine import Machine

DEFAULT_PORT = 3333
DEFAULT_INTERVAL = 1_000_000  # cycles between time-travel snapshots


class ListenError(PkasimError):
    """The port cannot be listened on (in use, not allowed)."""

    exit_code = EXIT_OS


def tcp_port(text: str) -> int:
    """A TCP port, 0 to 65535 (0: the system picks a free one)."""
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text[:40]!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a TCP port is 0 to 65535 (0 picks a free one), got {text[:40]!r}")
    return value


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("gdbserver", help="serve the emulated chip to gdb (remote protocol over TCP)")
    add_run_options(p)
    p.add_argument("--port", type=tcp_port, default=DEFAULT_PORT,
                   help="TCP port (default %(default)s; 0 picks a free one and prints it)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default %(default)s; ::1 for IPv6 loopback; 0.0.0.0 or :: serve "
                        "every interface, with no authentication: a warning says so)")
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
    family, sockaddr, loopback = listen_address(args.host, args.port)
    try:
        srv = listen(args.host, args.port, address=(family, sockaddr))
    except OSError as exc:
        raise ListenError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    try:
        machine = build_machine(args)
        target = Target(machine, interval_cycles=args.snapshot_interval, max_cycles=args.max_cycles or None)
    except BaseException:
        srv.close()
        raise
    host, port = srv.getsockname()[:2]
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def say(text: str) -> None:
        if not args.quiet:
            console.print(f"pkasim gdbserver: {text}", markup=False, highlight=False, soft_wrap=True)

    console.print(f"pkasim gdbserver: {args.firmware} at {machine.describe(machine.pc)}, "
                  f"listening on {where}", markup=False, highlight=False, soft_wrap=True)
    if not loopback:
        console.print(f"pkasim gdbserver: warning: listening on {where}, beyond this machine: anyone who can reach "
                      "it can read and write the target's memory and registers (the remote protocol has no "
                      "authentication)", markup=False, highlight=False, soft_wrap=True)
    try:
        serve(srv, target, say)
    finally:
        srv.close()
    dump_outputs(machine, args)  # one line and exit 74 if a --dump file cannot be written, as for run
    machine.semihosting.close_files()
    return 0


def listen_address(host: str, port: int) -> tuple[int, tuple, bool]:
    """(family, socket address, loopback?) for ``--host``. Every interface must be
    asked for as 0.0.0.0 or ::; the empty string and other spellings the resolver
    takes as 0.0.0.0 ('0', '0.0') are refused (64)."""
    import ipaddress
    import socket

    spelled = host.strip()
    hint = "127.0.0.1 or ::1 serve this machine only; 0.0.0.0 or :: every interface"
    if not spelled:
        raise UsageError(f"--host {host!r}: no address (an unset shell variable?); {hint}")
    try:
        infos = socket.getaddrinfo(spelled, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE | socket.AI_NUMERICSERV)
    except (socket.gaierror, UnicodeError) as exc:
        raise UsageError(f"--host {host!r}: not an address to listen on ({getattr(exc, 'strerror', exc)}); "
                         f"{hint}") from None
    family, _, _, _, sockaddr = infos[0]
    address = ipaddress.ip_address(sockaddr[0].split("%")[0])
    if address.is_unspecified and spelled not in ("0.0.0.0", "::"):
        raise UsageError(f"--host {host!r} would listen on every interface ({address}); say --host 0.0.0.0 "
                         "or --host :: to serve beyond this machine")
    return family, sockaddr, address.is_loopback
