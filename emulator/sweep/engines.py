"""Where the points run: a process pool on this machine, or a Dask cluster.

Both call ``run_guarded`` on a Task and hand each finished point to ``done`` at once,
in the order they finish, so the caller stores it before the next one arrives: an
interrupted or broken sweep loses only the points still running. Other grids of work
(``pkasim faults``' chunks of faults) give their own ``call``: a picklable function of
one task that returns (result, None) or (None, a one-line error), as run_guarded does.

* ``LocalEngine``: concurrent.futures' ProcessPoolExecutor with ``--jobs`` worker
  processes (forkserver start: the model's modules are imported once, not per
  worker). The workers ignore SIGINT, so Ctrl-C reaches the sweep alone, which
  terminates them and keeps what finished. A worker that dies (killed, out of
  memory) breaks the pool: the finished points are kept, a new pool runs the rest.
* ``DaskEngine``: dask.distributed's Client on ``--scheduler ADDR``. The scheduler
  places the points and reruns those whose worker was lost; pkasim adds no
  scheduler, queue or RPC of its own.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from pkasim.base.errors import EXIT_UNAVAILABLE, PkasimError
from pkasim.base.extras import need
from pkasim.sweep.point import Task, run_point

log = logging.getLogger("pkasim.sweep")
MAX_POOL_RESTARTS = 3  # a pool broken more often than this means points that kill their worker

Done = Callable[[str, "dict[str, Any] | None", "str | None"], None]  # (task id, result, error)


class SchedulerUnavailable(PkasimError):
    """``--scheduler ADDR`` names no Dask scheduler that answers."""

    exit_code = EXIT_UNAVAILABLE


def run_guarded(task: Task) -> tuple[dict[str, Any] | None, str | None]:
    """(result, None), or (None, the one-line error) for a point that cannot run: a
    failed point is a row with its error, not a lost sweep."""
    try:
        return run_point(task), None
    except PkasimError as exc:
        return None, str(exc)
    except MemoryError:
        return None, "out of host memory"
    except Exception as exc:  # noqa: BLE001 - a bug in one point is reported with it, the rest go on
        return None, f"internal error: {type(exc).__name__}: {exc}"


def cores() -> int:
    """The cores this process may run on (its affinity mask, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class LocalEngine:
    name = "local"

    def __init__(self, jobs: int | None = None) -> None:
        self.jobs = jobs or cores()
        self.workers: list[int] = []  # the pids of the current pool (the tests kill one)

    def run(self, tasks: Sequence[tuple[str, Any]], done: Done, call: Callable[[Any], Any] = run_guarded,
            preload: Sequence[str] = ("pkasim.sweep.point",)) -> None:
        pending = dict(tasks)
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(list(preload))
        restarts = 0
        while pending:
            pool = ProcessPoolExecutor(max_workers=min(self.jobs, len(pending)), mp_context=context,
                                       initializer=_ignore_sigint)
            try:
                futures = {pool.submit(call, task): tid for tid, task in pending.items()}
                self.workers = [p.pid for p in getattr(pool, "_processes", {}).values()]
                for fut in as_completed(futures):
                    try:
                        result, error = fut.result()
                    except BrokenProcessPool:
                        continue  # its worker died: it stays pending
                    tid = futures[fut]
                    pending.pop(tid)
                    done(tid, result, error)
            except BaseException:
                for proc in list(getattr(pool, "_processes", {}).values()):
                    proc.terminate()
                pool.shutdown(wait=False, cancel_futures=True)
                raise
            pool.shutdown(wait=True)
            if pending:
                restarts += 1
                if restarts > MAX_POOL_RESTARTS:
                    for tid in list(pending):
                        done(tid, None, f"its worker process died {restarts} times")
                    return
                log.warning("a worker process died; %d unfinished point(s) go to a new pool", len(pending))


class DaskEngine:
    name = "dask"

    def __init__(self, address: str, timeout: float = 10.0) -> None:
        need("distributed", "dask", "pkasim sweep --engine dask")
        from distributed import Client

        self.address = address
        try:
            self.client = Client(address, timeout=timeout)
        except (OSError, TimeoutError, ValueError) as exc:
            raise SchedulerUnavailable(f"--scheduler {address}: no Dask scheduler answers there "
                                       f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
                                       ) from None

    def run(self, tasks: Sequence[tuple[str, Any]], done: Done, call: Callable[[Any], Any] = run_guarded,
            prefix: str = "pkasim-sweep") -> None:
        from distributed import as_completed as dask_completed

        futures = {self.client.submit(call, task, key=f"{prefix}-{tid}", pure=False): tid for tid, task in tasks}
        try:
            for fut in dask_completed(futures):
                tid = futures[fut]
                try:
                    result, error = fut.result()
                except Exception as exc:  # noqa: BLE001 - KilledWorker and the like: the point's error
                    result, error = None, f"Dask: {type(exc).__name__}: {exc}"
                done(tid, result, error)
        except BaseException:
            self.client.cancel(list(futures))
            raise
        finally:
            for fut in futures:
                fut.release()

    def close(self) -> None:
        self.client.close()
