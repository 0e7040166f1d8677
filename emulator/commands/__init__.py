"""pkasim's subcommands, one module each; ``emulator.cli`` parses and dispatches.

Each module offers ``add_parser(subparsers)`` and ``main(args, console) -> int``.
"""

from . import apdu, card, ctcheck, debug, diff, gdbserver, profile, regress, sign, sweep, usb

COMMANDS = {"profile": profile, "diff": diff, "regress": regress, "sweep": sweep, "debug": debug,
            "gdbserver": gdbserver, "usb": usb, "sign": sign, "apdu": apdu, "card": card, "ct-check": ctcheck}
