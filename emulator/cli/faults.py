"""``pkasim faults FW.elf --model M --oracle O [--window W] ...``: a fault-injection
campaign on the cycle-exact machine, the PKA included (docs/faults.md).

Runs the firmware once without a fault (the golden run), lists the faults of the
models in the window, runs each one (or a sample, or pairs with ``--order 2``) from the
nearest snapshot, in this process, on ``--jobs`` local processes or a Dask cluster,
and classifies it: no-effect, detected, corrupted, exploitable, crash, hang (or
oracle-error). Results stream to a SQLite database, so the same command resumes an
interrupted campaign; ``--json`` and ``--export`` write them out; ``--replay ID``
opens one fault in the debugger, stopped just after the injection.

Exit 0, or 1 when a fault is exploitable (``--fail-on``), 130 after Ctrl-C; bad input
64/65/66 with one line (README's table).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from pkasim.base.errors import InputMissingError, LoadError, OutputError, UsageError
from pkasim.chip.config import load_config
from pkasim.chip.loader import load_image
from pkasim.cli.argtypes import whole_number
from pkasim.cli.common import DEFAULT_BUDGET_SECONDS, add_config_option, parse_int, read_file, symbol_file
from pkasim.cli.streams import Guarded

EXIT_FAILED = 1
EXIT_INTERRUPTED = 130
FLUSH_ROWS = 256  # rows written to the database at a time (in-process runs)
FLUSH_SECONDS = 1.0


def _count(text: str) -> int:
    return whole_number(text, 1, None, "must be at least 1, got {value}")


def _factor(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text[:40]!r}") from None
    if not 1.0 <= value <= 1000.0:
        raise argparse.ArgumentTypeError(f"expected 1 to 1000 times the golden run, got {value}")
    return value


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("faults", help="fault-injection campaign: skip, bit flips, PKA results; outcomes per fault")
    p.add_argument("firmware", nargs="?", help="the ELF image (not with --replay)")
    p.add_argument("--model", "-m", action="append", default=[], metavar="M",
                   help="fault model (repeatable): skip, skip:K, instr-flip, reg-flip, reg-zero, reg-ones, flag-flip, "
                        "load-flip, pka-result[:flip|zero|random], pka-skip, none")
    p.add_argument("--window", "-w", metavar="W", default=None,
                   help="where: FUNCTION or FUNCTION#K (its K-th call), cycles:A-B, FILE:L1-L2 (default: the whole run)")
    p.add_argument("--oracle", "-o", action="append", default=[], metavar="O",
                   help="exploitable when: exit=N, stdout=TEXT, rsa-crt-bellcore[:key=S,msg=S,sig=S], "
                        "MODULE:FUNCTION or FILE.py:FUNCTION (repeatable: any of them)")
    p.add_argument("--detected", action="append", default=[], metavar="D",
                   help="the countermeasure fired when: exit=N or symbol=NAME (repeatable)")
    p.add_argument("--sample", type=_count, metavar="N", help="run N faults drawn at random from the space")
    p.add_argument("--seed", type=int, default=0, help="seed of --sample and of pka-result:random words (default 0)")
    p.add_argument("--order", type=int, default=1, choices=(1, 2), help="1: single faults (default); 2: pairs")
    p.add_argument("--jobs", "-j", type=_count, default=1, metavar="J",
                   help="local worker processes (default 1: in this process)")
    p.add_argument("--scheduler", metavar="ADDR", help="run on the Dask cluster of this scheduler (tcp://host:8786)")
    p.add_argument("--db", metavar="FILE", help="campaign database (SQLite; default ~/.cache/pkasim/faults.sqlite, "
                                                "or $PKASIM_FAULTS_DB)")
    p.add_argument("--json", metavar="FILE", help="write the results (schema pkasim.faults/1; '-' for stdout)")
    p.add_argument("--export", metavar="FILE", help="write the fault rows as .parquet or .csv")
    p.add_argument("--fail-on", choices=("exploitable", "corrupted", "never"), default="exploitable",
                   help="exit 1 when a fault is exploitable (default), exploitable or corrupted, or never")
    p.add_argument("--budget", type=_factor, default=3.0, metavar="X",
                   help="a faulted run longer than X times the golden run is a hang (default 3)")
    add_config_option(p)
    p.add_argument("--load", metavar="SYMBOL=FILE", type=symbol_file, action="append", default=[],
                   help="before reset, fill the object SYMBOL names with the bytes of FILE (repeatable)")
    p.add_argument("--max-cycles", type=parse_int, default=None,
                   help=f"budget of the golden run (default {DEFAULT_BUDGET_SECONDS} modeled seconds)")
    p.add_argument("--top", type=_count, default=10, help="hotspot lines shown (default 10)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar and no tables")
    r = p.add_argument_group("replay")
    r.add_argument("--replay", type=int, metavar="ID", help="open fault ID of the database in the debugger, stopped "
                                                           "just after the injection")
    r.add_argument("--commands", metavar="FILE", help="with --replay: scripted debugger commands ('-': stdin)")
    r.add_argument("--gdbserver", action="store_true", help="with --replay: serve it to gdb instead")
    r.add_argument("--port", type=int, default=3333, help="with --gdbserver (default %(default)s)")
    r.add_argument("--tarmac", metavar="DIR", help="with --replay: write golden.tarmac and fault-ID.tarmac from the "
                                                  "injection on, then exit")


def default_db() -> Path:
    env = os.environ.get("PKASIM_FAULTS_DB")
    if env:
        return Path(env)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "pkasim" / "faults.sqlite"


def main(args: argparse.Namespace, console: Console) -> int:
    if args.replay is not None:
        return _replay(args, console)
    return _campaign(args, console)


# ---------------------------------------------------------------------- the campaign

def _setup(args: argparse.Namespace):
    from pkasim.analysis.faults import engine, models, oracles, windows

    if not args.firmware:
        raise UsageError("faults: give the FIRMWARE.elf (or --replay ID)")
    if not args.model:
        raise UsageError("faults: give at least one --model")
    if not args.oracle:
        raise UsageError("faults: give at least one --oracle (what an attack that worked looks like)")
    if args.jobs > 1 and args.scheduler:
        raise UsageError("--jobs is for local processes; a Dask cluster (--scheduler) has its own workers")
    for flag in ("commands", "tarmac"):
        if getattr(args, flag):
            raise UsageError(f"--{flag} goes with --replay")
    models.parse_models(args.model)
    windows.parse_window(args.window)
    for spec in args.oracle:
        oracles.make_oracle(spec)
    oracles.parse_detected(args.detected)
    elf = read_file(args.firmware, 64 << 20, "an ELF of at most 64 MiB", streams=False)  # read again by path
    config = load_config(args.config)
    image = load_image(args.firmware, config)
    loads = []
    for symbol, path in args.load:
        _, room, _ = image.extent(symbol, config)
        loads.append((symbol, read_file(path, room, f"the size of '{symbol}'")))
    budget = args.max_cycles if args.max_cycles is not None else DEFAULT_BUDGET_SECONDS * config.core.clock_hz
    setup = engine.Setup(os.path.abspath(args.firmware), elf, config, window=args.window or "all",
                         models=models.parse_models(args.model), oracles=tuple(args.oracle),
                         detected=tuple(args.detected), loads=tuple(loads), budget_factor=args.budget,
                         max_cycles=budget or None, seed=args.seed)
    return setup


def describe_setup(setup: Any) -> dict[str, Any]:
    """What a replay needs to rebuild a setup (the ELF and chip by path and hash)."""
    return {"elf": setup.elf_path, "elf_sha256": setup.elf_sha256, "config": os.path.abspath(setup.config.source),
            "chip_sha256": setup.chip_sha256, "loads": [[s, d.hex()] for s, d in setup.loads],
            "argv": list(setup.argv), "oracles": list(setup.oracles), "detected": list(setup.detected),
            "budget_factor": setup.budget_factor, "max_cycles": setup.max_cycles, "seed": setup.seed,
            "cwd": setup.cwd}


def _campaign(args: argparse.Namespace, console: Console) -> int:
    from pkasim.analysis.faults import campaign as cp
    from pkasim.analysis.faults.db import CampaignDB

    setup = _setup(args)
    say = (lambda text: None) if args.quiet else (lambda text: console.print(text, highlight=False, soft_wrap=True, markup=False))
    t0 = time.perf_counter()
    golden, space, _ = cp.prepared(setup)
    plan = cp.plan(len(space), args.order, args.sample, args.seed)
    g = golden
    say(f"golden run: exit {g.result.exit_code}, {g.result.cycles:,} cycles; window {setup.window}: "
        f"{len(g.ns):,} instructions, {len(g.ops):,} PKA operations, {len(g.snapshots)} snapshots "
        f"({time.perf_counter() - t0:.2f} s)")
    per_model = ", ".join(f"{m} {n:,}" for m, n in space.by_model().items())
    if args.order == 2:
        console.print(f"order 2: {len(space):,} single faults ({per_model}) make {plan.size:,} pairs"
                      + (f"; {plan.count():,} sampled" if args.sample else ""), highlight=False, markup=False)
    else:
        say(f"fault space: {len(space):,} ({per_model})" + (f"; {plan.count():,} sampled" if args.sample else ""))
    db = CampaignDB(args.db or default_db())
    try:
        db.add_setup(setup.setup_key, describe_setup(setup))
        stored = db.done(setup.setup_key)
        selection: list[str] = []
        todo: list[int] = []
        for i in plan.indices():
            key = cp.key_of(space, args.order, i)
            selection.append(key)
            if key not in stored:
                todo.append(i)
        stored.clear()
        if len(todo) < len(selection):
            say(f"{len(selection) - len(todo):,} of {len(selection):,} faults already in {db.path}")
        interrupted = False
        if todo:
            interrupted = _run(args, console, setup, todo, db)
        summary = cp.Summary()
        rows = _rows_with(db, setup.setup_key, selection, summary)
        written = 0
        if args.json:
            _write_json(args.json, setup, golden, space, plan, summary, rows, args)
            rows = _rows_with(db, setup.setup_key, selection, None)
        else:
            for _ in rows:
                pass
        if args.export:
            from pkasim.analysis.faults.db import export

            written = export(_rows_with(db, setup.setup_key, selection, None), args.export)
    finally:
        db.close()
    if not args.quiet:
        _print(console, setup, summary, args, golden)
        if args.export:
            console.print(f"written: {args.export} ({written:,} rows)")
    if interrupted:
        console.print(f"[yellow]interrupted: {sum(summary.outcomes.values()):,} of {len(selection):,} faults done "
                      f"(kept in {args.db or default_db()}); run the same command again to finish[/yellow]")
        return EXIT_INTERRUPTED
    bad = summary.outcomes["exploitable"]
    if args.fail_on == "corrupted":
        bad += summary.outcomes["corrupted"]
    return EXIT_FAILED if args.fail_on != "never" and bad else 0


def _rows_with(db: Any, setup_key: str, keys: list[str], summary: Any):
    for row in db.rows(setup_key, keys):
        if summary is not None:
            summary.add(row)
        yield row


def _progress(args: argparse.Namespace, console: Console) -> Progress:
    return Progress(TextColumn("[bold]faults[/bold]"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                    console=console, transient=True, disable=args.quiet or not console.is_terminal)


def _run(args: argparse.Namespace, console: Console, setup: Any, todo: list[int], db: Any) -> bool:
    """Run the faults not yet stored; True when interrupted (Ctrl-C)."""
    from pkasim.analysis.faults import campaign as cp

    start = time.perf_counter()
    with _progress(args, console) as bar:
        task = bar.add_task("faults", total=len(todo), rate="")
        done = [0]

        def advance(n: int) -> None:
            done[0] += n
            rate = done[0] / max(1e-9, time.perf_counter() - start)
            bar.update(task, advance=n, rate=f"{rate:,.0f} faults/s")

        if args.jobs == 1 and not args.scheduler:
            pending: list[dict] = []
            last = [time.perf_counter()]

            def each(row: dict) -> None:
                pending.append(row)
                now = time.perf_counter()
                if len(pending) >= FLUSH_ROWS or now - last[0] > FLUSH_SECONDS:
                    db.put(setup.setup_key, pending)
                    advance(len(pending))
                    pending.clear()
                    last[0] = now

            try:
                cp.run_indices(setup, args.order, todo, each)
            except KeyboardInterrupt:
                return True
            finally:
                if pending:
                    db.put(setup.setup_key, pending)
            return False
        from pkasim.sweep.engines import DaskEngine, LocalEngine

        engine = DaskEngine(args.scheduler) if args.scheduler else LocalEngine(args.jobs)
        errors: list[str] = []

        def finished(tid: str, rows: list[dict] | None, error: str | None) -> None:
            if rows is not None:
                db.put(setup.setup_key, rows)
                advance(len(rows))
            else:
                errors.append(error or "failed")

        try:
            tasks = cp.chunks(setup, args.order, todo, args.jobs if not args.scheduler else 8)
            if args.scheduler:
                engine.run(tasks, finished, call=cp.run_chunk, prefix="pkasim-faults")
            else:
                engine.run(tasks, finished, call=cp.run_chunk, preload=("pkasim.analysis.faults.campaign",))
        except KeyboardInterrupt:
            return True
        finally:
            if args.scheduler:
                engine.close()
        if errors:
            from pkasim.analysis.faults.engine import ReplayError

            raise ReplayError(f"{len(errors)} chunk(s) of faults failed in their worker: {errors[0]}")
    return False


def _write_json(path: str, setup: Any, golden: Any, space: Any, plan: Any, summary: Any, rows: Any,
                args: argparse.Namespace) -> None:
    """The results as pkasim.faults/1, the fault list streamed (memory stays flat)."""
    head = {
        "schema": "pkasim.faults/1", "firmware": args.firmware, "chip": setup.config.chip,
        "elf_sha256": setup.elf_sha256, "chip_sha256": setup.chip_sha256, "window": setup.window,
        "models": list(setup.models), "oracles": list(setup.oracles), "detected": list(setup.detected),
        "order": plan.order, "space": plan.size, "sample": plan.sample, "seed": plan.seed,
        "golden": {"exit_code": golden.result.exit_code, "cycles": golden.result.cycles,
                   "instructions": golden.result.instructions},
    }
    keep = ("id", "key", "model", "cycle", "pc", "function", "file", "line", "instruction", "detail", "outcome",
            "exit_code", "reason", "cycles", "note", "n", "op", "second", "second_reached")
    try:
        out = sys.stdout if path == "-" else open(path, "w")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise OutputError(f"{path}: cannot write the JSON: {exc.strerror or exc}") from None
    try:
        w = Guarded(out, "stdout" if path == "-" else path)
        text = json.dumps(head, indent=2)[:-2]
        w.write(text + ',\n  "faults": [')
        first = True
        for row in rows:
            doc = {k: row.get(k) for k in keep if row.get(k) is not None and row.get(k) != ""}
            doc.setdefault("outcome", row.get("outcome"))
            if "second_reached" in doc:
                doc["second_reached"] = bool(doc["second_reached"])
            w.write(("\n    " if first else ",\n    ") + json.dumps(doc))
            first = False
        w.write('\n  ],\n  "summary": ' + json.dumps(summary.as_dict()) + "\n}\n")
        w.flush()
    finally:
        if out is not sys.stdout:
            out.close()


def _print(console: Console, setup: Any, summary: Any, args: argparse.Namespace, golden: Any) -> None:
    from pkasim.analysis.faults.oracles import OUTCOMES

    shown = [o for o in OUTCOMES if o != "oracle-error" or summary.outcomes[o]]
    t = Table(title="outcomes per model", title_justify="left", show_edge=False)
    t.add_column("model")
    for o in shown:
        t.add_column(o, justify="right", style="bold red" if o == "exploitable" else None)
    t.add_column("total", justify="right")
    for model, counts in sorted(summary.by_model.items()):
        t.add_row(escape(model), *[f"{counts[o]:,}" for o in shown], f"{sum(counts.values()):,}")
    if len(summary.by_model) > 1:
        t.add_row("all", *[f"{summary.outcomes[o]:,}" for o in shown], f"{sum(summary.outcomes.values()):,}")
    console.print(t)
    hot = summary.hotspots("exploitable", args.top)
    if hot:
        h = Table(title="where the exploitable faults are", title_justify="left", show_edge=False)
        for name, justify in (("exploitable", "right"), ("of", "right"), ("source", "left"), ("function", "left"),
                              ("instruction", "left")):
            h.add_column(name, justify=justify)
        for e in hot:
            src = f"{e['file']}:{e['line']}" if e["file"] else "(no line info)"
            total = sum(e["outcomes"].values())
            h.add_row(f"{e['outcomes']['exploitable']:,}", f"{total:,}", escape(src), escape(e["function"] or ""),
                      escape(f"{e['pc']:08x}  {e['instruction']}" if e["pc"] is not None else e["instruction"]))
        console.print(h)
    if summary.unreached:
        console.print(f"{summary.unreached:,} pair(s) whose second fault was never reached (the first changed the path)")
    n = summary.outcomes["exploitable"]
    console.print(("[bold red]" if n else "[green]") + f"{n:,} exploitable fault(s)" + ("[/bold red]" if n else "[/green]"))


# ---------------------------------------------------------------------- replay

def _replay(args: argparse.Namespace, console: Console) -> int:
    from pkasim.analysis.faults import campaign as cp
    from pkasim.analysis.faults.db import CampaignDB
    from pkasim.analysis.faults.engine import Golden, Injector, Setup

    if args.firmware:
        raise UsageError("--replay ID takes the firmware from the database: give no FIRMWARE")
    path = Path(args.db) if args.db else default_db()
    if not path.exists():
        raise InputMissingError(f"{path}: no campaign database")
    db = CampaignDB(path)
    try:
        row, setup_key = db.fault(args.replay)
        desc = db.setup(setup_key)
    finally:
        db.close()
    elf = read_file(desc["elf"], 64 << 20, "an ELF of at most 64 MiB", streams=False)
    config = load_config(desc["config"])
    injs = cp.parse_fault(row["key"])
    window = f"cycles:{row['cycle']}-{row['cycle']}" if len(injs) == 1 else "all"
    setup = Setup(desc["elf"], elf, config, window=window, models=tuple(dict.fromkeys(i.model for i in injs)),
                  oracles=tuple(desc["oracles"]), detected=tuple(desc["detected"]),
                  loads=tuple((s, bytes.fromhex(d)) for s, d in desc["loads"]), argv=tuple(desc["argv"]),
                  budget_factor=desc["budget_factor"], max_cycles=desc["max_cycles"], seed=desc["seed"],
                  cwd=desc.get("cwd") or os.getcwd())
    if setup.elf_sha256 != desc["elf_sha256"]:
        raise LoadError(f"{desc['elf']}: the ELF changed since the campaign (its SHA-256 differs): rebuild the same "
                        "image or run the campaign again")
    if setup.chip_sha256 != desc["chip_sha256"]:
        raise LoadError(f"{desc['config']}: the chip description changed since the campaign")
    with cp.quiet_guest():
        golden = Golden(setup)
    injector = Injector(golden)
    what = f"fault {args.replay}: {row['key']} ({row['model']} at {row['function'] or hex(row['pc'])}"
    what += f", {row['file']}:{row['line']}" if row["file"] else ""
    what += f"), outcome {row['outcome']}"
    if args.tarmac:
        return _replay_tarmac(args, console, golden, injector, injs, what)
    injector.apply(injs, stop_at_pka=True)
    injector.detach()
    m = golden.machine
    console.print(f"{what}; stopped just after the injection at {m.describe(m.pc)}, cycle {m.cycles:,}"
                  + ("; the patched instruction stays patched in this session" if injs[0].model == "instr-flip" else ""),
                  highlight=False, soft_wrap=True, markup=False)
    if args.gdbserver:
        return _replay_gdb(args, console, m)
    from pkasim.cli.debug import make_debugger, run_script

    dbg_args = argparse.Namespace(snapshot_interval=None, no_reverse=False)
    scripted = args.commands is not None or not sys.stdin.isatty() or not sys.stdout.isatty()
    if scripted:
        m.semihosting.streams = {1: Guarded(sys.stdout.buffer, "stdout"), 2: Guarded(sys.stderr.buffer, "stderr")}
        debugger = make_debugger(m, dbg_args)
        if args.commands in (None, "-"):
            lines = sys.stdin.read(1 << 20).splitlines()
        else:
            lines = read_file(args.commands, 1 << 20, "the command file's limit (1 MiB)").decode(
                "utf-8", errors="replace").splitlines()
        return run_script(debugger, lines, Guarded(sys.stdout, "stdout"))
    from pkasim.debugger.tui import run_tui

    def build(sink: Any) -> Any:
        m.semihosting.streams = {1: sink, 2: sink}
        return make_debugger(m, dbg_args)

    return run_tui(build, f"{desc['elf']} fault {args.replay}", console)


def _replay_gdb(args: argparse.Namespace, console: Console, m: Any) -> int:
    from pkasim.cli.gdbserver import ListenError
    from pkasim.debugger.gdbserver.server import Target, listen, serve

    try:
        srv = listen("127.0.0.1", args.port)
    except OSError as exc:
        raise ListenError(f"cannot listen on 127.0.0.1:{args.port}: {exc.strerror or exc}") from None
    m.semihosting.streams = {1: Guarded(sys.stdout.buffer, "stdout"), 2: Guarded(sys.stderr.buffer, "stderr")}
    try:
        target = Target(m, interval_cycles=1_000_000)
        host, port = srv.getsockname()[:2]
        console.print(f"pkasim gdbserver: listening on {host}:{port}", highlight=False, markup=False)
        serve(srv, target, lambda text: console.print(f"pkasim gdbserver: {text}", highlight=False, markup=False))
    finally:
        srv.close()
    return 0


def _replay_tarmac(args: argparse.Namespace, console: Console, golden: Any, injector: Any, injs: tuple,
                   what: str) -> int:
    from pkasim.analysis.faults import campaign as cp
    from pkasim.analysis.faults.models import Injection
    from pkasim.analysis.trace.tarmac import TarmacWriter

    out = Path(args.tarmac)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{out}: cannot create the directory: {exc.strerror or exc}") from None
    m = golden.machine
    paths = []
    with cp.quiet_guest():
        for name, faulty in (("golden", False), (f"fault-{args.replay}", True)):
            injector.apply(injs if faulty else (Injection("none", n=_first_n(injector, injs)),))
            path = out / f"{name}.tarmac"
            writer = TarmacWriter(m, path, 0, 0xFFFFFFFF)
            try:
                injector._finish(compare=False)
            finally:
                try:
                    writer.close()
                except OSError as exc:
                    raise OutputError(f"{path}: cannot write: {exc.strerror or exc}") from None
                injector._cleanup()
            paths.append(path)
    console.print(f"{what}; traces from the injection on: {paths[0]} and {paths[1]}", highlight=False, soft_wrap=True,
                  markup=False)
    return 0


def _first_n(injector: Any, injs: tuple) -> int:
    """The instruction where the earliest fault is applied (a golden trace starts there)."""
    import bisect

    g = injector.g
    cycle = min(injector.target(i)[2] for i in injs)
    return g.ns[max(0, bisect.bisect_right(g.cycles, cycle) - 1)]

