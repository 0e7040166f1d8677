"""``pkasim apdu [FW.elf] [--file F]``: raw APDUs to the card over USB.

One APDU per line, in hex (spaces allowed; ``#`` starts a comment), from the file or
stdin. The card is powered (IccPowerOn) first; each APDU goes in an XfrBlock and its
response data, status word and latency breakdown (modeled ms) are printed.

Exit codes: 0 every APDU was answered (whatever its status word); 1 the card stopped
answering; 65 a line that is not hex or not an APDU; 66 a missing file.
"""

from __future__ import annotations

import argparse
import sys

from rich.console import Console

from pkasim.base import limits
from pkasim.base.errors import LoadError
from pkasim.cli.cardcommon import add_card_options, open_session
from pkasim.cli.common import read_file, write_text
from pkasim.usb.openpgp import sw_text

APDU_FILE_MAX = limits.APDU_FILE_MAX_BYTES


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("apdu", help="send raw APDUs (hex lines) to the emulated card over USB")
    add_card_options(p)
    p.add_argument("--file", default="-", help="APDUs, one hex line each ('-' = stdin, the default)")


def parse_apdus(text: str, source: str) -> list[bytes]:
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].replace(" ", "").strip()
        if not line:
            continue
        try:
            apdu = bytes.fromhex(line)
        except ValueError:
            raise LoadError(f"{source}:{n}: not hex: {line[:40]!r}") from None
        if not 4 <= len(apdu) <= 1590:
            raise LoadError(f"{source}:{n}: an APDU is 4 to 1590 bytes here, this one is {len(apdu)}")
        out.append(apdu)
    return out


def main(args: argparse.Namespace, console: Console) -> int:
    if args.file == "-":
        text = sys.stdin.buffer.read(APDU_FILE_MAX + 1)
        if len(text) > APDU_FILE_MAX:
            raise LoadError(f"stdin: more than {APDU_FILE_MAX:,} bytes of APDUs")
    else:
        text = read_file(args.file, APDU_FILE_MAX, "too many APDUs")
    apdus = parse_apdus(text.decode("utf-8", "replace"), args.file if args.file != "-" else "stdin")
    session = open_session(args)
    atr = session.power_on()
    console.print(f"ATR {atr.hex(' ').upper()}", highlight=False)
    for apdu in apdus:
        data, sw, ex = session.apdu(apdu)
        b = ex.breakdown
        parts = ", ".join(f"{name} {value:.3f}" for name, value in b.parts())
        write_text("-", f"> {apdu.hex().upper()}\n" + (f"< {data.hex().upper()} {sw:04X}\n" if data else
                                                         f"< {sw:04X}\n"), "the responses")
        console.print(f"  {sw_text(sw)}; {b.total_ms:.3f} ms host ({b.device_ms:.3f} ms device): {parts}",
                      highlight=False)
    session.save_state()
    return 0
