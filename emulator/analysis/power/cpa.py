"""Correlation power analysis (Brier, Clavier, Olivier, CHES 2004) of a trace set.

For each targeted key byte and each guess, an intermediate value the user gives as a
function of the inputs and the guess (``Intermediate``: ``f(inputs, byte, guess)`` ->
one predicted leakage per trace, e.g. the Hamming weight of the first-round S-box
output) is correlated with every sample; the guess with the highest |r| anywhere is
the attack's answer. The traces are read in batches (a memory-mapped .npy never has
to fit in memory); at checkpoints the ranking is taken, so that with the real key
known the number of traces after which the right guess stays first is reported.

    from pkasim.analysis.power import cpa, aes_sbox_hw
    result = cpa(traces, {"aes_pt": plaintexts}, aes_sbox_hw("aes_pt"), range(16), key=key)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from pkasim.analysis.power.stats import CpaSums, Intermediate
from pkasim.base.errors import LoadError

MEMORY = 1 << 28  # bytes of correlation sums in flight (bytes are attacked in groups below it)


@dataclass
class ByteResult:
    """The attack on one key byte."""

    byte: int
    guess: int  # the best guess after all traces
    peak: float  # its max |r|
    sample: int  # where
    runner_up: int
    runner_up_peak: float
    key: int | None = None  # the right value, when known
    rank: int | None = None  # its rank after all traces (0 = recovered)
    traces_needed: int | None = None  # from this many traces on it ranks first at every checkpoint
    history: list[tuple[int, int]] = field(default_factory=list)  # (traces, rank of the right value)


@dataclass
class CpaResult:
    traces: int
    samples: int
    guesses: int
    bytes: list[ByteResult]

    @property
    def recovered(self) -> int:
        return sum(1 for b in self.bytes if b.rank == 0)

    @property
    def traces_needed(self) -> int | None:
        """Traces after which every byte's right value ranks first (None if one never does)."""
        needed = [b.traces_needed for b in self.bytes]
        return None if not needed or any(n is None for n in needed) else max(needed)


def checkpoints_for(n: int) -> list[int]:
    """Trace counts at which the ranking is taken: every step of about 1% of n (at
    least 5 traces), and n."""
    step = max(5, n // 100)
    points = list(range(step, n, step))
    return points + [n]


def cpa(traces: np.ndarray, inputs: Mapping[str, np.ndarray], intermediate: Intermediate, bytes_: Iterable[int],
        guesses: int = 256, key: Sequence[int] | bytes | None = None, batch: int = 512) -> CpaResult:
    """Attack each byte in ``bytes_`` with ``guesses`` guesses (0..guesses-1)."""
    n, size = traces.shape
    targets = list(bytes_)
    marks = checkpoints_for(n) if key is not None else [n]
    per_byte = guesses * size * 8 * 2
    group = max(1, MEMORY // max(1, per_byte))
    results: list[ByteResult] = []
    for g0 in range(0, len(targets), group):
        chunk = targets[g0:g0 + group]
        sums = {b: CpaSums.empty(guesses, size) for b in chunk}
        hist: dict[int, list[tuple[int, int]]] = {b: [] for b in chunk}
        done = 0
        for mark in marks:
            while done < mark:
                stop = min(mark, done + batch)
                x = np.asarray(traces[done:stop], dtype=np.float64)
                part = {k: np.asarray(v[done:stop]) for k, v in inputs.items()}
                for b in chunk:
                    sums[b].add(x, _predict(intermediate, part, b, guesses, stop - done))
                done = stop
            if key is not None:
                for b in chunk:
                    peaks = np.abs(sums[b].correlation()).max(axis=1)
                    hist[b].append((mark, int((peaks > peaks[key[b]]).sum())))
        for b in chunk:
            r = np.abs(sums[b].correlation())
            peaks = r.max(axis=1)
            order = np.argsort(-peaks, kind="stable")
            best, second = int(order[0]), int(order[1]) if guesses > 1 else int(order[0])
            res = ByteResult(b, best, float(peaks[best]), int(r[best].argmax()), second, float(peaks[second]))
            if key is not None:
                res.key = int(key[b])
                res.rank = hist[b][-1][1]
                res.history = hist[b]
                res.traces_needed = _needed(hist[b])
            results.append(res)
    return CpaResult(n, size, guesses, results)


def _predict(intermediate: Intermediate, inputs: Mapping[str, np.ndarray], byte: int, guesses: int,
             n: int) -> np.ndarray:
    """The predictions of every guess for a batch, (n, guesses); the user's function's
    mistakes are one LoadError naming it."""
    try:
        h = np.stack([np.broadcast_to(np.asarray(intermediate(inputs, byte, g), dtype=np.float64), (n,))
                      for g in range(guesses)], axis=1)
    except Exception as exc:  # noqa: BLE001 - the user's function: its error, in one line
        name = getattr(intermediate, "__name__", "the intermediate")
        raise LoadError(f"{name}(inputs, {byte}, guess) failed: {type(exc).__name__}: {exc}") from None
    return h


def _needed(history: list[tuple[int, int]]) -> int | None:
    """The first checkpoint from which the right value ranks first at every later one."""
    needed = None
    for traces, rank in history:
        if rank == 0:
            if needed is None:
                needed = traces
        else:
            needed = None
    return needed
