"""pkasim's subcommands, one module each; ``emulator.cli`` parses and dispatches.

Each module offers ``add_parser(subparsers)`` and ``main(args, console) -> int``.
"""

from . import debug, diff, gdbserver, profile, regress, sweep

COMMANDS = {"profile": profile, "diff": diff, "regress": regress, "sweep": sweep, "debug": debug,
            "gdbserver": gdbserver}
