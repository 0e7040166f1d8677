"""``pkasim tvla FIRMWARE.elf --fixed SYM=HEX --random SYM --traces N [--order 1|2]
[--window W] [--json FILE] [--plot FILE]``: a fixed-vs-random leakage assessment
(docs/power.md).

Half of the traces (chosen at random over the campaign) run with the ``--fixed``
values of the symbols given both ``--fixed`` and ``--random``, the others with random
ones; Welch's t is computed per sample at the order asked, in one streaming pass
(pkasim.analysis.power.stats). Exit 0 when no sample's |t| exceeds 4.5, 1 when one
does (a CI gate), or when the firmware's timing in the window depended on the inputs
(its traces do not line up: a leak of its own).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from typing import Any

from rich.console import Console

from pkasim.base.errors import UsageError
from pkasim.base.extras import need
from pkasim.cli.argtypes import whole_number
from pkasim.cli.common import write_text
from pkasim.cli.power import Prepared, _count, add_campaign_options, close_engine, progress

SCHEMA = "pkasim.tvla/1"
EXIT_LEAK = 1


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tvla", help="fixed-vs-random leakage assessment (Welch's t-test, TVLA) of a firmware window")
    p.add_argument("--traces", metavar="N", type=_count, required=True,
                   help="traces in all (at least 4: two per group); half in each group")
    p.add_argument("--order", type=int, choices=(1, 2), default=1,
                   help="1: compare the groups' means (default); 2: their variances (centred squares)")
    p.add_argument("--pairs", metavar="D", type=_distance, default=0,
                   help="with --order 2: bivariate, the centred product of every two samples at most D cycles apart "
                        "(shares of a masked value that leak at different cycles); default: univariate")
    p.add_argument("--json", metavar="FILE", help="the verdict and statistics as JSON (schema pkasim.tvla/1; - for stdout)")
    p.add_argument("--plot", metavar="FILE", help="t over the window with the +-4.5 lines (PNG, SVG or PDF)")
    add_campaign_options(p)


def main(args: argparse.Namespace, console: Console) -> int:
    if args.traces < 4:
        raise UsageError(f"--traces {args.traces}: a TVLA needs at least 2 traces in each group (4 in all)")
    fixed = {s for s, _ in args.fixed}
    tested = sorted(s for s, _ in args.random if s in fixed)
    if args.pairs and args.order != 2:
        raise UsageError(f"--pairs {args.pairs}: a bivariate test is second order: give --order 2")
    if not tested and not args.inputs:
        raise UsageError("nothing differs between the groups: give the tested input both --fixed SYM=HEX (the "
                         "fixed group's value) and --random SYM (the random group's), or --inputs MODULE:FUNCTION")
    if args.plot:
        need("matplotlib", "power", "pkasim tvla --plot")
    prep = Prepared(args, console)
    from pkasim.analysis.power import campaign as cm
    from pkasim.analysis.power.stats import THRESHOLD, Moments, PairMoments, welch_t, welch_t_pairs

    pairs = _pairs(args.pairs, prep.reference.cycles) if args.pairs else None
    camp = prep.campaign(args, args.traces, "tvla", order=args.order, pairs=pairs.distance if pairs else 0)
    if pairs is not None:
        groups = {"fixed": PairMoments.empty(pairs), "random": PairMoments.empty(pairs)}
    else:
        groups = {"fixed": Moments.empty(camp.samples, args.order),
                  "random": Moments.empty(camp.samples, args.order)}
    counts = {"misaligned": 0, "instructions": 0}
    engine = prep.engine(args)
    start = time.perf_counter()
    try:
        with progress(console, args.quiet, args.traces, "tvla") as bar:
            task = bar.add_task("traces", total=args.traces)

            def on_chunk(r: dict[str, Any]) -> None:
                groups["fixed"].merge(r["fixed"])
                groups["random"].merge(r["random"])
                counts["misaligned"] += r["misaligned"]
                counts["instructions"] += r["instructions"]
                bar.update(task, advance=r["count"])

            cm.run(camp, engine, on_chunk)
    finally:
        close_engine(engine)
    wall = time.perf_counter() - start
    import numpy as np

    ref = prep.reference
    if pairs is None:
        t = welch_t(groups["fixed"], groups["random"], args.order)
        over = np.abs(t) > THRESHOLD
        leaks = bool(over.any())
        first = int(np.argmax(over)) if leaks else None
        peak = int(np.argmax(np.abs(t)))
        at_peak, at_first, leaking, per_sample = where(prep, peak), where(prep, first) if leaks else None, \
            int(over.sum()), t
    else:
        t = welch_t_pairs(groups["fixed"], groups["random"])
        over = np.abs(t) > THRESHOLD
        leaks = bool(over.any())
        i, j = pairs.index()
        peak = int(np.argmax(np.abs(t)))
        at_peak = where_pair(prep, pairs, peak)
        at_first = None
        if leaks:  # the pair whose later sample comes first: when a leak is first complete
            hits = np.flatnonzero(over)
            first = int(hits[np.lexsort((i[hits], j[hits]))[0]])
            at_first = where_pair(prep, pairs, first)
        leaking = len(np.union1d(i[over], j[over]))
        per_sample = np.zeros(pairs.samples)  # for the plot: each sample's largest |t| over its pairs
        np.maximum.at(per_sample, i, np.abs(np.nan_to_num(t, posinf=1e6, neginf=1e6)))
        np.maximum.at(per_sample, j, np.abs(np.nan_to_num(t, posinf=1e6, neginf=1e6)))
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "firmware": args.firmware,
        "chip": prep.config.chip,
        "window": prep.window_doc(),
        "traces": args.traces,
        "groups": {"fixed": groups["fixed"].n, "random": groups["random"].n},
        "tested": tested,
        "inputs_function": args.inputs,
        "order": args.order,
        "noise": args.noise,
        "seed": args.seed,
        "pairs": {"max_distance": pairs.distance, "count": pairs.count} if pairs is not None else None,
        "max_abs_t": _number(float(np.abs(t[peak]))),
        "max_at": at_peak,
        "threshold": THRESHOLD,
        "leaks": leaks or counts["misaligned"] > 0,
        "leaking_samples": leaking,
        "first_leak": at_first,
        "misaligned_traces": counts["misaligned"],
        "wall_seconds": round(wall, 3),
        "traces_per_second": round(args.traces / wall, 1) if wall > 0 else None,
    }
    if pairs is not None:
        doc["leaking_pairs"] = int(over.sum())
    if args.json:
        write_text(args.json, json.dumps(doc, indent=2) + "\n", "the TVLA JSON")
    if args.plot:
        _plot(args.plot, per_sample, ref.lo, doc)
    if not args.quiet or doc["leaks"]:
        _report(console, doc)
    return EXIT_LEAK if doc["leaks"] else 0


def _distance(text: str) -> int:
    return whole_number(text, 1, None, "expected a distance of at least 1 cycle, got {value}")


def _pairs(distance: int, samples: int):
    """The pairs of a bivariate test over a window of ``samples`` (UsageError when the
    window has one sample, or when they would be too many to keep)."""
    from pkasim.analysis.power.stats import MAX_PAIRS, Pairs

    if samples < 2:
        raise UsageError(f"--pairs: the window has {samples} sample(s); a pair needs 2")
    pairs = Pairs(samples, min(distance, samples - 1))
    if pairs.count > MAX_PAIRS:
        raise UsageError(f"--pairs {distance}: {pairs.count:,} pairs over {samples:,} samples; at most {MAX_PAIRS:,} "
                         f"(a distance of at most {MAX_PAIRS // samples:,}, or a narrower window)")
    return pairs


def where_pair(prep: Prepared, pairs, index: int) -> dict[str, Any]:
    """``where`` of a pair's first sample, with its second as ``paired_with``."""
    i, j = pairs.pair(index)
    doc = where(prep, i)
    doc["paired_with"] = where(prep, j)
    return doc


