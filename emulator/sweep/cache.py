"""The result cache: one SQLite file, one row per point result, keyed by what
determines the result (point.cache_key).

Safe under concurrent writers: WAL journal, every write its own short transaction,
a busy timeout so writers queue instead of failing. Never trusts what it reads: each
row stores the SHA-256 of its key and value, and a row whose checksum or JSON does
not hold is deleted and reported as a miss, so the point is computed again. A file
that is not a SQLite database at all is moved aside (``.corrupt``) and a new one
started.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import stat
import time
from pathlib import Path
from typing import Any

from pkasim.base import userfiles
from pkasim.base.errors import OutputError

log = logging.getLogger("pkasim.sweep")
BUSY_TIMEOUT_MS = 60_000
_SCHEMA = "CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY, value TEXT NOT NULL, checksum TEXT NOT NULL)"


def _checksum(key: str, value: str) -> str:
    return hashlib.sha256(f"{key}\0{value}".encode()).hexdigest()


class ResultCache:
    """``get(key)`` a stored result or None; ``put(key, result)``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.rejected = 0  # rows found bad and dropped in this session
        try:
            self._db = self._open()
        except sqlite3.OperationalError as exc:  # cannot open or create it: not a damaged file
            raise OutputError(f"{self.path}: cannot open the result cache: {exc}") from None
        except OSError as exc:
            raise OutputError(f"{self.path}: cannot create the result cache: {exc.strerror or exc}") from None
        except sqlite3.DatabaseError as exc:
            aside = self.path.with_name(f"{self.path.name}.corrupt-{int(time.time())}")
            log.warning("%s: not a usable result cache (%s); moved to %s, starting a new one", self.path, exc, aside)
            self.path.rename(aside)
            for suffix in ("-wal", "-shm"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)
            self._db = self._open()

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            mode = self.path.stat().st_mode
        except FileNotFoundError:
            mode = None
        if mode is not None and not stat.S_ISREG(mode):  # SQLite would block on a FIFO, write into a device
            raise OutputError(f"{self.path}: cannot open the result cache: {userfiles.kind_of(mode)}, not a file")
        db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        db.execute(_SCHEMA)
        db.execute("SELECT count(*) FROM results").fetchone()  # a damaged file fails here, not mid-sweep
        return db

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            row = self._db.execute("SELECT value, checksum FROM results WHERE key = ?", (key,)).fetchone()
        except sqlite3.DatabaseError as exc:
            log.warning("%s: cannot read entry %s (%s); computing it again", self.path, key[:12], exc)
            self.rejected += 1
            return None
        if row is None:
            return None
        value, checksum = row
        try:
            if not isinstance(value, str) or checksum != _checksum(key, value):
                raise ValueError("checksum does not match")
            result = json.loads(value)
            if not isinstance(result, dict):
                raise ValueError("not a result")
        except ValueError as exc:
            log.warning("%s: bad entry %s (%s); dropped, computing it again", self.path, key[:12], exc)
            self.rejected += 1
            self._drop(key)
            return None
        return result

    def _drop(self, key: str) -> None:
        try:
            self._db.execute("DELETE FROM results WHERE key = ?", (key,))
        except sqlite3.DatabaseError as exc:
            log.warning("%s: cannot drop entry %s (%s)", self.path, key[:12], exc)

    def put(self, key: str, result: dict[str, Any]) -> None:
        value = json.dumps(result, sort_keys=True, separators=(",", ":"))
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute("INSERT OR REPLACE INTO results (key, value, checksum) VALUES (?, ?, ?)",
                                 (key, value, _checksum(key, value)))
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:  # a full disk, a file gone read-only: the sweep cannot keep its results
            raise OutputError(f"{self.path}: cannot write the result cache: {exc}") from None

    def __len__(self) -> int:
        return self._db.execute("SELECT count(*) FROM results").fetchone()[0]

    def close(self) -> None:
        self._db.close()
