"""Run summaries for people (rich tables) and for programs (the JSON of docs/json-schema.md)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pkasim.base.errors import EXIT_BUDGET, EXIT_LOCKUP
from pkasim.core.machine import Fault, Machine, RunResult, StopReason

JSON_SCHEMA = "pkasim.run/1"


def exit_code_for(result: RunResult) -> int:
    """The process exit code a run maps to (documented in README and json-schema.md)."""
    if result.reason == StopReason.EXIT:
        return result.exit_code or 0
    if result.reason == StopReason.LOCKUP:
        return EXIT_LOCKUP
    return EXIT_BUDGET


def abnormal_exit(machine: Machine, result: RunResult) -> bool:
    """The firmware stopped through semihosting with a reason other than an application
    exit (abort(), a runtime error): the run's message names it."""
    stop = machine.semihosting.last_exit if result.reason == StopReason.EXIT else None
    return stop is not None and not stop.normal


def to_json(machine: Machine, result: RunResult, firmware: str) -> dict[str, Any]:
    return {
        "schema": JSON_SCHEMA,
        "firmware": firmware,
        "config": machine.config.source,
        "chip": machine.config.chip,
        "clock_hz": result.clock_hz,
        "reason": result.reason.value,
        "message": result.message,
        "exit_code": exit_code_for(result),
        "firmware_exit_code": result.exit_code,
        "instructions": result.instructions,
        "cycles": result.cycles,
        "modeled_seconds": result.modeled_seconds,
        "sleep_cycles": result.sleep_cycles,
        "wall_seconds": result.wall_seconds,
        "mips": result.mips,
        "exceptions": dict(sorted(machine.exceptions_taken.items())),
        "peripherals": {name: dev.stats() for name, dev in machine.peripherals.items() if dev.stats()},
        "fault": result.fault.to_json() if result.fault else None,
        "lockup": result.lockup.to_json() if result.lockup else None,
    }


def _fmt_time(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.6f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.6f} ms"
    return f"{seconds * 1e6:.3f} us"


def print_summary(console: Console, machine: Machine, result: RunResult, firmware: str) -> None:
    table = Table(show_header=False, box=None, padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    if abnormal_exit(machine, result):
        outcome = f"[red]{escape(result.message)}[/red]"
    elif result.reason == StopReason.EXIT:
        outcome = f"exit code {result.exit_code}"
    else:
        outcome = f"[red]{escape(result.message or result.reason.value)}[/red]"
    hz = result.clock_hz
    table.add_row("firmware", firmware)
    table.add_row("chip", f"{machine.config.chip} ({machine.config.core.type} at {hz / 1e6:g} MHz), {machine.config.source}")
    table.add_row("result", outcome)
    table.add_row("instructions", f"{result.instructions:,}")
    table.add_row("cycles", f"{result.cycles:,}")
    table.add_row("modeled time", _fmt_time(result.modeled_seconds))
    if result.sleep_cycles:
        share = 100 * result.sleep_cycles / max(result.cycles, 1)
        table.add_row("asleep (WFI)", f"{result.sleep_cycles:,} cycles ({share:.1f}%)")
    if machine.exceptions_taken:
        table.add_row("exceptions", ", ".join(f"{k} x{v}" for k, v in sorted(machine.exceptions_taken.items())))
    for dev in machine.peripherals.values():
        for label, text in dev.summary_lines():
            table.add_row(label, escape(text))
    table.add_row("wall time", f"{result.wall_seconds:.3f} s")
    table.add_row("emulated MIPS", f"{result.mips:.1f}")
    console.print(table)
    if result.lockup is not None:
        console.print("[red bold]Core locked up[/red bold] (a fault while in HardFault or NMI):")
        print_fault(console, result.lockup)
        if result.fault is not None and result.fault is not result.lockup:
            console.print("[bold]The fault that entered HardFault first:[/bold]")
            print_fault(console, result.fault)
    elif result.fault is not None:
        console.print("[yellow]The firmware took a HardFault during the run:[/yellow]")
        print_fault(console, result.fault)


def print_fault(console: Console, fault: Fault) -> None:
    console.print(f"  cause: {escape(fault.cause)}", highlight=False)
    console.print(f"  at:    0x{fault.pc:08x} {escape(fault.where)}: {escape(fault.instruction)}  (mode: {fault.exception})",
                  highlight=False)
    regs = fault.registers
    names = [f"r{i}" for i in range(13)] + ["sp", "lr", "pc", "xpsr", "primask", "control"]
    cells = [f"{n:>7}=0x{regs[n]:08x}" for n in names if n in regs]
    for i in range(0, len(cells), 4):
        console.print("  " + " ".join(cells[i:i + 4]), highlight=False)
    if fault.recent_blocks:
        console.print("  last blocks (newest first): " + ", ".join(fault.recent_blocks), highlight=False)
