"""Campaigns of traces, in chunks that run anywhere: here, on a process pool, on Dask.

Traces are independent, so a campaign is cut into chunks of consecutive traces; a
chunk is a ``Task`` that any worker can take (``take``): it builds (once per process)
the tracer of the campaign's setup, makes each trace's inputs and noise from a
generator seeded by (seed, chunk number), and returns either the traces themselves
(``pkasim power``) or, for a TVLA, only the two groups' moments (stats.Moments), so
nothing that grows with the number of traces crosses a process boundary or stays in
memory. Each trace also reseeds the chip's TRNG from that generator, so what the
firmware draws from it (masks, blinding factors) is fresh in every trace.

The chunk size depends only on the window's length, and which group each trace of a
TVLA belongs to is drawn once for the whole campaign (a shuffled, balanced
assignment): the same seed gives the same traces, the same groups and the same
statistics whatever the number of workers.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from pkasim.analysis.power.inputs import InputMaker, InputSpec
from pkasim.analysis.power.stats import Moments, PairMoments, Pairs
from pkasim.analysis.power.tracer import Setup, Tracer
from pkasim.base.errors import LoadError, PkasimError

CHUNK_TRACES = 256  # traces per chunk at most
CHUNK_SAMPLES = 1 << 22  # samples per chunk at most (32 MiB of float64 in flight per worker)


@dataclass(frozen=True)
class Campaign:
    """Everything a worker needs (picklable)."""

    setup: Setup
    inputs: InputSpec
    lo: int
    hi: int
    digest: int  # the reference run's window digest (tracer.py)
    traces: int
    noise: float = 0.0
    seed: int = 1
    kind: str = "power"  # or "tvla"
    order: int = 1
    outputs: tuple[str, ...] = ()
    pairs: int = 0  # bivariate second order: the largest distance between two samples (0: univariate)
    token: str = field(default_factory=lambda: uuid.uuid4().hex[:12])  # names its tasks on a cluster

    @property
    def samples(self) -> int:
        return self.hi - self.lo

    @property
    def chunk(self) -> int:
        return max(1, min(CHUNK_TRACES, CHUNK_SAMPLES // max(1, self.samples)))

    def tasks(self) -> list[Task]:
        groups = self.groups() if self.kind == "tvla" else None
        out = []
        for index, first in enumerate(range(0, self.traces, self.chunk)):
            count = min(self.chunk, self.traces - first)
            g = groups[first:first + count].tobytes() if groups is not None else b""
            out.append(Task(self, index, first, count, g))
        return out

    def groups(self) -> np.ndarray:
        """TVLA: True for the traces of the fixed group, half of them (rounded down),
        placed at random over the campaign."""
        g = np.zeros(self.traces, dtype=bool)
        g[:self.traces // 2] = True
        np.random.default_rng([self.seed, 0x7E57]).shuffle(g)
        return g


@dataclass(frozen=True)
class Task:
    """One chunk: traces ``first`` to ``first + count - 1`` of a campaign."""

    campaign: Campaign
    index: int
    first: int
    count: int
    groups: bytes = b""  # TVLA: one byte per trace, 1 for the fixed group


# ---------------------------------------------------------------------- the worker side

_tracer: Tracer | None = None
_maker: tuple[InputSpec, InputMaker] | None = None


def tracer_for(setup: Setup) -> Tracer:
    """This process's tracer for ``setup``, built on first use and kept."""
    global _tracer
    if _tracer is None or _tracer.setup != setup:
        _tracer = Tracer(setup)
    return _tracer


def adopt(tracer: Tracer) -> None:
    """Use an existing tracer in this process (the command's own, for --jobs 1)."""
    global _tracer
    _tracer = tracer


def _maker_for(spec: InputSpec) -> InputMaker:
    global _maker
    if _maker is None or _maker[0] != spec:
        _maker = (spec, InputMaker(spec))
    return _maker[1]


