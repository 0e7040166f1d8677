"""``pkasim cpa TRACES.npy --intermediate aes-sbox-hw:SYMBOL|MODULE:FUNCTION [--bytes N]
[--key HEX] [--json FILE]``: correlation power analysis of a trace set that ``pkasim
power`` wrote (TRACES.npy and TRACES.inputs.npz), docs/power.md.

The intermediate is either built in, ``aes-sbox-hw:SYMBOL`` (the Hamming weight of
AES's first-round S-box output for the plaintext in SYMBOL), or a Python function
``f(inputs, byte, guess)`` that returns one predicted leakage per trace, where
``inputs`` maps each input symbol (and ``out_SYMBOL`` for each output) to its bytes,
one row per trace. With ``--key`` the real key is known: each byte's rank and the
traces after which it stays first are reported, and the exit code says whether every
byte was recovered (0) or not (1).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from pkasim.base.errors import InputMissingError, LoadError, UsageError
from pkasim.base.extras import need
from pkasim.cli.argtypes import whole_number
from pkasim.cli.common import write_text

SCHEMA = "pkasim.cpa/1"
BUILTIN = "aes-sbox-hw"


def _bytes(text: str) -> int:
    return whole_number(text, 1, 4096, "expected 1..4096 key bytes, got {value}")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cpa", help="correlation power analysis of a trace set against a key-dependent intermediate")
    p.add_argument("traces", metavar="TRACES.npy", help="traces from pkasim power (TRACES.inputs.npz beside it)")
    p.add_argument("--intermediate", metavar="NAME", required=True,
                   help=f"{BUILTIN}:SYMBOL (AES's first-round S-box output's Hamming weight) or "
                        "MODULE:FUNCTION, a function (inputs, byte, guess) -> predictions per trace")
    p.add_argument("--bytes", metavar="N", type=_bytes, default=16, help="key bytes attacked: 0..N-1 (default 16)")
    p.add_argument("--guesses", metavar="G", type=int, default=256, help="guesses per byte: 0..G-1 (default 256)")
    p.add_argument("--key", metavar="HEX", help="the real key (bytes in order): report ranks and traces needed")
    p.add_argument("--json", metavar="FILE", help="results as JSON (schema pkasim.cpa/1; - for stdout)")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")


def main(args: argparse.Namespace, console: Console) -> int:
    need("numpy", "power", "pkasim cpa")
    import numpy as np

    from pkasim.analysis.power.cpa import cpa
    from pkasim.analysis.power.inputs import load_generator
    from pkasim.analysis.power.stats import aes_sbox_hw

    if not 2 <= args.guesses <= 65536:
        raise UsageError(f"--guesses {args.guesses}: expected 2..65536")
    key = None
    if args.key is not None:
        try:
            key = bytes.fromhex(args.key.removeprefix("0x"))
        except ValueError:
            raise UsageError(f"--key {args.key[:40]!r}: expected hex bytes") from None
        if len(key) < args.bytes:
            raise UsageError(f"--key: {len(key)} bytes, but --bytes {args.bytes} attacks {args.bytes}")
        if any(k >= args.guesses for k in key[:args.bytes]):
            raise UsageError(f"--key: a byte is not below --guesses {args.guesses}")
    path = Path(args.traces)
    side = Path(f"{path.with_suffix('')}.inputs.npz")
    for p in (path, side):
        if not p.is_file():
            raise InputMissingError(f"{p}: no such file (pkasim power --out writes both)")
    try:
        traces = np.load(path, mmap_mode="r")
        with np.load(side) as data:
            inputs = {k[3:]: data[k] for k in data.files if k.startswith("in_")}
            inputs |= {k: data[k] for k in data.files if k.startswith("out_")}
    except (OSError, ValueError) as exc:
        raise LoadError(f"{path}: not a trace set pkasim power wrote: {exc}") from None
    if traces.ndim != 2 or any(len(v) != len(traces) for v in inputs.values()):
        raise LoadError(f"{path}: the traces and {side.name} do not match (one row per trace in each)")
    if len(traces) < 2:
        raise UsageError(f"{path}: {len(traces)} trace(s); correlation needs at least 2")
    name, sep, arg = args.intermediate.partition(":")
    if name == BUILTIN:
        if arg not in inputs:
            raise LoadError(f"--intermediate {args.intermediate}: the trace set has no input '{arg}' "
                            f"(it has: {', '.join(sorted(inputs)) or 'none'})")
        if inputs[arg].shape[1] < args.bytes:
            raise LoadError(f"--intermediate {args.intermediate}: '{arg}' has {inputs[arg].shape[1]} bytes, "
                            f"fewer than --bytes {args.bytes}")
        intermediate = aes_sbox_hw(arg)
    else:
        intermediate = load_generator(args.intermediate)
    result = cpa(traces, inputs, intermediate, range(args.bytes), args.guesses, key)
    doc: dict[str, Any] = {
        "schema": SCHEMA, "traces_file": str(path), "traces": result.traces, "samples": result.samples,
        "intermediate": args.intermediate, "guesses": args.guesses,
        "bytes": [{"byte": b.byte, "guess": b.guess, "peak_r": round(b.peak, 6), "sample": b.sample,
                   "runner_up": b.runner_up, "runner_up_r": round(b.runner_up_peak, 6),
                   **({"key": b.key, "rank": b.rank, "traces_needed": b.traces_needed} if key is not None else {})}
                  for b in result.bytes],
        "recovered_key": bytes(b.guess for b in result.bytes).hex() if args.guesses <= 256 else None,
    }
    if key is not None:
        doc["recovered"] = result.recovered
        doc["traces_needed"] = result.traces_needed
    if args.json:
        write_text(args.json, json.dumps(doc, indent=2) + "\n", "the CPA JSON")
    if not args.quiet:
        _report(console, doc, key is not None)
    if key is not None and result.recovered < len(result.bytes):
        return 1
    return 0


def _report(console: Console, doc: dict[str, Any], known: bool) -> None:
    console.print(f"cpa {doc['traces_file']}: {doc['traces']:,} traces x {doc['samples']:,} samples, "
                  f"{doc['intermediate']}, {doc['guesses']} guesses per byte", highlight=False)
    t = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("byte", "guess", "|r|", "sample", "runner-up", "|r|"):
        t.add_column(col, justify="right")
    if known:
        for col in ("key", "rank", "traces needed"):
            t.add_column(col, justify="right")
    for b in doc["bytes"]:
        row = [str(b["byte"]), f"{b['guess']:02x}", f"{b['peak_r']:.3f}", str(b["sample"]), f"{b['runner_up']:02x}",
               f"{b['runner_up_r']:.3f}"]
        if known:
            row += [f"{b['key']:02x}", str(b["rank"]), f"{b['traces_needed']:,}" if b["traces_needed"] else "-"]
        t.add_row(*row)
    console.print(t)
    if doc.get("recovered_key"):
        console.print(f"best guess: {doc['recovered_key']}", highlight=False)
    if known:
        needed = doc["traces_needed"]
        console.print(f"recovered {doc['recovered']} of {len(doc['bytes'])} bytes"
                      + (f"; every byte ranks first from {needed:,} traces on" if needed else ""), highlight=False)
