"""pkasim's subcommands, one module each; ``emulator.cli`` parses and dispatches.

Each module offers ``add_parser(subparsers)`` and ``main(args, console) -> int``.
"""

from . import diff, gdbserver, profile, regress

COMMANDS = {"profile": profile, "diff": diff, "regress": regress, "gdbserver": gdbserver}
