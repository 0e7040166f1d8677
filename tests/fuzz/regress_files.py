"""Regression suites and baselines as a hostile user or a broken checkout leaves them
(`pkasim regress`).

A suite of one or two cases on hello.elf (a run of some hundred cycles), its keys
given wrong types and awkward values: names with slashes, images that are not images,
`load:` from /dev/zero, a FIFO, a directory or a file larger than the symbol, into
linker constants and unknown symbols, metrics and tolerances of the wrong shape,
`max_cycles` of every kind. Beside it, a baseline per case drawn from a JSON grammar:
a list, null, a wrong schema, metrics that are strings, floats, 5000-digit integers or
nested arrays, truncated or deep JSON, a FIFO or a directory in its place. Exit codes
are regress's own: 0 held, 1 moved, 2 an error; never 70.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import yaml
from fuzzing import BUILD, mutate, run_case

HOSTILE = (0, -1, 1.5, 12345678901234567890, True, None, "", "x", [], {}, "9" * 1100, "a/b", "../x", "%",
           "/dev/zero", [1, "x"], {"a": [1]})
SYMBOLS = ("main", "_ebss", "_estack", "_min_stack_size", "no_such_symbol", "")


def _suite(workdir: Path, base: Path, cases: list) -> Path:
    suite = workdir / "rg-suite.yaml"
    suite.write_text(yaml.safe_dump({"build": str(BUILD), "baselines": str(base), "cases": cases}))
    return suite


def files(workdir: Path) -> dict[str, Any]:
    """Load files of every kind, and the baselines a real --update writes for the two
    cases the generator starts from."""
    (workdir / "rg-dir").mkdir(exist_ok=True)
    fifo = workdir / "rg-fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    (workdir / "rg-word.bin").write_bytes(b"\x01\x00\x00\x00")
    (workdir / "rg-big.bin").write_bytes(bytes(70_000))
    loads = {"word": str(workdir / "rg-word.bin"), "big": str(workdir / "rg-big.bin"), "zero": "/dev/zero",
             "null": "/dev/null", "dir": str(workdir / "rg-dir"), "fifo": str(fifo), "missing": str(workdir / "none")}
    base = workdir / "rg-reference"
    run_case(["regress", str(_suite(workdir, base, [dict(c) for c in START])), "--update"], workdir)
    baselines = {p.stem: json.loads(p.read_text()) for p in base.glob("*.json")}
    return {"loads": loads, "baselines": baselines}


START = ({"name": "c0", "image": "hello.elf"},
         {"name": "c1", "image": "hello.elf", "metrics": ["cycles", "exit_code", "functions"], "functions": ["main"],
          "tolerance": {"cycles": 5, "function.*": "1%"}, "max_cycles": 1_000_000})


def _case(rng: random.Random, pool: dict[str, Any], i: int) -> Any:
    case: dict[str, Any] = dict(START[i])
    if rng.random() < 0.3:
        symbol = rng.choice(SYMBOLS)
        case["load"] = {symbol: pool["loads"][rng.choice(["word"] * 3 + list(pool["loads"]))]}
    if rng.random() < 0.1:
        case["config"] = pool["loads"][rng.choice(list(pool["loads"]))]
    return case


def _baseline(rng: random.Random, pool: dict[str, Any], name: str) -> bytes:
    doc = pool["baselines"].get(name, {"schema": "pkasim.baseline/1", "metrics": {"cycles": 107}})
    doc = mutate(rng, doc, HOSTILE + ("many", 10**30, float("nan")), rng.choice([0, 0, 1, 2]))
    text = json.dumps(doc)
    bend = rng.random()
    if bend < 0.05:
        text = text[: len(text) // 2]
    elif bend < 0.07:
        text = "[" * 50_000 + "]" * 50_000
    elif bend < 0.09:
        text = '{"schema": "pkasim.baseline/1", "metrics": {"cycles": 1' + "0" * 5000 + "}}"
    data = text.encode()
    if rng.random() < 0.03:
        data = b"\xff\xfe" + data
    return data


def case(rng: random.Random, pool: dict[str, Any], workdir: Path) -> tuple[list[str], str]:
    """(argv, what): a suite and its baselines written to the work directory."""
    base = workdir / "rg-baselines"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir()
    cases = [_case(rng, pool, i) for i in range(rng.randint(1, 2))]
    doc = mutate(rng, {"build": str(BUILD), "baselines": str(base), "cases": cases}, HOSTILE,
                 rng.choice([0, 0, 1, 2]))
    for i in range(2):
        where = base / f"c{i}.json"
        kind = rng.random()
        if kind < 0.05:
            os.mkfifo(where)
        elif kind < 0.08:
            where.mkdir()
        elif kind < 0.9:
            where.write_bytes(_baseline(rng, pool, f"c{i}"))
    suite = workdir / "rg-suite.yaml"
    suite.write_text(yaml.safe_dump(doc))
    argv = ["regress", str(suite)]
    if rng.random() < 0.1:
        argv.append("--update")
    if rng.random() < 0.2:
        argv += [rng.choice(["--junit", "--markdown"]), rng.choice([str(workdir / "rg.xml"), "/dev/full",
                                                                   str(workdir / "rg-dir"), str(workdir / "no/x")])]
    return argv, json.dumps(doc)[:200]