def take(task: Task) -> dict[str, Any]:
    """Run one chunk of traces (see the module docstring for what it returns)."""
    c = task.campaign
    tracer = tracer_for(c.setup)
    maker = _maker_for(c.inputs)
    rng = np.random.default_rng([c.seed, task.index])
    tvla = c.kind == "tvla"
    groups = np.frombuffer(task.groups, dtype=bool) if tvla else np.zeros(task.count, dtype=bool)
    rows = np.zeros((task.count, c.samples))
    aligned = np.zeros(task.count, dtype=bool)
    inputs: dict[str, list[bytes]] = {}
    outputs: dict[str, list[bytes]] = {sym: [] for sym in c.outputs}
    instructions = 0
    for k in range(task.count):
        seed = int(rng.integers(1 << 62))  # the TRNG's for this trace
        values = maker.make(rng, bool(groups[k]), tvla)
        if not tracer.warm:
            tracer.warm_up(values, c.lo, c.hi, seed)
        trace = tracer.trace(values, c.lo, c.hi, rows[k], to_end=bool(c.outputs), seed=seed)
        aligned[k] = trace.digest == c.digest
        instructions += trace.instructions
        if not tvla:
            for sym, data in values.items():
                inputs.setdefault(sym, []).append(data)
            for sym in c.outputs:
                outputs[sym].append(tracer.read(sym))
    if c.noise > 0:
        rows += rng.standard_normal(rows.shape) * c.noise
    result: dict[str, Any] = {"index": task.index, "first": task.first, "count": task.count,
                              "misaligned": int(task.count - aligned.sum()), "instructions": instructions}
    if tvla:
        if c.pairs:
            pairs = Pairs(c.samples, c.pairs)
            result["fixed"] = PairMoments.of(rows[groups], pairs)
            result["random"] = PairMoments.of(rows[~groups], pairs)
        else:
            result["fixed"] = Moments.of(rows[groups], c.order)
            result["random"] = Moments.of(rows[~groups], c.order)
        return result
    result["traces"] = rows.astype(np.float32)
    result["aligned"] = aligned
    result["inputs"] = {sym: _stack(sym, v) for sym, v in inputs.items()}
    result["outputs"] = {sym: _stack(sym, v) for sym, v in outputs.items()}
    return result


def _stack(symbol: str, values: list[bytes]) -> np.ndarray:
    sizes = {len(v) for v in values}
    if len(sizes) > 1:
        raise LoadError(f"'{symbol}': the traces' values have different lengths ({sorted(sizes)[:4]} bytes); "
                        "give every trace the same number of bytes")
    return np.frombuffer(b"".join(values), dtype=np.uint8).reshape(len(values), -1)


def take_guarded(task: Task) -> tuple[dict[str, Any] | None, str | None]:
    """``take`` for an engine: a user-facing error comes back as a result that names
    its exit code (so the command reports it as if it had run here); anything else as
    the engine's error line."""
    try:
        return take(task), None
    except PkasimError as exc:
        return {"error": str(exc), "exit_code": exc.exit_code, "index": task.index}, None
    except MemoryError:
        return None, "out of host memory"
    except Exception as exc:  # noqa: BLE001 - reported with the chunk; the command fails
        return None, f"internal error: {type(exc).__name__}: {exc}"


# ---------------------------------------------------------------------- the command side

class Engine(Protocol):
    """pkasim.sweep.engines' LocalEngine or DaskEngine (``name`` "local" or "dask")."""

    name: str

    def run(self, tasks: Sequence[tuple[str, Any]], done: Callable[[str, Any, str | None], None],
            call: Callable[[Any], Any], **where: Any) -> None: ...


class ChunkFailed(PkasimError):
    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def run(campaign: Campaign, engine: Engine | None, on_chunk: Callable[[dict[str, Any]], None]) -> None:
    """Run every chunk (here when ``engine`` is None) and give each result to
    ``on_chunk`` in chunk order (results that come early wait for the ones before)."""
    tasks = campaign.tasks()
    if engine is None:
        for task in tasks:
            on_chunk(_checked(take_guarded(task)))
        return
    waiting: dict[int, dict[str, Any]] = {}
    state = {"next": 0}

    def done(tid: str, result: dict[str, Any] | None, error: str | None) -> None:
        result = _checked((result, error))
        waiting[result["index"]] = result
        while state["next"] in waiting:
            on_chunk(waiting.pop(state["next"]))
            state["next"] += 1

    named = [(f"{campaign.token}-{t.index}", t) for t in tasks]
    if engine.name == "dask":
        engine.run(named, done, call=take_guarded, prefix="pkasim-power")
    else:
        engine.run(named, done, call=take_guarded, preload=("pkasim.analysis.power.campaign",))
    if state["next"] != len(tasks):
        raise ChunkFailed(f"{len(tasks) - state['next']} chunk(s) of traces did not come back", 70)


def _checked(outcome: tuple[dict[str, Any] | None, str | None]) -> dict[str, Any]:
    result, error = outcome
    if error is not None or result is None:
        raise ChunkFailed(f"a chunk of traces failed: {error}", 70)
    if "error" in result:
        raise ChunkFailed(result["error"], result["exit_code"])
    return result
