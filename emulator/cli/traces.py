"""The trace options ``run`` and ``profile`` share: --folded, --trace-events, --vcd,
--tarmac (docs/traces.md). Each attaches its writer before the run and writes its
file after it; paths are checked before the run so a typo costs no run."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from pkasim.analysis.profiler import Profiler
from pkasim.analysis.trace.tarmac import DEFAULT_LIMIT
from pkasim.base.errors import OutputError
from pkasim.cli.common import parse_int
from pkasim.core.machine import Machine


def add_trace_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("traces (docs/traces.md)")
    group.add_argument("--folded", metavar="FILE", help="folded stacks weighted by cycles (speedscope, flamegraph.pl)")
    group.add_argument("--trace-events", metavar="FILE",
                       help="Chrome trace-event JSON on the modeled-time axis (Perfetto, speedscope)")
    group.add_argument("--vcd", metavar="FILE", help="value change dump of the chip's signals (GTKWave)")
    group.add_argument("--tarmac", metavar="FILE", help="instruction trace in the spirit of Arm's Tarmac format")
    group.add_argument("--tarmac-range", metavar="SYMBOL|START:END", default=None,
                       help="what --tarmac traces: a function, or an address range (default: all of flash)")
    group.add_argument("--tarmac-limit", metavar="N", type=parse_int, default=DEFAULT_LIMIT,
                       help="instructions --tarmac writes at most (default %(default)s)")


def _writable(path: str, option: str) -> None:
    try:
        Path(path).write_text("")
    except OSError as exc:
        raise OutputError(f"{path}: cannot write {option} output: {exc.strerror or exc}") from None


class Traces:
    """The writers the options asked for, attached to one machine."""

    def __init__(self, args: argparse.Namespace, profiler: Profiler | None = None) -> None:
        self.args = args
        self.profiler = profiler
        self.writers: list = []
        self.tarmac = None
        self.machine: Machine | None = None
        for option in ("folded", "trace_events", "vcd", "tarmac"):
            path = getattr(args, option, None)
            if path:
                _writable(path, "--" + option.replace("_", "-"))

    @property
    def wanted(self) -> bool:
        a = self.args
        return bool(a.folded or a.trace_events or a.vcd or a.tarmac)

    def attach(self, machine: Machine) -> None:
        from pkasim.analysis.trace.tarmac import TarmacWriter, parse_range
        from pkasim.analysis.trace.trace_events import TraceEventWriter
        from pkasim.analysis.trace.vcd import VcdWriter

        a = self.args
        self.machine = machine
        if a.folded and self.profiler is None:
            self.profiler = Profiler()
            machine.observe(self.profiler)
        if a.trace_events:
            self.writers.append(TraceEventWriter(a.trace_events, firmware=a.firmware))
        if a.vcd:
            self.writers.append(VcdWriter(a.vcd))
        for writer in self.writers:
            machine.observe(writer)
        if a.tarmac:
            flash = machine.config.flash
            begin, end = parse_range(machine, a.tarmac_range) if a.tarmac_range else (flash.base, flash.end)
            self.tarmac = TarmacWriter(machine, a.tarmac, begin, end, limit=a.tarmac_limit)

    def close(self, console: Console) -> None:
        """Write every file (detaching the writers) and say where they went."""
        from pkasim.analysis.trace.folded import write_folded

        a, m = self.args, self.machine
        if m is None:
            return
        try:
            for writer in self.writers:
                m.unobserve(writer)  # close() writes the file
            if a.folded:
                write_folded(self.profiler, a.folded)
            if self.tarmac is not None:
                self.tarmac.close()
        except OSError as exc:  # a full disk, /dev/full: exit 74 like any output
            paths = ", ".join(p for p in (a.folded, a.trace_events, a.vcd, a.tarmac) if p)
            raise OutputError(f"cannot write the traces ({paths}): {exc.strerror or exc}") from None
        if self.tarmac is not None:
            if self.tarmac.truncated:
                console.print(f"[yellow]--tarmac stopped after {self.tarmac.limit:,} instructions "
                              "(--tarmac-limit)[/yellow]")
        written = [p for p in (a.folded, a.trace_events, a.vcd, a.tarmac) if p]
        if written and not a.quiet:
            console.print("traces written: " + ", ".join(written), highlight=False)