def _number(x: float) -> float | str:
    """JSON has no infinity: an exact difference (no noise) is written "inf"."""
    return x if math.isfinite(x) else "inf"


def where(prep: Prepared, index: int) -> dict[str, Any]:
    """What the reference run did at sample ``index``: the cycle, the instruction there
    (address, function, source line) and the PKA operation running, if any."""
    ref = prep.reference
    cycle = ref.lo + index
    pc = int(ref.pcs[index])
    doc: dict[str, Any] = {"cycle": cycle, "sample": index, "pc": pc or None, "function": None, "file": None,
                           "line": None}
    image = prep.tracer.image
    if pc:
        doc["function"] = image.describe(pc)
        lines = _lines(prep)
        at = lines.at(pc) if lines is not None else None
        if at is not None:
            from pkasim.analysis.windows import describe_path

            doc["file"], doc["line"] = describe_path(at[0]), at[1]
    busy = [op for op in ref.operations if op.start <= cycle < op.start + op.cycles]
    if busy:
        op = busy[0]
        doc["pka"] = {"operation": op.name, "words": op.words, "start": op.start, "cycles": op.cycles,
                      "cycle_in_operation": cycle - op.start}
    return doc


def _lines(prep: Prepared):
    if not hasattr(prep, "_lines"):
        from pkasim.analysis.srclines import SourceLines

        try:
            prep._lines = SourceLines(prep.setup.firmware)
        except Exception:  # noqa: BLE001 - no line table: the report names functions only
            prep._lines = None
    return prep._lines


