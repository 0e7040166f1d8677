"""``pkasim power FIRMWARE.elf --traces N --out FILE.npy [options]``: simulated power
traces of a window of a firmware's run (docs/power.md).

Each trace runs the firmware from reset with that trace's inputs (``--fixed``,
``--random``, ``--inputs``) written into their symbols, and records one sample per
core cycle of the window: the CPU's instruction leakage (the chip file's ``power:``
weights) plus the PKA's while it is busy, plus Gaussian noise (``--noise``). Written:
FILE.npy (float32, traces x samples), FILE.inputs.npz (each input and ``--output``
symbol's bytes per trace, ``aligned`` per trace, the window's ``cycles`` and the
address executing at each, ``pcs``), FILE.json (what was run, schema pkasim.power/1)
and, with ``--trs``, a Riscure Inspector trace set.

This module also holds what ``pkasim tvla`` shares with it: the campaign options, the
checks made before any trace, the reference run and the engine.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from pkasim.base import limits
from pkasim.base.errors import OutputError, UsageError
from pkasim.base.extras import need
from pkasim.cli.argtypes import whole_number
from pkasim.cli.common import DEFAULT_BUDGET_SECONDS, add_config_option, parse_int, write_text

SCHEMA = "pkasim.power/1"
MAX_TRACES = limits.POWER_TRACES_MAX
SYMBOL = re.compile(r"[A-Za-z_.$][A-Za-z0-9_.$]*")
MAX_HEX = limits.POWER_FIXED_MAX_BYTES


def parse_fixed(text: str) -> tuple[str, bytes]:
    """``SYMBOL=HEX`` (argparse type): the symbol and its bytes."""
    sym, sep, value = text.partition("=")
    if not sep or not SYMBOL.fullmatch(sym):
        raise argparse.ArgumentTypeError(f"expected SYMBOL=HEX, got {text[:60]!r}")
    digits = value.strip().removeprefix("0x").replace("_", "").replace(" ", "")
    if len(digits) > 2 * MAX_HEX:
        raise argparse.ArgumentTypeError(f"{sym}: at most {MAX_HEX:,} bytes")
    if not digits or len(digits) % 2 or not re.fullmatch(r"[0-9A-Fa-f]*", digits):
        raise argparse.ArgumentTypeError(f"{sym}: expected an even number of hex digits (bytes in memory order), "
                                         f"got {value[:40]!r}")
    return sym, bytes.fromhex(digits)


def parse_random(text: str) -> tuple[str, int | None]:
    """``SYMBOL`` or ``SYMBOL=bytes:N`` (argparse type)."""
    sym, sep, kind = text.partition("=")
    if not SYMBOL.fullmatch(sym):
        raise argparse.ArgumentTypeError(f"expected SYMBOL or SYMBOL=bytes:N, got {text[:60]!r}")
    if not sep:
        return sym, None
    m = re.fullmatch(r"bytes:(\d{1,9})", kind)
    if m is None or int(m.group(1)) == 0:
        raise argparse.ArgumentTypeError(f"{sym}: expected bytes:N with N > 0, got {kind[:40]!r}")
    return sym, int(m.group(1))


def _count(text: str) -> int:
    return whole_number(text, 1, MAX_TRACES, f"expected 1..{MAX_TRACES:,}, got {{value}}")


def _sigma(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text[:40]!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a standard deviation >= 0, got {text[:40]!r}")
    return value


def add_campaign_options(p: argparse.ArgumentParser) -> None:
    """What ``power`` and ``tvla`` share: the firmware, its window, its inputs, the noise,
    and where the traces run."""
    from pkasim.cli.sweep import _jobs

    p.add_argument("firmware", help="the ELF image")
    add_config_option(p)
    p.add_argument("--window", metavar="W", default="all",
                   help="the part of the run traced: all (default), a function NAME or NAME#K (its K-th call, "
                        "through its return), cycles:A-B, or FILE:L1-L2 (source lines)")
    p.add_argument("--fixed", metavar="SYMBOL=HEX", type=parse_fixed, action="append", default=[],
                   help="write these bytes (memory order) into SYMBOL before reset (repeatable)")
    p.add_argument("--random", metavar="SYMBOL[=bytes:N]", type=parse_random, action="append", default=[],
                   help="fresh random bytes in SYMBOL for every trace (repeatable)")
    p.add_argument("--inputs", metavar="MODULE:FUNCTION",
                   help="a Python function (rng, fixed) -> {symbol: bytes} that makes each trace's inputs "
                        "(MODULE a .py file or a module; it lists its symbols in INPUTS)")
    p.add_argument("--noise", metavar="SIGMA", type=_sigma, default=0.0,
                   help="Gaussian noise added to every sample, in the model's units (default 0)")
    p.add_argument("--seed", type=int, default=1, help="seed of the inputs, the noise and the groups (default 1)")
    p.add_argument("--max-cycles", type=parse_int, default=None,
                   help=f"cycles a run may take (default {DEFAULT_BUDGET_SECONDS} modeled seconds)")
    p.add_argument("--host-dir", metavar="DIR", help="semihosting host files, as for run")
    p.add_argument("--jobs", "-j", metavar="N", type=_jobs, default=1,
                   help="local worker processes (default 1: traces are taken in this process)")
    p.add_argument("--engine", choices=("local", "dask"), default="local",
                   help="local: this process or a pool of --jobs; dask: a Dask cluster (--scheduler)")
    p.add_argument("--scheduler", metavar="ADDR", help="the Dask scheduler's address (tcp://host:8786)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar and no summary")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("power", help="simulated power traces of a firmware window (NumPy .npy, Riscure .trs)")
    p.add_argument("--traces", metavar="N", type=_count, required=True, help="how many traces")
    p.add_argument("--out", metavar="FILE.npy", required=True,
                   help="the traces (float32, N x samples); FILE.inputs.npz and FILE.json beside it")
    p.add_argument("--output", metavar="SYMBOL", action="append", default=[],
                   help="record SYMBOL after each run (the run then goes on to the firmware's exit; repeatable)")
    p.add_argument("--trs", metavar="FILE.trs", help="also write a Riscure Inspector trace set (needs trsfile)")
    add_campaign_options(p)


# ---------------------------------------------------------------------- shared set-up

class Prepared:
    """The tracer, the checked inputs and the reference run of a campaign's window."""

    def __init__(self, args: argparse.Namespace, console: Console, outputs: tuple[str, ...] = ()) -> None:
        need("numpy", "power", f"pkasim {args.command}")
        from pkasim.analysis.power.inputs import InputSpec, generator_symbols
        from pkasim.analysis.power.tracer import Setup, Tracer, check_symbols
        from pkasim.analysis.windows import parse_window
        from pkasim.chip.config import load_config

        if args.engine == "dask" and not args.scheduler:
            raise UsageError("--engine dask needs --scheduler ADDR (the Dask scheduler's address)")
        if args.engine == "local" and args.scheduler:
            raise UsageError("--scheduler is for --engine dask")
        if args.engine == "dask" and args.jobs != 1:
            raise UsageError("--jobs is for the local engine; a Dask cluster has its own workers")
        window = parse_window(args.window)
        fixed_names = [s for s, _ in args.fixed]
        random_names = [s for s, _ in args.random]
        for names, what in ((fixed_names, "--fixed"), (random_names, "--random")):
            if len(set(names)) != len(names):
                raise UsageError(f"{what}: each symbol once")
        config = load_config(args.config)
        budget = args.max_cycles
        if budget is None:
            budget = DEFAULT_BUDGET_SECONDS * config.core.clock_hz
        if args.host_dir is not None and not Path(args.host_dir).is_dir():
            from pkasim.base.errors import InputMissingError

            raise InputMissingError(f"--host-dir {args.host_dir}: not a directory")
        self.setup = Setup(args.firmware, config, host_dir=args.host_dir, budget=budget or None)
        self.tracer = Tracer(self.setup)
        generated = generator_symbols(args.inputs) if args.inputs else []
        rooms = check_symbols(self.tracer, sorted({*fixed_names, *random_names, *generated, *outputs}))
        for sym, value in args.fixed:
            if len(value) > rooms[sym]:
                from pkasim.base.errors import LoadError

                raise LoadError(f"--fixed {sym}: {len(value):,} bytes do not fit in '{sym}' ({rooms[sym]:,} bytes)")
        for sym, n in args.random:
            if n is not None and n > rooms[sym]:
                from pkasim.base.errors import LoadError

                raise LoadError(f"--random {sym}=bytes:{n}: {n:,} bytes do not fit in '{sym}' ({rooms[sym]:,} bytes)")
        self.spec = InputSpec(tuple(args.fixed), tuple(args.random), args.inputs, rooms)
        self.window = window
        reference_inputs = dict(args.fixed)
        if not args.quiet:
            console.print(f"{args.firmware} on {config.chip}: resolving the window {window}", highlight=False)
        self.reference = self.tracer.reference(window, reference_inputs)
        self.config = config

    def campaign(self, args: argparse.Namespace, traces: int, kind: str, order: int = 1,
                 outputs: tuple[str, ...] = (), pairs: int = 0):
        from pkasim.analysis.power.campaign import Campaign

        r = self.reference
        return Campaign(self.setup, self.spec, r.lo, r.hi, r.digest, traces, args.noise, args.seed, kind, order,
                        outputs, pairs)

    def engine(self, args: argparse.Namespace):
        """None (this process), a local pool, or a Dask client; the command's own tracer
        serves the in-process case."""
        from pkasim.analysis.power import campaign

        if args.engine == "dask":
            from pkasim.sweep.engines import DaskEngine

            return DaskEngine(args.scheduler)
        if args.jobs == 1:
            campaign.adopt(self.tracer)
            return None
        from pkasim.sweep.engines import LocalEngine

        return LocalEngine(args.jobs)

    def window_doc(self) -> dict[str, Any]:
        r = self.reference
        return {"text": str(self.window), "first_cycle": r.lo, "end_cycle": r.hi, "cycles": r.cycles,
                "instructions": r.instructions, "pka_operations": len(r.operations)}


