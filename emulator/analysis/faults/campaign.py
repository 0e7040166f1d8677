"""A campaign: the fault space of a window, the faults chosen from it, where they run
and what came out (docs/faults.md).

The space is indexed, never listed: for each point of the window's trace (and each
PKA operation) and each model, a count of faults; fault i is found by bisection. A
campaign takes every index or a seeded sample of them, and for ``--order 2`` every
pair (i < j) or a sample of the pairs. Indices travel to workers in chunks; a worker
process rebuilds the same golden run and space from the ``Setup`` (cached while it
lives) and returns one row per fault. Rows stream to the campaign database as they
come, and only counters stay in memory.
"""

from __future__ import annotations

import bisect
import logging
import math
import random
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pkasim.analysis.faults.engine import Golden, Injector, Setup
from pkasim.analysis.faults.models import MODELS, PKA, Injection, parse_key
from pkasim.analysis.faults.oracles import OUTCOMES
from pkasim.base.errors import PkasimError, UsageError

MAX_CHUNK = 2000
MIN_CHUNK = 50
MAX_SAMPLE = 100_000_000  # faults one campaign runs, at most


class Space:
    """The first-order faults of a golden run's window, in point order."""

    def __init__(self, golden: Golden, names: tuple[str, ...] | None = None) -> None:
        self.g = golden
        names = golden.models if names is None else names
        self.names = names
        starts, models, where = array("Q"), array("H"), array("I")
        total = 0
        cpu = [(k, MODELS[n]) for k, n in enumerate(names) if MODELS[n].when != PKA]
        for i in range(len(golden.ns)):
            insn = golden.insn(golden.pcs[i])
            for k, model in cpu:
                if model.when == "after" and not golden.nexts[i]:
                    continue
                c = model.count(insn)
                if c:
                    starts.append(total)
                    models.append(k)
                    where.append(i)
                    total += c
        self.cpu_end = len(starts)
        for j, op in enumerate(golden.ops):
            for k, n in enumerate(names):
                model = MODELS[n]
                if model.when != PKA:
                    continue
                starts.append(total)
                models.append(k)
                where.append(j)
                total += model.count(op)
        self.starts, self.models, self.where, self.total = starts, models, where, total

    def __len__(self) -> int:
        return self.total

    def __getitem__(self, i: int) -> Injection:
        if not 0 <= i < self.total:
            raise IndexError(i)
        gi = bisect.bisect_right(self.starts, i) - 1
        j = i - self.starts[gi]
        model = MODELS[self.names[self.models[gi]]]
        if gi >= self.cpu_end:
            return model.make(self.g.ops[self.where[gi]], j)
        point = self.g.point(self.where[gi])
        return model.make(point, self.g.insn(point.pc), j)

    def by_model(self) -> Counter:
        """Faults per model."""
        out: Counter = Counter()
        ends = list(self.starts[1:]) + [self.total]
        for gi, start in enumerate(self.starts):
            out[self.names[self.models[gi]]] += ends[gi] - start
        return out


