"""``pkasim configs``: the chip files and sweep examples pkasim carries, by name.

Every command's ``--config`` takes these names (``ciu98320b``, ``presets/victor-radix16``)
as well as paths, and ``pkasim sweep`` takes the sweep names. One line per file on
stdout: the name, then what the file says it is (its ``chip:`` or ``name:``).
"""

from __future__ import annotations

import argparse
import sys

from rich.console import Console

from pkasim.base import resources
from pkasim.base.errors import PkasimError
from pkasim.chip.config import load_yaml
from pkasim.cli.common import Guarded

HELP = "list the bundled chip files (names for --config) and sweep examples"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("configs", help=HELP)
    p.add_argument("--paths", action="store_true", help="print each file's path instead of its description")


def _title(name: str, key: str) -> str:
    """What a bundled file calls itself; a file that cannot be read says why instead."""
    path = resources.bundled(name)
    try:
        doc = load_yaml(path)
    except PkasimError as exc:
        return f"(unreadable: {exc})"
    value = doc.get(key) if isinstance(doc, dict) else None
    return str(value) if value is not None else ""


def main(args: argparse.Namespace, console: Console) -> int:
    out = Guarded(sys.stdout, "stdout")
    chips, sweeps = resources.chip_names(), resources.sweep_names()
    width = max(len(n) for n in chips + sweeps) + 2
    for name in chips:
        what = str(resources.bundled(name)) if args.paths else _title(name, "chip")
        mark = "  (default)" if name == resources.DEFAULT_CHIP and not args.paths else ""
        out.write(f"{name:<{width}}{what}{mark}\n")
    for name in sweeps:
        what = str(resources.bundled(name)) if args.paths else "sweep: " + _title(name, "name")
        out.write(f"{name:<{width}}{what}\n")
    return 0
