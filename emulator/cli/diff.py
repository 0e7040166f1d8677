"""``pkasim diff A.json B.json``: two profiles side by side, per function.

A and B are ``pkasim profile --json`` outputs: two firmware builds, two chips, the
paper vs the optimized xRSA. Rows are matched by function name and sorted by how
much their exclusive cycles moved; each shows A, B, the delta and the change in %.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console
from rich.table import Table

from pkasim.analysis.profiler import PROFILE_SCHEMA
from pkasim.base.errors import InputMissingError, LoadError
from pkasim.base.limits import PROFILE_MAX_BYTES
from pkasim.chip.config import read_bounded
from pkasim.cli.common import write_text

METRICS = ("exclusive_cycles", "inclusive_cycles", "calls", "instructions", "wait_cycles", "pka_busy_cycles")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("diff", help="compare two profiles (pkasim profile --json) function by function")
    p.add_argument("a", metavar="A.json", help="the baseline profile")
    p.add_argument("b", metavar="B.json", help="the profile to compare with it")
    p.add_argument("--top", metavar="N", type=int, default=30, help="table rows (default %(default)s; 0 = all)")
    p.add_argument("--json", metavar="FILE", help="write the comparison as JSON ('-' for stdout)")


def read_profile(path: str) -> dict[str, Any]:
    """A profile JSON, checked enough to compare; one clear line if it is not one."""
    try:
        data = read_bounded(path, PROFILE_MAX_BYTES)
    except FileNotFoundError:
        raise InputMissingError(f"{path}: no such file") from None
    except OSError as exc:
        raise InputMissingError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > PROFILE_MAX_BYTES:
        raise LoadError(f"{path}: larger than {PROFILE_MAX_BYTES >> 20} MiB; not a profile")
    try:
        doc = json.loads(data.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise LoadError(f"{path}: not JSON: {exc}") from None
    except RecursionError:
        raise LoadError(f"{path}: not a profile: JSON nested too deep") from None
    if not isinstance(doc, dict) or doc.get("schema") != PROFILE_SCHEMA or not isinstance(doc.get("functions"), list):
        raise LoadError(f"{path}: not a pkasim profile (expected \"schema\": \"{PROFILE_SCHEMA}\" and a "
                        "\"functions\" list; make one with 'pkasim profile FW.elf --json FILE')")
    for i, row in enumerate(doc["functions"]):
        if not isinstance(row, dict) or not isinstance(row.get("name"), str) or \
                not all(isinstance(row.get(k, 0), int) for k in METRICS):
            raise LoadError(f"{path}: functions[{i}] is not a profile row")
    return doc


def compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Rows for every function in either profile, biggest exclusive change first."""
    ra = {r["name"]: r for r in a["functions"]}
    rb = {r["name"]: r for r in b["functions"]}
    rows = []
    for name in sorted(set(ra) | set(rb)):
        row: dict[str, Any] = {"name": name}
        for key in METRICS:
            va, vb = ra.get(name, {}).get(key, 0), rb.get(name, {}).get(key, 0)
            row[key] = {"a": va, "b": vb, "delta": vb - va, "percent": _percent(va, vb)}
        row["only_in"] = "a" if name not in rb else "b" if name not in ra else None
        rows.append(row)
    rows.sort(key=lambda r: (-abs(r["exclusive_cycles"]["delta"]), r["name"]))
    total = {"a": a.get("cycles", 0), "b": b.get("cycles", 0)}
    total["delta"] = total["b"] - total["a"]
    total["percent"] = _percent(total["a"], total["b"])
    return {"schema": "pkasim.diff/1", "a": a.get("firmware"), "b": b.get("firmware"),
            "a_chip": a.get("chip"), "b_chip": b.get("chip"), "cycles": total, "functions": rows}


def _percent(a: int, b: int) -> float | None:
    return None if a == 0 else round(100 * (b - a) / a, 3)


def _fmt_pct(p: float | None, delta: int) -> str:
    if p is None:
        return "new" if delta else ""
    return f"{p:+.1f}%"


def _style(delta: int) -> str:
    return "red" if delta > 0 else "green" if delta < 0 else ""


def print_diff(console: Console, result: dict[str, Any], top: int, a_label: str, b_label: str) -> None:
    table = Table(title=f"A = {a_label} ({result['a_chip']}), B = {b_label} ({result['b_chip']})",
                  title_justify="left")
    for name, justify in (("function", "left"), ("A exclusive", "right"), ("B exclusive", "right"),
                          ("delta", "right"), ("%", "right"), ("A inclusive", "right"), ("B inclusive", "right"),
                          ("delta", "right"), ("calls A -> B", "right")):
        table.add_column(name, justify=justify)
    rows = result["functions"]
    shown = rows if top <= 0 else rows[:top]
    for r in shown:
        ex, inc, calls = r["exclusive_cycles"], r["inclusive_cycles"], r["calls"]
        style = _style(ex["delta"])
        table.add_row(r["name"], f"{ex['a']:,}", f"{ex['b']:,}", f"[{style}]{ex['delta']:+,}[/]" if style else "0",
                      _fmt_pct(ex["percent"], ex["delta"]), f"{inc['a']:,}", f"{inc['b']:,}", f"{inc['delta']:+,}",
                      f"{calls['a']:,} -> {calls['b']:,}" if calls["delta"] else f"{calls['a']:,}")
    if len(shown) < len(rows):
        table.add_row(f"({len(rows) - len(shown)} more, unchanged or smaller)", "", "", "", "", "", "", "", "")
    t = result["cycles"]
    table.add_section()
    table.add_row("total", f"{t['a']:,}", f"{t['b']:,}", f"{t['delta']:+,}", _fmt_pct(t["percent"], t["delta"]),
                  "", "", "", "")
    console.print(table)


def main(args: argparse.Namespace, console: Console) -> int:
    if not console.is_terminal:
        console = Console(highlight=False, width=160)
    else:
        console = Console(highlight=False)
    a, b = read_profile(args.a), read_profile(args.b)
    result = compare(a, b)
    if args.json:
        write_text(args.json, json.dumps(result, indent=2) + "\n", "the diff JSON")
        if args.json == "-":
            return 0
    print_diff(console, result, args.top, args.a, args.b)
    return 0
