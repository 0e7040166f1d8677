"""The campaign database: one SQLite file, one row per fault run, so a campaign
stopped by Ctrl-C or a crash picks up where it was, and any fault can be replayed.

Rows are keyed by the setup (``Setup.setup_key``: ELF hash, chip hash, inputs,
oracles, detection, budget, seed, pkasim release) and the fault's key; the setup
itself is stored once (``setups``), with what a replay needs to rebuild it. A fault's
``id`` is what ``pkasim faults --replay ID`` takes. Writes are batched in short
transactions (WAL journal, a busy timeout), so a crash loses only the batch in
flight. ``export`` writes rows as Parquet or CSV (pyarrow, as ``pkasim sweep`` does).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pkasim.base.errors import InputMissingError, OutputError, UsageError

COLUMNS = (("key", "TEXT"), ("model", "TEXT"), ("n", "INTEGER"), ("op", "INTEGER"), ("cycle", "INTEGER"),
           ("pc", "INTEGER"), ("function", "TEXT"), ("file", "TEXT"), ("line", "INTEGER"),
           ("instruction", "TEXT"), ("detail", "TEXT"), ("outcome", "TEXT"), ("exit_code", "INTEGER"),
           ("reason", "TEXT"), ("cycles", "INTEGER"), ("note", "TEXT"), ("second", "TEXT"),
           ("second_reached", "INTEGER"))
NAMES = tuple(c for c, _ in COLUMNS)
BUSY_TIMEOUT_MS = 60_000
SCHEMA = [
    "CREATE TABLE IF NOT EXISTS setups (key TEXT PRIMARY KEY, description TEXT NOT NULL, created REAL)",
    "CREATE TABLE IF NOT EXISTS faults (id INTEGER PRIMARY KEY AUTOINCREMENT, setup TEXT NOT NULL, "
    + ", ".join(f"{c} {t}" for c, t in COLUMNS) + ", UNIQUE(setup, key))",
]


class CampaignDB:
    """``put(setup, rows)``, ``done(setup)``, ``rows(setup, keys)``, ``fault(id)``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
            self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA synchronous = NORMAL")
            for statement in SCHEMA:
                self._db.execute(statement)
            self._db.execute("SELECT count(*) FROM faults").fetchone()
        except sqlite3.DatabaseError as exc:
            raise OutputError(f"{self.path}: cannot use it as a campaign database: {exc}") from None
        except OSError as exc:
            raise OutputError(f"{self.path}: cannot create the campaign database: {exc.strerror or exc}") from None

    def close(self) -> None:
        self._db.close()

    def _write(self, sql: str, rows: Iterable[tuple]) -> None:
        try:
            self._db.execute("BEGIN")
            self._db.executemany(sql, rows)
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            try:
                self._db.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            raise OutputError(f"{self.path}: cannot write the campaign database: {exc}") from None

    def add_setup(self, key: str, description: dict[str, Any]) -> None:
        self._write("INSERT OR IGNORE INTO setups (key, description, created) VALUES (?, ?, ?)",
                    [(key, json.dumps(description, sort_keys=True), time.time())])

    def setup(self, key: str) -> dict[str, Any]:
        row = self._db.execute("SELECT description FROM setups WHERE key = ?", (key,)).fetchone()
        if row is None:
            raise InputMissingError(f"{self.path}: no campaign setup {key[:12]}")
        return json.loads(row[0])

    def put(self, setup: str, rows: list[dict]) -> None:
        """Store finished faults (a fault run again replaces its row, keeping its id)."""
        cols = ", ".join(NAMES)
        marks = ", ".join("?" for _ in NAMES)
        update = ", ".join(f"{c} = excluded.{c}" for c in NAMES if c != "key")
        self._write(f"INSERT INTO faults (setup, {cols}) VALUES (?, {marks}) "
                    f"ON CONFLICT(setup, key) DO UPDATE SET {update}",
                    [(setup, *(_value(r.get(c)) for c in NAMES)) for r in rows])

    def done(self, setup: str) -> dict[str, str]:
        """Fault key -> outcome of every fault stored for ``setup``."""
        return dict(self._db.execute("SELECT key, outcome FROM faults WHERE setup = ?", (setup,)))

    def rows(self, setup: str, keys: Iterable[str]) -> Iterator[dict]:
        """The stored rows of these fault keys, in the order given (with their ids)."""
        batch: list[str] = []
        for key in keys:
            batch.append(key)
            if len(batch) >= 500:
                yield from self._fetch(setup, batch)
                batch = []
        if batch:
            yield from self._fetch(setup, batch)

    def _fetch(self, setup: str, keys: list[str]) -> Iterator[dict]:
        marks = ", ".join("?" for _ in keys)
        found = {}
        for row in self._db.execute(f"SELECT id, {', '.join(NAMES)} FROM faults WHERE setup = ? AND key IN ({marks})",
                                    (setup, *keys)):
            d = dict(zip(("id", *NAMES), row))
            found[d["key"]] = d
        for key in keys:
            if key in found:
                yield found[key]

    def fault(self, fault_id: int) -> tuple[dict, str]:
        """A stored fault by id, and its setup key."""
        row = self._db.execute(f"SELECT setup, id, {', '.join(NAMES)} FROM faults WHERE id = ?",
                               (fault_id,)).fetchone()
        if row is None:
            raise UsageError(f"--replay {fault_id}: no fault with that id in {self.path}")
        return dict(zip(("id", *NAMES), row[1:])), row[0]


def _value(v: Any) -> Any:
    if isinstance(v, bool):
        return int(v)
    return v


def export(rows: Iterable[dict], path: str) -> int:
    """Rows to a Parquet (``.parquet``) or CSV (``.csv``) file; how many were written."""
    import pyarrow as pa

    suffix = Path(path).suffix.lower()
    if suffix not in (".parquet", ".csv"):
        raise UsageError(f"--export {path}: the file name must end in .parquet or .csv")
    columns: dict[str, list] = {c: [] for c in ("id", *NAMES)}
    for row in rows:
        for c in columns:
            columns[c].append(row.get(c))
    types = {"id": pa.int64(), "n": pa.int64(), "op": pa.int64(), "cycle": pa.int64(), "pc": pa.int64(),
             "line": pa.int64(), "exit_code": pa.int64(), "cycles": pa.int64(), "second_reached": pa.int64()}
    table = pa.table({c: pa.array(v, type=types.get(c, pa.string())) for c, v in columns.items()})
    try:
        if suffix == ".parquet":
            import pyarrow.parquet as pq

            pq.write_table(table, path)
        else:
            import pyarrow.csv as pcsv

            pcsv.write_csv(table, path)
    except OSError as exc:
        raise OutputError(f"{path}: cannot write: {exc}") from None
    return table.num_rows