def describe(doc: dict[str, Any]) -> str:
    parts = [f"cycle {doc['cycle']:,}"]
    if doc.get("function"):
        parts.append(doc["function"] + (f" ({doc['file']}:{doc['line']})" if doc.get("file") else ""))
    elif doc.get("pc"):
        parts.append(f"0x{doc['pc']:08x}")
    if "pka" in doc:
        p = doc["pka"]
        parts.append(f"PKA {p['operation']} of {p['words']} words busy (its cycle {p['cycle_in_operation']:,} "
                     f"of {p['cycles']:,})")
    return ", ".join(parts)


def _describe_at(doc: dict[str, Any]) -> str:
    if "paired_with" in doc:
        return f"the pair {describe(doc)} and {describe(doc['paired_with'])}"
    return describe(doc)


def _report(console: Console, doc: dict[str, Any]) -> None:
    w = doc["window"]
    peak = doc["max_abs_t"]
    console.print(f"tvla {doc['firmware']} on {doc['chip']}, window {w['text']} (cycles {w['first_cycle']:,} to "
                  f"{w['end_cycle']:,}, {w['cycles']:,} samples), order {doc['order']}"
                  + (f" bivariate ({doc['pairs']['count']:,} pairs at most {doc['pairs']['max_distance']:,} cycles "
                     "apart)" if doc["pairs"] else "") + f": {doc['traces']:,} traces "
                  f"({doc['groups']['fixed']:,} fixed, {doc['groups']['random']:,} random), noise {doc['noise']:g}",
                  highlight=False)
    shown = peak if isinstance(peak, str) else f"{peak:.2f}"
    console.print(f"max |t| = {shown} at {_describe_at(doc['max_at'])}", highlight=False)
    if doc["misaligned_traces"]:
        console.print(f"[red]{doc['misaligned_traces']:,} traces executed other instructions or at other cycles in "
                      "the window than the reference run[/red]: timing or control flow depends on the inputs (a leak; "
                      "pkasim ct-check shows where), and their samples do not line up", highlight=False)
    if doc["first_leak"] is not None:
        count = (f"{doc['leaking_pairs']:,} pairs of {doc['leaking_samples']:,} samples" if doc["pairs"]
                 else f"{doc['leaking_samples']:,} samples")
        console.print(f"[red]LEAK[/red]: |t| > {doc['threshold']} at {count}; the first "
                      f"at {_describe_at(doc['first_leak'])}", highlight=False)
    elif not doc["misaligned_traces"]:
        console.print(f"[green]pass[/green]: no sample has |t| > {doc['threshold']}", highlight=False)


def _plot(path: str, t, lo: int, doc: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from pkasim.base.errors import OutputError

    fig, ax = plt.subplots(figsize=(10, 3.6))
    x = np.arange(lo, lo + len(t))
    shown = np.clip(np.nan_to_num(t, posinf=1e6, neginf=-1e6), -1e6, 1e6)
    ax.plot(x, shown, lw=0.6, color="#1f77b4")
    for y in (doc["threshold"], -doc["threshold"]):
        ax.axhline(y, color="#d62728", lw=0.8, ls="--")
    ax.set_xlabel("cycle")
    ax.set_ylabel("max |t| over its pairs" if doc["pairs"] else f"t (order {doc['order']})")
    ax.set_title(f"TVLA {doc['firmware'].rsplit('/', 1)[-1]}, {doc['window']['text']}: {doc['traces']:,} traces, "
                 f"max |t| {doc['max_abs_t'] if isinstance(doc['max_abs_t'], str) else round(doc['max_abs_t'], 1)}",
                 fontsize=10)
    fig.tight_layout()
    try:
        fig.savefig(path)
    except (OSError, ValueError) as exc:
        raise OutputError(f"{path}: cannot write the plot: {exc}") from None
    finally:
        plt.close(fig)
