"""``pkasim card [FW.elf] [--state F]``: the emulated card in a PC/SC reader.

Connects to pcscd's vsmartcard ``vpcd`` driver (Debian: pcscd, vsmartcard-vpcd) so
that any PC/SC program (gpg's scdaemon, opensc-tool, pcsc_scan) sees a reader with
the card in it. Every APDU crosses the emulated USB bus with its timing; each one is
printed with its latency breakdown, and ``--log`` writes them as JSON lines.
Runs until vpcd closes the connection (pcscd stops), then saves the card's state.

Exit codes: 0 vpcd closed the connection; 1 the card stopped answering;
64 a malformed --vpcd or --wait; 69 no vpcd listening (EX_UNAVAILABLE: is pcscd
running with vsmartcard-vpcd?).
"""

from __future__ import annotations

import argparse
import json
import math

from rich.console import Console

from pkasim.base.errors import OutputError, PkasimError, UsageError
from pkasim.cli.cardcommon import add_card_options, open_session
from pkasim.usb.openpgp import sw_text
from pkasim.usb.vpcd import VPCD_PORT, VpcdUnavailable, serve


class NoReader(PkasimError):
    exit_code = 69


def _seconds(text: str) -> float:
    """--wait: a finite, non-negative number of seconds (NaN would wait for ever)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text[:40]!r}") from None
    if not 0 <= value < math.inf:
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds, 0 or more, got {text[:40]!r}")
    return value


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("card", help="serve the emulated card to pcscd (vsmartcard vpcd): a PC/SC reader")
    add_card_options(p)
    p.add_argument("--vpcd", default=f"127.0.0.1:{VPCD_PORT}", metavar="HOST:PORT",
                   help="where vpcd listens (default %(default)s)")
    p.add_argument("--log", metavar="FILE", help="append each APDU and its breakdown as a JSON line")
    p.add_argument("--wait", type=_seconds, default=0.0, metavar="SECONDS",
                   help="keep trying to reach vpcd this long (pcscd may be starting; default %(default)s)")


def main(args: argparse.Namespace, console: Console) -> int:
    host, _, port = args.vpcd.rpartition(":")
    try:
        port_number = int(port)
    except ValueError:
        raise UsageError(f"--vpcd {args.vpcd!r}: expected HOST:PORT") from None
    if not 0 < port_number <= 65535:
        raise UsageError(f"--vpcd {args.vpcd!r}: a TCP port is 1 to 65535")
    session = open_session(args)
    log = None
    if args.log:
        try:
            log = open(args.log, "a")  # noqa: SIM115 - open for the whole session
        except OSError as exc:
            raise OutputError(f"{args.log}: cannot write: {exc.strerror or exc}") from None

    def on_apdu(command: bytes, response: bytes, ex) -> None:
        b = ex.breakdown
        sw = response[-2] << 8 | response[-1] if len(response) >= 2 else 0
        console.print(f"{command[:4].hex().upper()} ({len(command)} bytes) -> {sw:04X} {sw_text(sw)}: "
                      f"{b.total_ms:.3f} ms host, {b.device_ms:.3f} ms device, compute {b.compute_ms:.3f}",
                      highlight=False)
        if log is not None:
            log.write(json.dumps({"command": command.hex(), "sw": f"{sw:04X}", "response_bytes": len(response),
                                  "breakdown": b.as_dict()}) + "\n")
            log.flush()
        session.save_state()

    try:
        served = serve(session, host or "127.0.0.1", port_number, on_apdu, wait=args.wait)
    except VpcdUnavailable as exc:
        raise NoReader(f"{exc}: is pcscd running with vsmartcard-vpcd?") from None
    finally:
        if log is not None:
            log.close()
    session.save_state()
    console.print(f"vpcd closed the connection after {served} APDUs", highlight=False)
    return 0

