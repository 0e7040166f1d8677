"""Running a sweep (emulator/sweep/runner.py, engines.py): the shipped sweep on a
reduced grid (RSA-2048 only, two widths, both operand widths, two messages), on local
processes and on a Dask LocalCluster with two worker processes.

Done when (issue #14): both engines give identical tables; a second run computes
nothing; an extended grid computes only its new points; a killed worker loses no
finished point and the sweep completes; an interrupted sweep keeps what finished.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pkasim.base.errors import Terminated
from pkasim.sweep.cache import ResultCache
from pkasim.sweep.engines import DaskEngine, LocalEngine
from pkasim.sweep.grid import expand
from pkasim.sweep.results import write_tables
from pkasim.sweep.runner import run_sweep
from pkasim.sweep.spec import ChipAxis, read_sweep

SHIPPED = Path(__file__).resolve().parent.parent / "configs" / "sweeps" / "rsa4096-10ops.yaml"


def reduced(widths: tuple[int, ...] = (32, 64), messages: int = 2):
    """The shipped sweep cut to RSA-2048 on one image: 2 x len(widths) x messages points."""
    sweep = read_sweep(SHIPPED)
    return dataclasses.replace(sweep, firmware=("xrsa_opt.elf",), key_bits=(2048,), keys=1, messages=messages,
                               chip_axes=(ChipAxis("pka.maxlen", (2048, 4096)), ChipAxis("pka.digit_bits", widths)))


@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as c:
        yield c


@pytest.fixture(scope="module")
def local_table(build_dir, tmp_path_factory):
    """The reduced sweep run once on local processes, and its cache."""
    tmp = tmp_path_factory.mktemp("local")
    sweep = reduced()
    run = run_sweep(sweep, expand(sweep), LocalEngine(2), ResultCache(tmp / "c.sqlite"))
    write_tables(run.rows, tmp)
    return run, tmp


def test_every_point_runs_and_matches_python_integers(local_table):
    run, _ = local_table
    assert run.total == 8 and run.computed == 8 and run.failed == 0
    assert all(r["verified"] and r["error"] == "" for r in run.rows)
    assert [r["point"] for r in run.rows] == list(range(8))


def test_per_function_cycles_come_from_the_profiler(local_table):
    run, _ = local_table
    for r in run.rows:  # the shipped sweep asks for pka_run and crt_exp
        assert r["pka_run.calls"] > 0 and 0 < r["pka_run.exclusive"] <= r["pka_run.inclusive"]
        assert r["crt_exp.calls"] == 2 and r["crt_exp.inclusive"] <= r["cycles"]


def test_the_default_chip_point_gives_the_bench_figure(local_table, config, build_dir):
    """maxlen 2048 with 32-bit digits is the default chip; the firmware is constant-time,
    so the sweep's random keys take the cycles of the bench's fixed key."""
    from pkasim.rsa.bench import JOBS, run_job

    bench = run_job(config, next(j for j in JOBS if j.key == "rsa2048-pka"), build_dir)
    run, _ = local_table
    point = [r for r in run.rows if r["pka.maxlen"] == 2048 and r["pka.digit_bits"] == 32]
    assert {r["cycles"] for r in point} == {bench.cycles}
    assert {r["pka_ops"] for r in point} == {sum(bench.pka_operations.values())}


def test_a_wider_digit_takes_fewer_cycles(local_table):
    run, _ = local_table
    by = {(r["pka.maxlen"], r["pka.digit_bits"], r["message"]): r["cycles"] for r in run.rows}
    assert all(by[(m, 64, i)] < by[(m, 32, i)] for m in (2048, 4096) for i in (0, 1))


def test_a_second_run_computes_no_point(local_table):
    _, tmp = local_table
    sweep = reduced()
    again = run_sweep(sweep, expand(sweep), LocalEngine(2), ResultCache(tmp / "c.sqlite"))
    assert again.computed == 0 and again.cached == 8
    assert again.rows == local_table[0].rows


def test_a_damaged_cache_entry_is_computed_again(local_table):
    _, tmp = local_table
    with sqlite3.connect(tmp / "c.sqlite") as db:
        db.execute("UPDATE results SET value = replace(value, '\"cycles\":', '\"cycles\":1') WHERE key = ?",
                   (local_table[0].rows[0]["cache_key"],))
    sweep = reduced()
    again = run_sweep(sweep, expand(sweep), LocalEngine(2), ResultCache(tmp / "c.sqlite"))
    assert again.computed == 1 and again.cached == 7
    assert again.rows == local_table[0].rows


def test_an_extended_grid_computes_only_its_new_points(local_table):
    _, tmp = local_table
    sweep = reduced(widths=(32, 64, 128))
    more = run_sweep(sweep, expand(sweep), LocalEngine(2), ResultCache(tmp / "c.sqlite"))
    assert more.computed == 4 and more.cached == 8 and more.failed == 0


def test_the_command_writes_tables_summary_and_plots_from_the_cache(local_table, tmp_path, capsys):
    from pkasim.cli.main import main

    path = tmp_path / "s.yaml"
    path.write_text(f"chip: {SHIPPED.parent.parent / 'ciu98320b.yaml'}\n"
                    "axes: {firmware: [xrsa_opt.elf], key_bits: [2048], messages: 2,\n"
                    "       chip: {pka.maxlen: [2048, 4096], pka.digit_bits: [32, 64]}}\n"
                    "functions: [pka_run, crt_exp]\ngoal: {key_bits: 2048, ops_per_s: 30}\n")
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--cache", str(local_table[1] / "c.sqlite"), "--out", str(out)]) == 0
    assert "8 points: 0 computed, 8 from the cache, 0 failed" in capsys.readouterr().err
    assert pq.read_table(out / "results.parquet").num_rows == 8
    assert (out / "results.csv").read_text().count("\n") == 9
    summary = (out / "summary.md").read_text()
    assert "pka.maxlen 2048, algorithm CRT: **pka.digit_bits = 64**" in summary
    assert (out / "ops_per_s.png").stat().st_size
    assert not (out / "ratio_4096_2048.png").exists()  # one key size: no ratio to draw


def test_dask_gives_the_same_table_as_local_processes(local_table, cluster, tmp_path):
    sweep = reduced()
    engine = DaskEngine(cluster.scheduler_address)
    try:
        run = run_sweep(sweep, expand(sweep), engine, ResultCache(tmp_path / "c.sqlite"))
    finally:
        engine.close()
    assert run.computed == 8
    write_tables(run.rows, tmp_path)
    assert pq.read_table(tmp_path / "results.parquet").equals(pq.read_table(local_table[1] / "results.parquet"))
    assert (tmp_path / "results.csv").read_bytes() == (local_table[1] / "results.csv").read_bytes()


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_the_command_runs_on_a_dask_scheduler(cluster, tmp_path, capsys):
    from pkasim.cli.main import main

    path = tmp_path / "s.yaml"
    path.write_text(f"chip: {SHIPPED.parent.parent / 'ciu98320b.yaml'}\n"
                    "axes: {firmware: [xrsa_opt.elf], key_bits: [2048], chip: {pka.digit_bits: [32, 64]}}\n")
    argv = ["sweep", str(path), "--engine", "dask", "--scheduler", cluster.scheduler_address,
            "--cache", str(tmp_path / "c.sqlite"), "--out", str(tmp_path / "out"), "--no-plots"]
    assert main(argv) == 0
    assert "2 points: 2 computed, 0 from the cache, 0 failed" in capsys.readouterr().err
    assert pq.read_table(tmp_path / "out" / "results.parquet").column("verified").to_pylist() == [True, True]


def test_a_killed_local_worker_loses_no_point(local_table, tmp_path):
    sweep = reduced(messages=3)
    engine = LocalEngine(2)
    killed = []
    log = _Lines()
    logging.getLogger("pkasim.sweep").addHandler(log)

    def kill_one(n: int, cached: bool) -> None:
        if not killed:
            killed.append(engine.workers[0])
            os.kill(engine.workers[0], signal.SIGKILL)

    try:
        run = run_sweep(sweep, expand(sweep), engine, ResultCache(tmp_path / "c.sqlite"), kill_one)
    finally:
        logging.getLogger("pkasim.sweep").removeHandler(log)
    assert killed and run.failed == 0 and len(run.rows) == 12
    assert all(r["verified"] for r in run.rows)
    assert any("a worker process died" in line for line in log.lines)  # the pool broke, a new one ran the rest


def test_a_killed_dask_worker_loses_no_point(cluster, tmp_path):
    sweep = reduced(messages=3)
    engine = DaskEngine(cluster.scheduler_address)
    pids = list(engine.client.run(os.getpid).values())
    killed = []

    def kill_one(n: int, cached: bool) -> None:
        if not killed:
            killed.append(pids[0])
            os.kill(pids[0], signal.SIGKILL)

    try:
        run = run_sweep(sweep, expand(sweep), engine, ResultCache(tmp_path / "c.sqlite"), kill_one)
    finally:
        engine.close()
    assert killed and run.failed == 0 and run.computed == 12
    assert all(r["verified"] for r in run.rows)


def test_an_interrupted_sweep_keeps_what_finished(tmp_path, build_dir):
    sweep = reduced()
    stop = []

    def interrupt(n: int, cached: bool) -> None:
        stop.append(n)
        if len(stop) == 2:
            raise KeyboardInterrupt

    run = run_sweep(sweep, expand(sweep), LocalEngine(2), ResultCache(tmp_path / "c.sqlite"), interrupt)
    assert run.interrupted and len(run.rows) == 2 and run.computed == 2
    rest = run_sweep(sweep, expand(sweep), LocalEngine(2), ResultCache(tmp_path / "c.sqlite"))
    assert rest.cached == 2 and rest.computed == 6


def test_a_terminated_sweep_keeps_what_finished_and_says_terminated(tmp_path, build_dir):
    """SIGTERM's exception (the command line raises Terminated) stops a sweep as Ctrl-C
    does; the command then exits 143 instead of 130."""
    sweep = reduced()
    stop = []

    def terminate(n: int, cached: bool) -> None:
        stop.append(n)
        if len(stop) == 2:
            raise Terminated

    run = run_sweep(sweep, expand(sweep), LocalEngine(2), ResultCache(tmp_path / "c.sqlite"), terminate)
    assert run.interrupted and run.terminated and len(run.rows) == 2


def _sigint_default() -> None:
    """A test run started in the background of a non-interactive shell inherits SIGINT
    ignored (and Python then never raises KeyboardInterrupt): the command under test
    gets the terminal's default, as a user's does."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_ends_the_command_with_130_and_the_finished_rows(tmp_path, build_dir):
    """A real SIGINT to `pkasim sweep` (the terminal's Ctrl-C reaches the whole group).
    The grid is far longer than the time to the first finished row (400 points; an
    RSA-2048 point takes tens of milliseconds), so the signal comes mid-sweep."""
    cache = tmp_path / "c.sqlite"
    path = tmp_path / "s.yaml"
    path.write_text(f"chip: {SHIPPED.parent.parent / 'ciu98320b.yaml'}\n"
                    "axes: {firmware: [xrsa_opt.elf], key_bits: [2048], messages: 200, chip: {pka.digit_bits: [32, 64]}}\n")
    proc = subprocess.Popen([sys.executable, "-m", "pkasim.cli.main", "sweep", str(path), "--jobs", "2",
                             "--cache", str(cache), "--out", str(tmp_path / "out"), "--no-plots"],
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=_sigint_default)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
        try:
            with sqlite3.connect(cache) as db:
                if db.execute("SELECT count(*) FROM results WHERE key NOT LIKE 'pkasim.sweep.key/%'").fetchone()[0]:
                    break
        except sqlite3.Error:
            continue
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted:" in err and "Traceback" not in err
    rows = pq.read_table(tmp_path / "out" / "results.parquet").to_pylist()
    assert 0 < len(rows) < 400 and all(r["verified"] for r in rows)


def test_a_worker_with_another_pkasim_refuses_the_point(local_table):
    from pkasim.sweep.engines import run_guarded
    from pkasim.sweep.runner import tasks_for

    sweep = reduced()
    _, task, _ = tasks_for(sweep, expand(sweep)[:1], ResultCache(local_table[1] / "c.sqlite"))[0]
    result, error = run_guarded(dataclasses.replace(task, version="0.0.1+elsewhere"))
    assert result is None and "the sweep expects 0.0.1+elsewhere" in error
