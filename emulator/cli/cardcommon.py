"""What the card commands (usb, sign, apdu, card) share: the firmware and chip
arguments, bringing the card up, and printing a latency breakdown."""

from __future__ import annotations

import argparse
import os
import stat
from pathlib import Path

from rich.console import Console
from rich.table import Table

from pkasim.base import resources, userfiles
from pkasim.base.errors import InputMissingError, OutputError
from pkasim.chip.config import load_config
from pkasim.cli.common import add_config_option
from pkasim.core.machine import Machine
from pkasim.usb.session import Breakdown, CardSession

CARD_IMAGE = "card.elf"  # the bundled card firmware (firmware/build/card.elf in a checkout)


def add_card_options(p: argparse.ArgumentParser, state: bool = True) -> None:
    p.add_argument("firmware", nargs="?", default=None,
                   help=f"the card firmware (default: the bundled {CARD_IMAGE})")
    add_config_option(p)
    if state:
        p.add_argument("--state", metavar="FILE",
                       help="the card's state file: read before (if it exists), written after the session")


def check_state_path(path: str) -> None:
    """Before any work: the card-state file is read (if it exists) and written back at
    the end, so it must be a regular file in a directory that exists. Refused here
    (66 unreadable, 74 unwritable), not after a signature was made and its state lost."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise InputMissingError(f"{path}: cannot read the card state: {exc.strerror or exc}") from None
    if mode is not None and not stat.S_ISREG(mode):
        raise InputMissingError(f"{path}: cannot read the card state: not a regular file but "
                                f"{userfiles.kind_of(mode)}")
    check_output(path, "the card state")


def check_output(path: str | None, what: str) -> None:
    """OutputError (74) now for an output file that could not be written later: a
    missing directory, a directory in its place ('-', stdout, is always fine)."""
    if path is None or path == "-":
        return
    try:
        userfiles.check_output_path(path)
    except OSError as exc:
        raise OutputError(f"{path}: cannot write {what}: {exc.strerror or exc}") from None


def open_session(args: argparse.Namespace) -> CardSession:
    """The chip, the firmware (and its state), attached and enumerated."""
    if getattr(args, "state", None) is not None:
        check_state_path(args.state)
    config = load_config(args.config)
    if args.firmware is None:
        args.firmware = str(resources.image(CARD_IMAGE))
    elif not Path(args.firmware).exists():
        raise InputMissingError(f"{args.firmware}: no such file")
    machine = Machine(config)
    machine.load(args.firmware)
    session = CardSession(machine, state=getattr(args, "state", None))
    session.load_state()
    session.attach()
    return session


def breakdown_table(title: str, b: Breakdown) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("part")
    table.add_column("host ms", justify="right")
    table.add_column("share", justify="right")
    for name, value in b.parts():
        table.add_row(name, f"{value:,.3f}", f"{100 * value / b.total_ms:.1f}%" if b.total_ms else "-")
    table.add_section()
    table.add_row("total (host time)", f"{b.total_ms:,.3f}", "100.0%")
    table.add_row("total (device time)", f"{b.device_ms:,.3f}", "")
    table.add_row("APDU (firmware's SysTick)", f"{b.firmware_ms:,.3f}", "")
    return table


def print_breakdown(console: Console, title: str, b: Breakdown, session: CardSession) -> None:
    console.print(breakdown_table(title, b))
    osc = session.osc
    console.print(f"{b.out_packets} packets out, {b.in_packets} in, {b.time_extensions} time extensions, "
                  f"{b.naks} NAKs, {b.frames} frames; oscillator {osc.nominal_hz / 1e6:g} MHz "
                  f"{osc.error_ppm:+.1f} ppm ({'trimmed' if osc.trim_on else 'untrimmed'})", highlight=False)
