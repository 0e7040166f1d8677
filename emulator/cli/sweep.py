"""``pkasim sweep SWEEP.yaml [--jobs N] [--engine local|dask] [--scheduler ADDR] [--out DIR]``:
run a grid of chips, images, key sizes, keys and inputs (docs/sweep.md).

Reads the sweep file (pkasim.sweep.spec), expands and checks every chip before any
run, takes what the result cache holds, runs the rest on local processes or a Dask
cluster with a progress bar, and writes results.parquet, results.csv, summary.md and
the plots to --out. Exit 0 when every point ran and matched its reference (m^d mod n, or
cryptography's for a curve job), 1 when one did not, 130 after Ctrl-C, 143 after
SIGTERM (the finished points are kept: in the cache and in the tables).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from pkasim.base.errors import EXIT_INTERRUPTED, EXIT_TERMINATED, UsageError
from pkasim.base.extras import need
from pkasim.cli.argtypes import whole_number
from pkasim.cli.common import write_text

EXIT_FAILED = 1


def _jobs(text: str) -> int:
    return whole_number(text, 1, 1024, "expected 1..1024 worker processes, got {value}")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="run a grid of chips, images, key sizes and keys; tables, plots, summary")
    p.add_argument("sweep", metavar="SWEEP.yaml", help="the sweep file, or a bundled sweep's name "
                                                     "(`pkasim configs`: sweeps/rsa4096-10ops)")
    p.add_argument("--jobs", "-j", metavar="N", type=_jobs, default=None,
                   help="worker processes of the local engine (default: every core this process may use)")
    p.add_argument("--engine", choices=("local", "dask"), default="local",
                   help="local: a process pool here (default); dask: a Dask cluster (--scheduler)")
    p.add_argument("--scheduler", metavar="ADDR", help="the Dask scheduler's address (tcp://host:8786)")
    p.add_argument("--out", metavar="DIR", help="where the tables, plots and summary go (default: sweep-STEM/, after SWEEP.yaml)")
    p.add_argument("--cache", metavar="FILE",
                   help="the result cache (SQLite; default: ~/.cache/pkasim/sweep.sqlite, or $PKASIM_CACHE)")
    p.add_argument("--no-plots", action="store_true", help="tables and summary only")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar and no summary on the terminal")


def default_cache() -> Path:
    env = os.environ.get("PKASIM_CACHE")
    if env:
        return Path(env)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "pkasim" / "sweep.sqlite"


def main(args: argparse.Namespace, console: Console) -> int:
    from pkasim.sweep.cache import ResultCache
    from pkasim.sweep.engines import DaskEngine, LocalEngine
    from pkasim.sweep.grid import expand
    from pkasim.sweep.plots import plot
    from pkasim.sweep.results import markdown, write_tables
    from pkasim.sweep.runner import run_sweep
    from pkasim.sweep.spec import read_sweep

    if args.engine == "dask" and not args.scheduler:
        raise UsageError("--engine dask needs --scheduler ADDR (the Dask scheduler's address)")
    if args.engine == "local" and args.scheduler:
        raise UsageError("--scheduler is for --engine dask")
    if args.engine == "dask" and args.jobs:
        raise UsageError("--jobs is for the local engine; a Dask cluster has its own workers")
    need("pyarrow", "sweep", "pkasim sweep")  # the tables are written at the end: say it before the first point
    if not args.no_plots:
        need("matplotlib", "sweep", "pkasim sweep's plots (or --no-plots)")
    sweep = read_sweep(args.sweep)
    points = expand(sweep)
    out = Path(args.out) if args.out else Path(f"sweep-{Path(args.sweep).stem}")
    cache = ResultCache(args.cache or default_cache())
    engine = DaskEngine(args.scheduler) if args.engine == "dask" else LocalEngine(args.jobs)
    where = f"Dask at {args.scheduler}" if args.engine == "dask" else f"{engine.jobs} local process(es)"
    if not args.quiet:
        console.print(f"{sweep.name}: {len(points)} points on {where}; cache {cache.path}")
    try:
        with Progress(TextColumn("[bold]sweep[/bold]"), BarColumn(), MofNCompleteColumn(),
                      TextColumn("{task.fields[status]}"), TimeElapsedColumn(), TextColumn("ETA"),
                      TimeRemainingColumn(), console=console, transient=True,
                      disable=args.quiet or not console.is_terminal) as bar:
            task = bar.add_task("sweep", total=len(points), status="")
            counts = {"cached": 0, "computed": 0}

            def tick(n: int, cached: bool) -> None:
                counts["cached" if cached else "computed"] += n
                bar.update(task, advance=n, status=f"{counts['cached']} cached, {counts['computed']} run")

            run = run_sweep(sweep, points, engine, cache, tick)
    finally:
        cache.close()
        if args.engine == "dask":
            engine.close()

    summary = {"total": run.total, "computed": run.computed, "cached": run.cached, "failed": run.failed}
    if run.rows:
        written = write_tables(run.rows, out)
        text = markdown(sweep, run.rows, summary)
        write_text(str(out / "summary.md"), text + "\n", "the summary")
        written.append(out / "summary.md")
        if not args.no_plots:
            written += plot(sweep, run.rows, out)
    else:
        written = []
    if not args.quiet:
        _print(console, sweep, run, written)
    if run.interrupted:
        console.print(f"[yellow]{'terminated' if run.terminated else 'interrupted'}: {len(run.rows)} of "
                      f"{run.total} points done (kept in the cache and the tables); run the same command "
                      "again to finish[/yellow]")
        return EXIT_TERMINATED if run.terminated else EXIT_INTERRUPTED
    if run.failed:
        console.print(f"[red]{run.failed} point(s) failed:[/red] " + "; ".join(run.errors[:5]
                      or [f"point {r['point']}: {r['error']}" for r in run.rows if not r["verified"]][:5]))
        return EXIT_FAILED
    return 0


def _print(console: Console, sweep, run, written: list[Path]) -> None:
    from pkasim.sweep.results import goal_answers

    console.print(f"{run.total} points: {run.computed} computed, {run.cached} from the cache, "
                  f"{run.failed} failed")
    answers = goal_answers(sweep, run.rows)
    if answers:
        t = Table(title=f"first {sweep.plot_x} reaching {sweep.goal['ops_per_s']:g} ops/s", title_justify="left")
        t.add_column("curve")
        t.add_column(sweep.plot_x, justify="right")
        t.add_column("ops/s", justify="right")
        for a in answers:
            t.add_row(", ".join(f"{k} {v}" for k, v in a["curve"].items()),
                      "none" if a["width"] is None else str(a["width"]), f"{a['ops_per_s']:.3g}")
        console.print(t)
    for path in written:
        console.print(f"written: {path}")