def pair(p: int, n: int) -> tuple[int, int]:
    """The p-th pair (i < j) of n faults, in the order (0,1), (0,2) ... (1,2) ..."""
    # pairs before row i: i*n - i*(i+1)/2
    i = int((2 * n - 1 - math.sqrt((2 * n - 1) ** 2 - 8 * p)) // 2)
    while i > 0 and _row_start(i, n) > p:
        i -= 1
    while _row_start(i + 1, n) <= p:
        i += 1
    return i, i + 1 + p - _row_start(i, n)


def _row_start(i: int, n: int) -> int:
    return i * n - i * (i + 1) // 2


@dataclass
class Plan:
    """Which faults a campaign runs: ``order`` 1 or 2 over a space of ``space_size``
    first-order faults; ``indices`` (sorted) or all of them."""

    order: int
    space_size: int
    sample: int | None = None
    seed: int = 0

    @property
    def size(self) -> int:
        n = self.space_size
        return n if self.order == 1 else n * (n - 1) // 2

    def count(self) -> int:
        return self.size if self.sample is None else self.sample

    def indices(self) -> Iterator[int]:
        if self.sample is None:
            return iter(range(self.size))
        return iter(sorted(random.Random(self.seed).sample(range(self.size), self.sample)))


def plan(space_size: int, order: int, sample: int | None, seed: int) -> Plan:
    if order not in (1, 2):
        raise UsageError(f"--order {order}: 1 (single faults) or 2 (pairs)")
    p = Plan(order, space_size, sample, seed)
    if space_size == 0:
        raise UsageError("the window holds no fault of these models (no instruction they apply to)")
    if sample is not None:
        if sample < 1:
            raise UsageError("--sample: at least 1 fault")
        if sample > p.size:
            raise UsageError(f"--sample {sample:,} is larger than the fault space ({p.size:,} faults)")
        if sample > MAX_SAMPLE:
            raise UsageError(f"--sample {sample:,}: at most {MAX_SAMPLE:,} faults in one campaign")
    return p


def faults_of(space: Space, order: int, index: int) -> tuple[Injection, ...]:
    if order == 1:
        return (space[index],)
    i, j = pair(index, len(space))
    return (space[i], space[j])


def key_of(space: Space, order: int, index: int) -> str:
    return "&".join(f.key for f in faults_of(space, order, index))


# ---------------------------------------------------------------------- workers

@dataclass(frozen=True)
class Chunk:
    """What a worker gets: the setup and the indices to run."""

    setup: Setup
    order: int
    indices: tuple[int, ...]


_PREPARED: dict[str, tuple[Golden, Injector, dict[tuple[str, ...], Space]]] = {}


def prepared(setup: Setup) -> tuple[Golden, Space, Injector]:
    """The golden run, space and injector of a setup, built once per process (the
    golden run once per window, whatever the models)."""
    from pkasim.analysis.faults.models import parse_models

    key = f"{setup.setup_key}/{setup.window}"
    got = _PREPARED.get(key)
    if got is None:
        for old in _PREPARED.values():
            old[1].close()
        _PREPARED.clear()
        with quiet_guest():
            golden = Golden(setup)
        got = _PREPARED[key] = (golden, Injector(golden), {})
    golden, injector, spaces = got
    models = parse_models(list(setup.models))
    space = spaces.get(models)
    if space is None:
        space = spaces[models] = Space(golden, models)
    return golden, space, injector


@contextmanager
def quiet_guest() -> Iterator[None]:
    """Faulted firmware does strange things on purpose: its guest-error and
    unimplemented-feature logs say nothing a campaign needs (outcomes do)."""
    loggers = [logging.getLogger(n) for n in ("pkasim.guest", "pkasim.unimp", "pkasim.semihosting")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def run_indices(setup: Setup, order: int, indices: Iterable[int],
                each: Callable[[dict], None] | None = None) -> list[dict]:
    """Run faults by index in this process; each row goes to ``each`` at once (and
    the rows are returned only without ``each``: a long campaign keeps no list)."""
    golden, space, injector = prepared(setup)
    rows = []
    with quiet_guest():
        for i in indices:
            row = injector.run(faults_of(space, order, i))
            row["index"] = i
            if each is not None:
                each(row)
            else:
                rows.append(row)
    return rows


def run_chunk(chunk: Chunk) -> tuple[list[dict] | None, str | None]:
    """A worker's job (a process pool's or a Dask worker's): (rows, None) or (None,
    the one-line error). Picklable in and out."""
    try:
        return run_indices(chunk.setup, chunk.order, chunk.indices), None
    except PkasimError as exc:
        return None, str(exc)
    except MemoryError:
        return None, "out of host memory"
    except Exception as exc:  # noqa: BLE001 - a bug in one chunk is reported with it
        return None, f"internal error: {type(exc).__name__}: {exc}"


def chunks(setup: Setup, order: int, indices: Sequence[int], workers: int) -> list[tuple[str, Chunk]]:
    """Indices cut into chunks: several per worker, so that they share the work out."""
    n = len(indices)
    size = max(MIN_CHUNK, min(MAX_CHUNK, math.ceil(n / max(1, 8 * workers))))
    return [(f"{k}", Chunk(setup, order, tuple(indices[k:k + size]))) for k in range(0, n, size)]


# ---------------------------------------------------------------------- results

@dataclass
class Summary:
    """Counters of a campaign's outcomes, per model and per source line."""

    outcomes: Counter = field(default_factory=Counter)
    by_model: dict[str, Counter] = field(default_factory=dict)
    lines: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    unreached: int = 0  # pairs whose second fault never happened

    def add(self, row: dict) -> None:
        outcome = row["outcome"]
        self.outcomes[outcome] += 1
        self.by_model.setdefault(row["model"], Counter())[outcome] += 1
        where = (row.get("file") or "", int(row.get("line") or 0))
        entry = self.lines.get(where)
        if entry is None:
            entry = self.lines[where] = {"file": where[0], "line": where[1], "function": row.get("function") or "",
                                         "pc": row.get("pc"), "instruction": row.get("instruction") or "",
                                         "outcomes": Counter()}
        entry["outcomes"][outcome] += 1
        if row.get("second_reached") is False:
            self.unreached += 1

    def hotspots(self, outcome: str = "exploitable", top: int = 10) -> list[dict]:
        rows = [e for e in self.lines.values() if e["outcomes"][outcome]]
        rows.sort(key=lambda e: (-e["outcomes"][outcome], e["file"], e["line"]))
        return rows[:top]

    def as_dict(self) -> dict:
        return {o: self.outcomes.get(o, 0) for o in OUTCOMES}


def parse_fault(text: str) -> tuple[Injection, ...]:
    return tuple(parse_key(k) for k in text.split("&"))


@dataclass
class CampaignResult:
    """What ``run_campaign`` returns: the golden run, the space, the counters and the
    rows (kept only when asked: a large campaign streams to a database instead)."""

    golden: Golden
    space: Space
    plan: Plan
    summary: Summary
    rows: list[dict]


def run_campaign(setup: Setup, *, order: int = 1, sample: int | None = None, seed: int = 0,
                 keep_rows: bool = True, each: Callable[[dict], None] | None = None) -> CampaignResult:
    """Run a campaign in this process (the Python API of ``pkasim faults``): every
    fault of the setup's models in its window, or ``sample`` of them (or of the pairs,
    ``order=2``); ``each(row)`` sees every row as it comes."""
    golden, space, _ = prepared(setup)
    p = plan(len(space), order, sample, seed)
    summary = Summary()
    rows: list[dict] = []

    def take(row: dict) -> None:
        summary.add(row)
        if keep_rows:
            rows.append(row)
        if each is not None:
            each(row)

    run_indices(setup, order, p.indices(), take)
    return CampaignResult(golden, space, p, summary, rows)
