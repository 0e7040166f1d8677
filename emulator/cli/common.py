"""What ``run`` and ``profile`` share: the run options, loading, the progress bar."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from pkasim.base import limits, userfiles
from pkasim.base.errors import InputMissingError, LoadError, OutputError, UsageError
from pkasim.chip.config import DEFAULT_CHIP, load_config
from pkasim.cli.streams import Guarded
from pkasim.core.machine import Machine, RunResult
from pkasim.host.hostfiles import HostDir

DEFAULT_BUDGET_SECONDS = 600  # modeled seconds before a run that never exits is stopped


def parse_int(text: str) -> int:
    """A cycle count: 0 to 2^64-1 (the cycle counter), in any base int() reads."""
    shown = text if len(text) <= 40 else f"{text[:30]}...({len(text)} characters)"
    if len(text) > 40:  # 2^64 has 20 digits; int() of thousands of digits is refused anyway
        raise argparse.ArgumentTypeError(f"at most {limits.MAX_CYCLES_MAX} (the cycle counter is 64-bit): {shown!r}")
    try:
        value = int(text.replace("_", ""), 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {shown!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {shown!r}")
    if value > limits.MAX_CYCLES_MAX:
        raise argparse.ArgumentTypeError(f"at most {limits.MAX_CYCLES_MAX} (the cycle counter is 64-bit): {shown!r}")
    return value


def symbol_file(text: str) -> tuple[str, str]:
    sym, sep, path = text.partition("=")
    if not sep or not sym or not path:
        raise argparse.ArgumentTypeError(f"expected SYMBOL=FILE, got {text!r}")
    return sym, path


CONFIG_HELP = f"chip file (YAML) or bundled chip name (`pkasim configs` lists them); default: {DEFAULT_CHIP}"


def add_config_option(parser: argparse.ArgumentParser) -> None:
    """--config: a chip file or a bundled chip's name. Left out, the bundled default chip
    (by its file, so that no file named like it in the working directory stands in)."""
    parser.add_argument("--config", default=None, help=CONFIG_HELP)


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """FIRMWARE, --config, --max-cycles, --load, --dump, -q."""
    parser.add_argument("firmware", help="the ELF image to run")
    add_config_option(parser)
    parser.add_argument("--max-cycles", type=parse_int, default=None,
                        help=f"stop after this many cycles (default: {DEFAULT_BUDGET_SECONDS} modeled seconds; "
                             "0 = no limit)")
    parser.add_argument("--load", metavar="SYMBOL=FILE", type=symbol_file, action="append", default=[],
                        help="before reset, fill the object SYMBOL names with the bytes of FILE (repeatable)")
    parser.add_argument("--dump", metavar="SYMBOL=FILE", type=symbol_file, action="append", default=[],
                        help="after the run, write the bytes of the object SYMBOL names to FILE (repeatable)")
    parser.add_argument("--host-dir", metavar="DIR",
                        help="let the firmware open, create, rename and remove files inside DIR through "
                             "semihosting (nothing outside it; default: no host files)")
    parser.add_argument("--seed", type=parse_int, default=None, metavar="N",
                        help="seed of the chip's true random number generator (its output is a deterministic "
                             "stream from it; default: the chip file's, docs/trng.md)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no summary and no progress bar")
    parser.epilog = ("Arguments after -- are the firmware's command line (argv[1:]; argv[0] is FIRMWARE). "
                     "The firmware's console input is pkasim's stdin.")


def read_file(path: str, limit: int, what: str, *, streams: bool = True) -> bytes:
    """At most ``limit`` bytes of a file; a longer one (or /dev/zero) is refused after
    reading one byte more, never read to its end. With ``streams`` a pipe or device is
    read too (``--load buf=<(...)``); without, only a regular file is (pkasim.base.userfiles).
    A FIFO never blocks the open."""
    try:
        data = userfiles.read_bounded(path, limit, streams=streams)
    except FileNotFoundError:
        raise InputMissingError(f"{path}: no such file") from None
    except OSError as exc:
        raise InputMissingError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise LoadError(f"{path}: more than {limit:,} bytes, {what}")
    return data


class _ThroughConsole:
    """Firmware output shown line by line above a live progress bar (both on the
    terminal), so the bar never writes over it. Partial lines wait for their newline."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.pending = ""

    def write(self, data: bytes) -> int:
        self.pending += data.decode("utf-8", errors="replace")
        *lines, self.pending = self.pending.split("\n")
        for line in lines:
            self.console.print(line, markup=False, highlight=False, soft_wrap=True)
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        if self.pending:
            self.console.print(self.pending, markup=False, highlight=False, soft_wrap=True)
            self.pending = ""


