"""``pkasim usb descriptors [FW.elf]``: enumerate the card and print its descriptors
the way ``lsusb -v`` does, with the modeled time enumeration took."""

from __future__ import annotations

import argparse

from rich.console import Console

from pkasim.cli.cardcommon import add_card_options, open_session
from pkasim.cli.common import write_text
from pkasim.usb.descriptors import lsusb


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("usb", help="the USB device: enumerate it and print its descriptors (like lsusb -v)")
    p.add_argument("what", choices=["descriptors"], help="what to show")
    add_card_options(p, state=False)


def main(args: argparse.Namespace, console: Console) -> int:
    session = open_session(args)
    write_text("-", lsusb(session.descriptors) + "\n", "the descriptors")
    host = session.host
    setups = sum(1 for p in host.log if p.kind == "SETUP")
    console.print(f"enumerated in {host.now_ns() / 1e6:,.3f} ms of host time from power-up "
                  f"({setups} control transfers, {host.stats.frames} frames)", highlight=False)
    return 0
