"""pkasim's subcommands, one module each; ``emulator.cli`` parses and dispatches.

Each module offers ``add_parser(subparsers)`` and ``main(args, console) -> int``.
"""

from . import apdu, card, diff, profile, regress, sign, sweep, usb

COMMANDS = {"profile": profile, "diff": diff, "regress": regress, "sweep": sweep, "usb": usb, "sign": sign,
            "apdu": apdu, "card": card}
