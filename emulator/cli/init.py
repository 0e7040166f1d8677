"""``pkasim init DIR``: start a firmware project from the files pkasim carries.

Writes the project template (firmware/template: main.c, a Makefile that builds with the
pinned zig clang or arm-none-eabi-gcc, a README), the firmware sources the bundled
images are built from (start-up code, semihosting, a minimal libc, the SysTick/NVIC/SCB
registers, the PKA, RSA and USB drivers) and the linker script. The Makefile generates
the memory map from the chip named by --config, with the Python that runs pkasim now,
so `make run` works from the new folder wherever pkasim is installed.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from rich.console import Console

from pkasim.base import resources
from pkasim.base.errors import InputMissingError, OutputError, UsageError
from pkasim.chip.config import DEFAULT_CHIP
from pkasim.cli.common import CONFIG_HELP

HELP = "start a firmware project: C sources, linker script and a Makefile (zig clang or arm-none-eabi-gcc)"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("init", help=HELP)
    p.add_argument("dir", metavar="DIR", help="the project folder to create (new, or empty)")
    p.add_argument("--config", default=None, help=CONFIG_HELP.replace("chip file", "the project's chip: file"))


def project_files() -> dict[str, Path]:
    """What a new project holds: its path in the project -> the bundled file."""
    fw = resources.firmware_dir()
    files = {"link.ld": fw / "link.ld"}
    for name in ("Makefile", "main.c", "README.md"):
        files[name] = fw / "template" / name
    for path in sorted((fw / "src").glob("*.[ch]")):
        files[f"src/{path.name}"] = path
    missing = [str(path) for path in files.values() if not path.is_file()]
    if missing or not any(k.startswith("src/") for k in files):
        raise InputMissingError(f"{missing[0] if missing else fw / 'src'}: pkasim's bundled firmware sources are "
                                "missing (a broken installation: reinstall pkasim)")
    return files


def main(args: argparse.Namespace, console: Console) -> int:
    chip = args.config or DEFAULT_CHIP
    if args.config is not None:
        chip_path = resources.resolve_chip(chip)
        from pkasim.chip.config import load_config

        load_config(chip_path)  # a bad chip file is reported now, not at the first make
        chip = chip if resources.bundled(chip) == chip_path else str(chip_path.resolve())
    files = project_files()
    target = Path(args.dir)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise UsageError(f"{target}: exists and is not an empty folder; pkasim init writes a new project only")
    try:
        for rel, source in files.items():
            dest = target / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            if rel == "Makefile":
                text = source.read_text().replace("@PYTHON@", sys.executable).replace("@CHIP@", chip)
                dest.write_text(text)
            else:
                shutil.copyfile(source, dest)
    except OSError as exc:
        raise OutputError(f"{exc.filename or target}: cannot write the project: {exc.strerror or exc}") from None
    console.print(f"pkasim init: {len(files)} files in {target}/ (chip {chip}); "
                  f"next: make -C {target} run", highlight=False)
    return 0
