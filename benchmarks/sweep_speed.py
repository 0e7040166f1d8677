"""How fast `pkasim sweep` runs a grid: --jobs 2 over --jobs 1, and what the Dask
engine adds per point.

The grid is the shipped sweep (configs/sweeps/rsa4096-10ops.yaml) cut to RSA-4096 on
xrsa_opt.elf, two widths, both operand widths and MESSAGES messages (16 points by
default). Each engine runs it into a fresh result cache (the random keys are made
once, before any timing; the fork server and the Dask workers import the model
before it too), pool start-up included:

* local --jobs 1 and --jobs 2, alternating, ROUNDS rounds; the speed-up is the
  median of the per-round ratios (issue #14's goal: >= 1.8x on 2 cores);
* Dask: a LocalCluster of 2 single-thread worker processes (started before the
  timing), same grid; overhead per point = (Dask wall - local --jobs 2 wall) / points.

Timing belongs here, never in tests: the machine is shared, so only ratios measured
in one run mean much.

    .venv/bin/python benchmarks/sweep_speed.py [--messages M] [--rounds R]
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing
import multiprocessing.forkserver
import os
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from pkasim.sweep.cache import ResultCache  # noqa: E402
from pkasim.sweep.engines import DaskEngine, LocalEngine  # noqa: E402
from pkasim.sweep.grid import expand  # noqa: E402
from pkasim.sweep.keys import cached_key  # noqa: E402
from pkasim.sweep.runner import run_sweep  # noqa: E402
from pkasim.sweep.spec import ChipAxis, read_sweep  # noqa: E402


def grid(messages: int):
    sweep = read_sweep(ROOT / "configs" / "sweeps" / "rsa4096-10ops.yaml")
    return dataclasses.replace(sweep, firmware=("xrsa_opt.elf",), key_bits=(4096,), keys=1, messages=messages,
                               functions=(), chip_axes=(ChipAxis("pka.maxlen", (2048, 4096)),
                                                        ChipAxis("pka.digit_bits", (32, 64))))


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a live process (/proc/PID/stat fields 14 and 15)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(sweep, engine, folder: Path, name: str) -> tuple[float, float]:
    """Wall seconds of the sweep and, for the local engine, its workers' CPU seconds
    (read as each point finishes, while the workers are alive)."""
    cache = ResultCache(folder / f"{name}.sqlite")
    cached_key(cache, 4096, 0)  # the key: made once per process (lru_cache), stored in this cache
    points = expand(sweep)
    cpu: dict[int, float] = {}

    def sample(n: int, cached: bool) -> None:
        for pid in getattr(engine, "workers", []):
            cpu[pid] = max(cpu.get(pid, 0.0), _cpu_seconds(pid))

    start = time.perf_counter()
    run = run_sweep(sweep, points, engine, cache, sample)
    wall = time.perf_counter() - start
    assert run.computed == len(points) and run.failed == 0, run.errors
    cache.close()
    return wall, sum(cpu.values())


def _warm() -> None:
    import pkasim.sweep.point  # noqa: F401


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    sweep = grid(args.messages)
    n = len(expand(sweep))
    print(f"load average at the start: {os.getloadavg()[0]:.1f} (2 cores, shared)")
    print(f"grid: {n} points (RSA-4096, xrsa_opt.elf, maxlen 2048/4096, digit 32/64, {args.messages} messages)")
    t0 = time.perf_counter()
    cached_key(None, 4096, 0)
    print(f"making the RSA-4096 key (once): {time.perf_counter() - t0:.1f} s")
    context = multiprocessing.get_context("forkserver")  # as LocalEngine does: the model imported once,
    context.set_forkserver_preload(["pkasim.sweep.point"])  # by the fork server, started here (untimed)
    multiprocessing.forkserver.ensure_running()
    ones, twos, ratios, cpus = [], [], [], {1: [], 2: []}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for r in range(args.rounds):
            one, cpu1 = timed(sweep, LocalEngine(1), folder, f"j1-{r}")
            two, cpu2 = timed(sweep, LocalEngine(2), folder, f"j2-{r}")
            ones.append(one)
            twos.append(two)
            ratios.append(one / two)
            cpus[1].append(cpu1)
            cpus[2].append(cpu2)
            print(f"round {r + 1}: --jobs 1 {one:.2f} s ({cpu1 / one:.2f} cores busy), --jobs 2 {two:.2f} s "
                  f"({cpu2 / two:.2f} cores busy), speed-up {one / two:.2f}x")
        from distributed import LocalCluster

        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
            engine = DaskEngine(cluster.scheduler_address)
            engine.client.run(_warm)  # the workers import the model before the timing, as the fork server did
            dask = [timed(sweep, engine, folder, f"dask-{r}")[0] for r in range(args.rounds)]
            engine.close()
    one, two, dk = statistics.median(ones), statistics.median(twos), statistics.median(dask)
    c1, c2 = statistics.median(cpus[1]), statistics.median(cpus[2])
    print(f"local --jobs 1: {one:.2f} s ({one / n * 1e3:.0f} ms per point; workers' CPU {c1 / n * 1e3:.0f} ms "
          "per point)")
    print(f"local --jobs 2: {two:.2f} s ({two / n * 1e3:.0f} ms per point; workers' CPU {c2 / n * 1e3:.0f} ms "
          "per point)")
    print(f"speed-up of --jobs 2 over --jobs 1: {statistics.median(ratios):.2f}x (median of {args.rounds} rounds; "
          "goal >= 1.8x)")
    print(f"CPU the sweep got: {c1 / one:.2f} cores with --jobs 1, {c2 / two:.2f} with --jobs 2 (a shared "
          "machine with autogroup scheduling gives each session its share, however many processes it runs)")
    print(f"Dask, 2 worker processes: {dk:.2f} s; overhead per point over local --jobs 2: "
          f"{(dk - two) / n * 1e3:+.0f} ms")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
