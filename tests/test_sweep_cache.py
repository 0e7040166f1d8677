"""The sweep's result cache (emulator/sweep/cache.py): SQLite, safe under concurrent
writers, never trusting a stored row whose checksum or content does not hold."""

from __future__ import annotations

import multiprocessing
import sqlite3

import pytest

from pkasim.base.errors import OutputError
from pkasim.sweep.cache import ResultCache


def test_a_result_comes_back_as_it_was_stored(tmp_path):
    cache = ResultCache(tmp_path / "c.sqlite")
    cache.put("k", {"cycles": 123, "functions": {"f": {"calls": 1}}})
    assert cache.get("k") == {"cycles": 123, "functions": {"f": {"calls": 1}}}
    assert cache.get("other") is None


def test_a_tampered_row_is_dropped_and_reported_as_a_miss(tmp_path):
    cache = ResultCache(tmp_path / "c.sqlite")
    cache.put("k", {"cycles": 123})
    with sqlite3.connect(tmp_path / "c.sqlite") as db:
        db.execute("UPDATE results SET value = ? WHERE key = 'k'", ('{"cycles": 124}',))
    assert cache.get("k") is None
    assert cache.rejected == 1 and len(cache) == 0


def test_a_row_that_is_not_json_is_a_miss(tmp_path):
    cache = ResultCache(tmp_path / "c.sqlite")
    cache.put("k", {"cycles": 1})
    with sqlite3.connect(tmp_path / "c.sqlite") as db:
        db.execute("UPDATE results SET value = 'not json', checksum = 'x' WHERE key = 'k'")
    assert cache.get("k") is None


def test_a_file_that_is_not_a_database_is_moved_aside(tmp_path):
    path = tmp_path / "c.sqlite"
    path.write_bytes(b"garbage " * 1000)
    cache = ResultCache(path)
    cache.put("k", {"cycles": 1})
    assert cache.get("k") == {"cycles": 1}
    assert len(list(tmp_path.glob("c.sqlite.corrupt-*"))) == 1


def _writer(path: str, n: int) -> None:
    cache = ResultCache(path)
    for i in range(40):
        cache.put(f"{n}-{i}", {"writer": n, "i": i})
    cache.close()


def test_concurrent_writers_lose_nothing(tmp_path):
    path = str(tmp_path / "c.sqlite")
    ResultCache(path).close()
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(path, n)) for n in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    assert [p.exitcode for p in procs] == [0] * 4
    cache = ResultCache(path)
    assert len(cache) == 160
    assert all(cache.get(f"{n}-{i}") == {"writer": n, "i": i} for n in range(4) for i in range(40))


def test_a_cache_that_cannot_be_created_is_exit_74(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(OutputError, match="cannot create the result cache") as err:
        ResultCache(tmp_path / "file" / "c.sqlite")
    assert err.value.exit_code == 74
