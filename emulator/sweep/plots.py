"""The sweep's plots (matplotlib, Agg backend, as ``bench --plot``):

* ops/s against the width axis (``plot.x``), one line per key size, algorithm and
  every other axis, log scale, the goal as a dashed line;
* RSA-4096 time over RSA-2048 time against the width, one line per curve.

Each point of a line is the mean over the sweep's keys and messages (results.groups).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from pkasim.base.errors import OutputError
from pkasim.base.extras import need
from pkasim.sweep.results import group_columns, groups
from pkasim.sweep.spec import Sweep


def _curves(sweep: Sweep, rows: list[dict[str, Any]], drop: tuple[str, ...]) -> dict[tuple, list[dict[str, Any]]]:
    cols = [c for c in group_columns(sweep, rows) if c not in (sweep.plot_x, *drop)]
    varying = [c for c in cols if len({r[c] for r in rows}) > 1 or c in ("key_bits", "algorithm")]
    out: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for g in groups(sweep, rows):
        out[tuple((c, g[c]) for c in varying)].append(g)
    for members in out.values():
        members.sort(key=lambda g: g[sweep.plot_x])
    return out


def _name(key: tuple) -> str:
    return ", ".join(f"RSA-{v}" if c == "key_bits" else (str(v) if c in ("algorithm", "firmware") else f"{c} {v}")
                     for c, v in key if not (c == "key_bits" and v == 256))  # a curve job: its algorithm names it


def plot(sweep: Sweep, rows: list[dict[str, Any]], out: Path) -> list[Path]:
    """ops_per_s.png and, with both key sizes, ratio_4096_2048.png in ``out``."""
    if not sweep.plot_x or not any(r["verified"] for r in rows):
        return []
    matplotlib = need("matplotlib", "sweep", "pkasim sweep's plots")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    written = []
    fig, ax = plt.subplots(figsize=(11, 5.5))
    for i, (key, members) in enumerate(sorted(_curves(sweep, rows, ()).items(), key=lambda kv: str(kv[0]))):
        native = dict(key).get("algorithm") == "native"  # drawn hollow and dotted: it may lie on xRSA's line
        ax.plot([g[sweep.plot_x] for g in members], [g["ops_per_s"] for g in members],
                marker="s" if native else "o", markersize=9 if native else 5, fillstyle="none" if native else "full",
                color=f"C{i}", linestyle=":" if native else ("--" if dict(key).get("key_bits") == 2048 else "-"),
                label=_name(key))
    if sweep.goal:
        ax.axhline(sweep.goal["ops_per_s"], color="0.3", linestyle=":", linewidth=1)
        ax.annotate(f"goal {sweep.goal['ops_per_s']:g} ops/s", (1, sweep.goal["ops_per_s"]),
                    xycoords=("axes fraction", "data"), xytext=(-4, 3), textcoords="offset points",
                    ha="right", fontsize="small", color="0.3")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    xs = sorted({r[sweep.plot_x] for r in rows})
    ax.set_xticks(xs)
    ax.set_xticklabels([str(x) for x in xs])
    ax.set_xlabel(sweep.plot_x)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}" if str(v)[0] in "25" else ""))
    ax.set_ylabel("private-key operations per second (log)")
    ax.set_title(f"{sweep.name}: throughput against {sweep.plot_x}")
    ax.grid(which="both", alpha=0.3)
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    fig.tight_layout()
    written.append(_save(fig, out / "ops_per_s.png"))
    plt.close(fig)

    curves = _curves(sweep, rows, ("key_bits", "algorithm"))
    ratios = {}
    for key, members in curves.items():
        by_x: dict[Any, dict[int, float]] = defaultdict(dict)
        for g in members:
            by_x[g[sweep.plot_x]][g["key_bits"]] = g["cycles"]
        pts = [(x, c[4096] / c[2048]) for x, c in sorted(by_x.items()) if 4096 in c and 2048 in c]
        if pts:
            ratios[key] = pts
    if ratios:
        fig, ax = plt.subplots(figsize=(8, 4.5))
        for i, (key, pts) in enumerate(sorted(ratios.items(), key=lambda kv: str(kv[0]))):
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", color=f"C{i}", label=_name(key) or "all")
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs)
        ax.set_xticklabels([str(x) for x in xs])
        ax.set_xlabel(sweep.plot_x)
        ax.set_ylabel("RSA-4096 time / RSA-2048 time")
        ax.set_title(f"{sweep.name}: cost of RSA-4096 over RSA-2048")
        ax.grid(which="both", alpha=0.3)
        ax.legend(fontsize="small")
        fig.tight_layout()
        written.append(_save(fig, out / "ratio_4096_2048.png"))
        plt.close(fig)
    return written


def _save(fig: Any, path: Path) -> Path:
    try:
        fig.savefig(path, dpi=110)
    except OSError as exc:
        raise OutputError(f"{path}: cannot write the plot: {exc.strerror or exc}") from None
    return path
