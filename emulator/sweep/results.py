"""A sweep's outputs: the table (Parquet and CSV through pyarrow, one row per point),
the Markdown summary, and the groups both are read by.

Only model figures go in the table (no wall time, no host data, no cache hit flag),
so two runs of a sweep, on any engine, write the same rows.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from pkasim.base.errors import OutputError
from pkasim.base.extras import need
from pkasim.sweep.spec import METRICS, Sweep

PER_POINT = ("point", "key", "message", "cache_key", "error", "verified")  # not what a group is named by


def table(rows: list[dict[str, Any]]) -> Any:
    pa = need("pyarrow", "sweep", "pkasim sweep")

    return pa.Table.from_pylist(rows)


def write_tables(rows: list[dict[str, Any]], out: Path) -> list[Path]:
    """results.parquet and results.csv in ``out``; OutputError (exit 74) if they cannot be written."""
    need("pyarrow", "sweep", "pkasim sweep")
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    t = table(rows)
    paths = [out / "results.parquet", out / "results.csv"]
    try:
        out.mkdir(parents=True, exist_ok=True)
        pq.write_table(t, paths[0])
        pacsv.write_csv(t, paths[1])
    except OSError as exc:
        raise OutputError(f"{out}: cannot write the results: {exc.strerror or exc}") from None
    return paths


def group_columns(sweep: Sweep, rows: list[dict[str, Any]]) -> list[str]:
    """The columns that name a group of points: every axis but key and message."""
    if not rows:
        return []
    metrics = set(METRICS) | {c for c in rows[0] if "." in c and c.rsplit(".", 1)[1] in
                                    ("exclusive", "inclusive", "calls")}
    return [c for c in rows[0] if c not in PER_POINT and c not in metrics]


def groups(sweep: Sweep, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each group of points (the same chip, image and key size over the sweep's keys
    and messages) with its mean cycles and what follows from them: ms and ops/s
    from the mean time, busy share over all the group's cycles."""
    cols = group_columns(sweep, rows)
    by: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r["verified"] and r.get("cycles"):
            by[tuple(r[c] for c in cols)].append(r)
    out = []
    for key, members in by.items():
        g = dict(zip(cols, key))
        cycles = sum(r["cycles"] for r in members) / len(members)
        g.update(points=len(members), cycles=cycles, min_cycles=min(r["cycles"] for r in members),
                 max_cycles=max(r["cycles"] for r in members))
        g["ms"] = cycles / g["clock_hz"] * 1e3
        g["ops_per_s"] = g["clock_hz"] / cycles
        if members[0].get("busy_share") is not None:
            g["busy_share"] = sum(r["busy_share"] * r["cycles"] for r in members) / sum(r["cycles"] for r in members)
        out.append(g)
    return out


def goal_answers(sweep: Sweep, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """For each curve (a group without the width axis) at the goal's key size: the
    narrowest width whose mean ops/s reaches the goal, or None."""
    if not sweep.goal or not sweep.plot_x:
        return []
    target, bits = sweep.goal["ops_per_s"], sweep.goal.get("key_bits")
    chosen = [g for g in groups(sweep, rows) if bits is None or g["key_bits"] == bits]
    names = [c for c in group_columns(sweep, rows) if c != sweep.plot_x
             and (c == "algorithm" or len({g[c] for g in chosen}) > 1)]  # what tells the curves apart
    curves: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for g in chosen:
        curves[tuple((c, g[c]) for c in names)].append(g)
    out = []
    for key, members in curves.items():
        members.sort(key=lambda g: g[sweep.plot_x])
        first = next((g for g in members if g["ops_per_s"] and g["ops_per_s"] >= target), None)
        best = max(members, key=lambda g: g["ops_per_s"] or 0)
        out.append({"curve": dict(key), "width": first[sweep.plot_x] if first else None,
                    "ops_per_s": first["ops_per_s"] if first else best["ops_per_s"],
                    "best_width": best[sweep.plot_x]})
    return out


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    return str(value)


def markdown(sweep: Sweep, rows: list[dict[str, Any]], counts: dict[str, int]) -> str:
    """The summary: what ran, the goal's answer, a table of the groups' means, failures."""
    checks = []
    if sweep.firmware:
        checks.append("the RSA results against m^d mod n computed with Python integers")
    if sweep.curve_jobs:
        checks.append("the ECC results against the cryptography package's")
    lines = [f"# {sweep.name}", "",
             f"Sweep file `{sweep.source}`, base chip `{sweep.chip.name}`: {counts['total']} points "
             f"({counts['computed']} computed, {counts['cached']} from the cache, {counts['failed']} failed). "
             f"Every result was checked: {' and '.join(checks)}.", ""]
    answers = goal_answers(sweep, rows)
    if answers:
        target = sweep.goal["ops_per_s"]
        bits = sweep.goal.get("key_bits")
        lines += [f"## Which {sweep.plot_x} reaches {target:g} ops/s" + (f" for RSA-{bits}" if bits else ""), ""]
        for a in answers:
            name = ", ".join(f"{k} {v}" for k, v in a["curve"].items())
            if a["width"] is None:
                lines.append(f"- {name}: none in the sweep (best {a['ops_per_s']:.3g} ops/s at "
                             f"{sweep.plot_x} = {a['best_width']})")
            else:
                lines.append(f"- {name}: **{sweep.plot_x} = {a['width']}** ({a['ops_per_s']:.3g} ops/s)")
        lines.append("")
    gs = groups(sweep, rows)
    if gs:
        cols = [c for c in gs[0] if c not in ("min_cycles", "max_cycles")]
        lines += ["## Mean over keys and messages", "",
                  "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        for g in gs:
            lines.append("| " + " | ".join("" if g.get(c) is None else _fmt(g[c]) for c in cols) + " |")
        lines.append("")
    failed = [r for r in rows if not r["verified"]]
    if failed:
        lines += ["## Failed points", ""]
        lines += [f"- point {r['point']}: {r['error']}" for r in failed]
        lines.append("")
    return "\n".join(lines)
