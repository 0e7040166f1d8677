"""A sweep from its points to its rows: the cache first, then the engine for the
rest, each finished point stored as it arrives.

Points with the same cache key (two axis values that resolve to the same chip) are
computed once. The rows come back in point order whatever order the engine finished
them in, so the table of a sweep is the same on every engine.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pkasim.base import limits, userfiles
from pkasim.base.errors import LoadError, Terminated
from pkasim.sweep.cache import ResultCache
from pkasim.sweep.grid import Point
from pkasim.sweep.keys import cached_key, sweep_message
from pkasim.sweep.point import Task, cache_key, pkasim_version
from pkasim.sweep.spec import Sweep


@dataclass
class SweepRun:
    rows: list[dict[str, Any]]
    total: int
    cached: int = 0
    computed: int = 0
    failed: int = 0
    interrupted: bool = False
    terminated: bool = False  # ... and by SIGTERM, not Ctrl-C
    errors: list[str] = field(default_factory=list)


def _elf(path: Path, seen: dict[Path, tuple[bytes, str]]) -> tuple[bytes, str]:
    """An image's bytes and SHA-256: a regular file of at most ELF_MAX_BYTES (a FIFO,
    /dev/zero or a huge file is refused, never read whole)."""
    if path not in seen:
        try:
            data = userfiles.read_bounded(path, limits.ELF_MAX_BYTES)
        except FileNotFoundError:
            raise LoadError(f"{path}: not built (run 'make firmware')") from None
        except OSError as exc:
            raise LoadError(f"{path}: cannot read: {exc.strerror or exc}") from None
        if len(data) > limits.ELF_MAX_BYTES:
            raise LoadError(f"{path}: more than {limits.ELF_MAX_BYTES >> 20} MiB; an ELF of at most that is read")
        seen[path] = (data, hashlib.sha256(data).hexdigest())
    return seen[path]


def tasks_for(sweep: Sweep, points: list[Point], cache: ResultCache | None = None) -> list[tuple[Point, Task, str]]:
    """Each point with its Task and cache key (the keys made or read through ``cache``)."""
    elves: dict[Path, tuple[bytes, str]] = {}
    out = []
    for p in points:
        data, sha = _elf(p.image, elves)
        key = cached_key(cache, p.key_bits, p.key) if not p.ecc_job else None
        task = Task(config=p.chip.config, elf=data, elf_sha256=sha, image=p.firmware, key=key,
                    message=sweep_message(key, p.message) if key is not None else 0, profile=bool(sweep.functions),
                    version=pkasim_version(), ecc_job=p.ecc_job)
        out.append((p, task, cache_key(task, p.chip.description)))
    return out


def row(sweep: Sweep, point: Point, key: str, result: dict[str, Any] | None, error: str | None) -> dict[str, Any]:
    """One result row: the point's axis values, then the metrics the sweep asks for."""
    out = point.labels()
    ok = result is not None
    cycles = result["cycles"] if ok else None
    hz = result["clock_hz"] if ok else None
    values = {
        "cycles": cycles,
        "instructions": result["instructions"] if ok else None,
        "ms": cycles / hz * 1e3 if ok else None,
        "ops_per_s": hz / cycles if ok and cycles else None,
        "pka_ops": sum(result["pka_operations"].values()) if ok else None,
        "busy_share": result["pka_busy_cycles"] / cycles if ok and cycles else None,
        "firmware_ms": result.get("firmware_ms") if ok else None,
    }
    for metric in dict.fromkeys(("cycles", *sweep.metrics)):  # cycles always: the rest follows from them
        out[metric] = values[metric]
    functions = (result or {}).get("functions", {})
    for name in sweep.functions:
        f = functions.get(name)
        for kind in ("exclusive", "inclusive", "calls"):
            out[f"{name}.{kind}"] = f[kind] if f else (0 if ok else None)
    out["verified"] = bool(ok and result["verified"])
    wrong = "result does not match cryptography's" if point.ecc_job else "result does not match m^d mod n"
    out["error"] = error or ("" if not ok or result["verified"] else wrong)
    out["cache_key"] = key
    return out


def run_sweep(sweep: Sweep, points: list[Point], engine: Any, cache: ResultCache,
              progress: Callable[[int, bool], None] | None = None) -> SweepRun:
    """Run what the cache does not hold; ``progress(points_done_now, from_cache)``.
    A KeyboardInterrupt ends it early with ``interrupted`` set and the finished rows."""
    work = tasks_for(sweep, points, cache)
    run = SweepRun(rows=[], total=len(points))
    rows: dict[int, dict[str, Any]] = {}
    todo: dict[str, list[Point]] = {}
    tasks: dict[str, Task] = {}
    for p, task, key in work:
        hit = cache.get(key) if key not in todo else None
        if hit is not None:
            rows[p.index] = row(sweep, p, key, hit, None)
            run.cached += 1
            if progress:
                progress(1, True)
        else:
            todo.setdefault(key, []).append(p)
            tasks[key] = task

    def done(key: str, result: dict[str, Any] | None, error: str | None) -> None:
        if result is not None:
            cache.put(key, result)
            run.computed += 1
        for p in todo[key]:
            rows[p.index] = row(sweep, p, key, result, error)
            if error:
                run.errors.append(f"point {p.index}: {error}")
        if progress:
            progress(len(todo[key]), False)

    if tasks:
        try:
            engine.run(list(tasks.items()), done)
        except KeyboardInterrupt as exc:
            run.interrupted = True
            run.terminated = isinstance(exc, Terminated)
    run.rows = [rows[i] for i in sorted(rows)]
    run.failed = sum(1 for r in run.rows if not r["verified"])
    return run
