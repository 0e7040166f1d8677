"""``pkasim profile FW.elf [run options] [--json F] [traces]``: where the cycles go.

Runs the firmware like ``pkasim run`` with the profiler attached (pkasim.analysis.profiler)
and prints one row per function, sorted by exclusive cycles; ``--json`` writes the
profile as docs/json-schema.md ("pkasim profile --json") describes.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console
from rich.table import Table

from pkasim.analysis.profiler import PROFILE_SCHEMA, Profiler
from pkasim.cli.common import add_run_options, run_firmware, write_text
from pkasim.cli.report import exit_code_for
from pkasim.cli.traces import Traces, add_trace_options
from pkasim.core.machine import Machine, RunResult


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("profile", help="per-function cycle profile of a run (inclusive, exclusive, waiting, PKA)")
    add_run_options(p)
    p.add_argument("--json", metavar="FILE", help="write the profile as JSON ('-' for stdout)")
    p.add_argument("--top", metavar="N", type=int, default=30, help="table rows (default %(default)s; 0 = all)")
    add_trace_options(p)


def to_json(machine: Machine, result: RunResult, profiler: Profiler, firmware: str) -> dict[str, Any]:
    """The profile document: deterministic (no wall time, no host data)."""
    rows = profiler.rows()
    pka = machine.peripherals.get("pka")
    stats = pka.stats() if pka is not None else {}
    return {
        "schema": PROFILE_SCHEMA,
        "firmware": firmware,
        "config": machine.config.source,
        "chip": machine.config.chip,
        "clock_hz": result.clock_hz,
        "reason": result.reason.value,
        "exit_code": exit_code_for(result),
        "cycles": profiler.total_cycles,
        "instructions": profiler.total_instructions,
        "sleep_cycles": result.sleep_cycles,
        "wait_cycles": sum(r.wait_cycles for r in rows),
        "pka_operations": stats.get("operations", {}),
        "pka_busy_cycles": stats.get("busy_cycles", 0),
        "functions": [r.to_json() for r in rows],
    }


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def print_profile(console: Console, doc: dict[str, Any], top: int) -> None:
    total = doc["cycles"]
    rows = doc["functions"]
    shown = rows if top <= 0 else rows[:top]
    table = Table(title=f"{doc['firmware']} on {doc['chip']}: {total:,} cycles "
                        f"({total / doc['clock_hz'] * 1e3:,.3f} ms modeled), by exclusive cycles",
                  title_justify="left")
    for name, justify in (("function", "left"), ("calls", "right"), ("instructions", "right"),
                          ("exclusive", "right"), ("excl %", "right"), ("inclusive", "right"), ("incl %", "right"),
                          ("waiting", "right"), ("PKA busy", "right")):
        table.add_column(name, justify=justify)
    for r in shown:
        table.add_row(r["name"], f"{r['calls']:,}", f"{r['instructions']:,}", f"{r['exclusive_cycles']:,}",
                      _pct(r["exclusive_cycles"], total), f"{r['inclusive_cycles']:,}",
                      _pct(r["inclusive_cycles"], total), f"{r['wait_cycles']:,}" if r["wait_cycles"] else "",
                      f"{r['pka_busy_cycles']:,}" if r["pka_busy_cycles"] else "")
    if len(shown) < len(rows):
        rest = rows[len(shown):]
        table.add_row(f"({len(rest)} more)", "", f"{sum(r['instructions'] for r in rest):,}",
                      f"{sum(r['exclusive_cycles'] for r in rest):,}",
                      _pct(sum(r["exclusive_cycles"] for r in rest), total), "", "", "", "")
    table.add_section()
    table.add_row("total", "", f"{doc['instructions']:,}", f"{sum(r['exclusive_cycles'] for r in rows):,}",
                  _pct(total, total), "", "", f"{doc['wait_cycles']:,}", f"{doc['pka_busy_cycles']:,}")
    console.print(table)
    if doc["reason"] != "exit":
        console.print(f"[red]the run did not exit: {doc['reason']}[/red]")


def main(args: argparse.Namespace, console: Console) -> int:
    if not console.is_terminal:
        console = Console(stderr=True, highlight=False, width=160)  # tables are read in logs too
    profiler = Profiler()
    traces = Traces(args, profiler)

    def attach(machine: Machine) -> None:
        machine.observe(profiler)
        traces.attach(machine)

    machine, result = run_firmware(args, console, attach)
    traces.close(console)
    doc = to_json(machine, result, profiler, args.firmware)
    if args.json:
        write_text(args.json, json.dumps(doc, indent=2) + "\n", "the profile JSON")
    if not args.quiet:
        print_profile(console, doc, args.top)
    return exit_code_for(result)