def load_inputs(machine: Machine, args: argparse.Namespace) -> None:
    """Fill the objects that --load names (each bounded by its symbol's size, or by
    its region's end for a symbol without one), check the --dump symbols before the
    run rather than after it, and give the TRNGs the --seed."""
    config = machine.config
    seed = getattr(args, "seed", None)
    if seed is not None:
        generators = [dev for dev in machine.peripherals.values() if hasattr(dev, "set_seed")]
        if not generators:
            raise UsageError(f"--seed: the chip ({config.source}) has no random number generator")
        for dev in generators:
            dev.set_seed(seed)
    for symbol, path in args.load:
        machine.write_symbol(symbol, read_load(machine, symbol, path))
    for symbol, _ in getattr(args, "dump", ()):
        machine.image.extent(symbol, config)


def read_load(machine: Machine, symbol: str, path: str | Path) -> bytes:
    """The bytes ``--load SYMBOL=FILE`` (or a regress case's ``load:``) puts into the
    object: at most its size, or up to the end of its region for a symbol without one;
    a pipe or device is read to that bound, never further."""
    addr, room, region = machine.image.extent(symbol, machine.config)
    sized = machine.image.symbol(symbol).size
    what = (f"the size of '{symbol}'" if sized else
            f"the room from '{symbol}' (0x{addr:08x}, a symbol without a size) to the end of {region.name}")
    return read_file(str(path), room, what)


def dump_outputs(machine: Machine, args: argparse.Namespace) -> None:
    """Write each ``--dump SYMBOL=FILE``: the same bytes ``--load`` may fill, the
    symbol's size or, for a symbol without one, up to the end of its region."""
    for symbol, path in getattr(args, "dump", ()):
        addr, room, _ = machine.image.extent(symbol, machine.config)
        data = machine.read_memory(addr, room)
        try:
            Path(path).write_bytes(data)
        except OSError as exc:
            raise OutputError(f"{path}: cannot write dump of '{symbol}': {exc.strerror or exc}") from None


def run_firmware(args: argparse.Namespace, console: Console,
                 attach: Callable[[Machine], None] | None = None) -> tuple[Machine, RunResult]:
    """Build the chip, load the image and the --load inputs, let ``attach`` add its
    observers, run (with a progress bar on a terminal), write the --dump outputs."""
    config = load_config(args.config)
    show_progress = not args.quiet and console.is_terminal
    sinks: list[_ThroughConsole] = []
    stdin = getattr(sys.stdin, "buffer", None)
    if show_progress and sys.stdout.isatty():
        sinks = [_ThroughConsole(console), _ThroughConsole(console)]
        machine = Machine(config, stdout=sinks[0], stderr=sinks[1], stdin=stdin)
    else:
        machine = Machine(config, stdout=Guarded(sys.stdout.buffer, "stdout"),
                          stderr=Guarded(sys.stderr.buffer, "stderr"), stdin=stdin)
    machine.load(args.firmware)
    setup_semihosting(machine, args)
    load_inputs(machine, args)
    if attach is not None:
        attach(machine)
    budget = args.max_cycles
    if budget is None:
        budget = DEFAULT_BUDGET_SECONDS * config.core.clock_hz
    elif budget == 0:
        budget = None
    bar_total = budget if args.max_cycles else None  # a bar against the default budget says nothing

    if show_progress:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn("[bold]running[/bold]"), BarColumn(), TextColumn("{task.fields[status]}"),
                      TimeElapsedColumn(), console=console, transient=True) as bar:
            task = bar.add_task("run", total=bar_total, status="")

            def tick(cycles: int) -> None:
                bar.update(task, completed=cycles,
                           status=f"{cycles:,} cycles = {cycles / config.core.clock_hz:.3f} s modeled")

            result = machine.run(max_cycles=budget, progress=tick)
            for sink in sinks:
                sink.close()
    else:
        result = machine.run(max_cycles=budget)
    Guarded(sys.stdout, "stdout").flush()

    dump_outputs(machine, args)
    machine.semihosting.close_files()
    return machine, result


def setup_semihosting(machine: Machine, args: argparse.Namespace) -> None:
    """The firmware's command line (FIRMWARE then the words after --) and host directory."""
    sh = machine.semihosting
    sh.argv = [args.firmware, *getattr(args, "guest_args", [])]
    if args.host_dir is not None:
        path = Path(args.host_dir)
        if not path.exists():
            raise InputMissingError(f"--host-dir {args.host_dir}: no such directory")
        if not path.is_dir():
            raise InputMissingError(f"--host-dir {args.host_dir}: not a directory")
        sh.host_dir = HostDir(path)


def write_text(path: str, text: str, what: str) -> None:
    """``text`` to a file, or to stdout for '-'; OutputError (exit 74) if it cannot be written."""
    if path == "-":
        out = Guarded(sys.stdout, "stdout")
        out.write(text)
        out.flush()
        return
    try:
        Path(path).write_text(text)
    except OSError as exc:
        raise OutputError(f"{path}: cannot write {what}: {exc.strerror or exc}") from None