def progress(console: Console, quiet: bool, total: int, what: str):
    """A transient progress bar over traces on a terminal (nothing otherwise)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    return Progress(TextColumn(f"[bold]{what}[/bold]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TextColumn("ETA"), TimeRemainingColumn(), console=console, transient=True,
                    disable=quiet or not console.is_terminal)


def close_engine(engine) -> None:
    if engine is not None and hasattr(engine, "close"):
        engine.close()


# ---------------------------------------------------------------------- the command

def main(args: argparse.Namespace, console: Console) -> int:
    out = Path(args.out)
    if out.suffix != ".npy":
        raise UsageError(f"--out {args.out}: expected a .npy file name")
    if len(set(args.output)) != len(args.output):
        raise UsageError("--output: each symbol once")
    if args.trs:
        need("trsfile", "power", "pkasim power --trs")
    for path in [out] + ([Path(args.trs)] if args.trs else []):
        try:  # before any run: a file that cannot be written is found at once
            path.open("wb").close()
        except OSError as exc:
            raise OutputError(f"{path}: cannot write: {exc.strerror or exc}") from None
    prep = Prepared(args, console, tuple(args.output))
    import numpy as np

    from pkasim.analysis.power import campaign as cm

    camp = prep.campaign(args, args.traces, "power", outputs=tuple(args.output))
    samples = camp.samples
    base = out.with_suffix("")
    paths = {"traces": out, "inputs": Path(f"{base}.inputs.npz"), "json": Path(f"{base}.json")}
    try:
        traces = np.lib.format.open_memmap(out, mode="w+", dtype=np.float32, shape=(args.traces, samples))
    except OSError as exc:
        raise OutputError(f"{out}: cannot write the traces: {exc.strerror or exc}") from None
    trs = _open_trs(args.trs, camp, prep) if args.trs else None
    inputs: dict[str, list] = {}
    outputs: dict[str, list] = {}
    aligned = np.zeros(args.traces, dtype=bool)
    engine = prep.engine(args)
    start = time.perf_counter()
    counts = {"instructions": 0}
    try:
        with progress(console, args.quiet, args.traces, "power") as bar:
            task = bar.add_task("traces", total=args.traces)

            def on_chunk(r: dict[str, Any]) -> None:
                first, count = r["first"], r["count"]
                traces[first:first + count] = r["traces"]
                aligned[first:first + count] = r["aligned"]
                for sym, arr in r["inputs"].items():
                    inputs.setdefault(sym, []).append(arr)
                for sym, arr in r["outputs"].items():
                    outputs.setdefault(sym, []).append(arr)
                counts["instructions"] += r["instructions"]
                if trs is not None:
                    _write_trs(trs, r)
                bar.update(task, advance=count)

            cm.run(camp, engine, on_chunk)
    finally:
        close_engine(engine)
        if trs is not None:
            trs.close()
    wall = time.perf_counter() - start
    traces.flush()
    r = prep.reference
    arrays = {f"in_{sym}": np.concatenate(v) for sym, v in inputs.items()}
    arrays |= {f"out_{sym}": np.concatenate(v) for sym, v in outputs.items()}
    arrays |= {"aligned": aligned, "cycles": np.arange(r.lo, r.hi, dtype=np.uint64), "pcs": r.pcs}
    try:
        with open(paths["inputs"], "wb") as fh:
            np.savez(fh, **arrays)
    except OSError as exc:
        raise OutputError(f"{paths['inputs']}: cannot write: {exc.strerror or exc}") from None
    misaligned = int(args.traces - aligned.sum())
    doc = {
        "schema": SCHEMA,
        "firmware": args.firmware,
        "chip": prep.config.chip,
        "config": prep.config.source,
        "window": prep.window_doc(),
        "traces": args.traces,
        "samples": samples,
        "noise": args.noise,
        "seed": args.seed,
        "fixed": {s: v.hex() for s, v in args.fixed},
        "random": {s: n for s, n in args.random},
        "inputs_function": args.inputs,
        "outputs": list(args.output),
        "misaligned": misaligned,
        "files": {k: str(v) for k, v in paths.items()} | ({"trs": args.trs} if args.trs else {}),
        "model": {"cpu": prep.config.power.cpu, "pka": prep.config.power.pka},
        "wall_seconds": round(wall, 3),
        "traces_per_second": round(args.traces / wall, 1) if wall > 0 else None,
    }
    write_text(str(paths["json"]), json.dumps(doc, indent=2) + "\n", "the trace set's description")
    if not args.quiet:
        console.print(f"{args.traces:,} traces x {samples:,} samples ({r.lo:,} to {r.hi:,}) in {wall:.1f} s "
                      f"({doc['traces_per_second'] or 0:,.0f} traces/s): {out}, {paths['inputs']}, {paths['json']}"
                      + (f", {args.trs}" if args.trs else ""), highlight=False)
    if misaligned:
        print(f"pkasim: warning: in {misaligned:,} of {args.traces:,} traces the window executed other instructions "
              "or at other cycles than the reference run: their samples do not line up (timing or control flow "
              "depends on the inputs; pkasim ct-check finds where; 'aligned' in the .npz says which)",
              file=sys.stderr)
    return 0


def _open_trs(path: str, camp, prep: Prepared):
    import trsfile
    from trsfile.parametermap import TraceSetParameterMap

    header = {
        trsfile.Header.TRS_VERSION: 2,
        trsfile.Header.NUMBER_SAMPLES: camp.samples,
        trsfile.Header.SAMPLE_CODING: trsfile.SampleCoding.FLOAT,
        trsfile.Header.DESCRIPTION: f"pkasim power {prep.setup.firmware} window {prep.window}",
        trsfile.Header.SCALE_X: 1.0 / prep.config.core.clock_hz,
        trsfile.Header.LABEL_X: "s",
        trsfile.Header.LABEL_Y: "model units",
        trsfile.Header.TRACE_SET_PARAMETERS: TraceSetParameterMap(),
    }
    try:
        return trsfile.trs_open(path, "w", engine="TrsEngine", headers=header, padding_mode=trsfile.TracePadding.AUTO,
                                live_update=False)
    except OSError as exc:
        raise OutputError(f"{path}: cannot write the trace set: {exc.strerror or exc}") from None


def _write_trs(trs, r: dict[str, Any]) -> None:
    """Append a chunk's traces; each trace's data is its inputs then outputs (sorted by
    symbol), as an Inspector data parameter per symbol."""
    import numpy as np
    import trsfile
    from trsfile.parametermap import TraceParameterMap
    from trsfile.traceparameter import ByteArrayParameter

    for k in range(r["count"]):
        params = TraceParameterMap()
        for sym, arr in sorted(r["inputs"].items()):
            params[f"IN_{sym}"] = ByteArrayParameter(bytearray(arr[k].tobytes()))
        for sym, arr in sorted(r["outputs"].items()):
            params[f"OUT_{sym}"] = ByteArrayParameter(bytearray(arr[k].tobytes()))
        trs.append(trsfile.Trace(trsfile.SampleCoding.FLOAT, np.asarray(r["traces"][k], dtype=np.float32), params))
