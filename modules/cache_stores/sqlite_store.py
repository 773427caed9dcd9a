"""SQLite store (WAL mode): one file shared safely by the threads and processes of one machine."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from modules.cache_stores.base import CacheStore, CacheStoreError, decode_value

#: SQLite limits the number of ``?`` parameters of one statement; batch lookups stay below it.
_MAX_PARAMS = 500


class SQLiteStore(CacheStore):
    """The ``calls`` table of one SQLite file.

    Args:
        path: SQLite file (created with its parent directories), or ``":memory:"``.
        busy_timeout_s: How long a writer waits for another process's lock.
    """

    def __init__(self, path: str | os.PathLike[str], busy_timeout_s: float = 60.0) -> None:
        self.path = os.fspath(path)
        self.url = self.path
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            # One connection shared by this object's threads, serialised by a lock: simpler
            # than per-thread connections and fast enough (the LLM call dominates).
            self._conn = sqlite3.connect(self.path, timeout=busy_timeout_s, check_same_thread=False)
        except sqlite3.Error as exc:
            raise CacheStoreError(f"cannot open the SQLite call cache {self.path!r}: {exc}") from exc
        self._lock = threading.Lock()
        with self._lock, self._errors():
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            if self.path != ":memory:":
                self._set_wal(busy_timeout_s)
            self._conn.execute("PRAGMA synchronous = NORMAL")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL)"
            )
            self._conn.commit()

    def _set_wal(self, busy_timeout_s: float) -> None:
        """Switch a file cache to WAL mode, retrying while another process holds the lock.

        Two processes opening one fresh cache at once (parallel training workers, the CI's
        concurrency test on a loaded machine) can both ask for the journal-mode change; SQLite may
        answer SQLITE_BUSY without calling its busy handler, so the wait is done here.
        """
        deadline = time.monotonic() + busy_timeout_s
        delay = 0.01
        while True:
            try:
                self._conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() + delay > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.5)

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        """Turn SQLite errors into one :class:`CacheStoreError` naming the file and the fix.

        A damaged page may only be read mid-training, deep inside an episode; the message must
        still say which file is broken and what to do about it.
        """
        try:
            yield
        except sqlite3.OperationalError as exc:  # locked, I/O error, read-only: not corruption
            raise CacheStoreError(f"cannot use the SQLite call cache {self.path}: {exc}") from exc
        except sqlite3.DatabaseError as exc:  # "file is not a database", "disk image is malformed"
            raise CacheStoreError(
                f"the SQLite call cache {self.path} is corrupt ({exc}); delete the cache at {self.path} "
                f"(with its -wal and -shm files, if any) and run again: the cached calls are recomputed"
            ) from exc

    def get_many(self, keys: Sequence[str]) -> list[dict[str, Any] | None]:
        """Values of ``keys`` in order (None where absent)."""
        found: dict[str, str] = {}
        unique = list(dict.fromkeys(keys))
        with self._lock, self._errors():
            for i in range(0, len(unique), _MAX_PARAMS):
                chunk = unique[i : i + _MAX_PARAMS]
                marks = ",".join("?" * len(chunk))
                rows = self._conn.execute(f"SELECT key, value FROM calls WHERE key IN ({marks})", chunk)
                found.update(rows.fetchall())
        return [decode_value(self.path, k, found[k]) if k in found else None for k in keys]

    @staticmethod
    def _rows(items: Iterable[tuple[str, Mapping[str, Any]]]) -> list[tuple[str, str, float]]:
        now = time.time()
        return [(k, json.dumps(dict(v), sort_keys=True, ensure_ascii=False), now) for k, v in items]

    def put_many(self, items: Iterable[tuple[str, Mapping[str, Any]]]) -> None:
        """Store all pairs in one transaction."""
        rows = self._rows(items)
        if not rows:
            return
        with self._lock, self._errors():
            self._conn.executemany(
                "INSERT OR REPLACE INTO calls (key, value, created) VALUES (?, ?, ?)", rows
            )
            self._conn.commit()

    def put_new_many(self, items: Iterable[tuple[str, Mapping[str, Any]]]) -> list[str]:
        """Insert the pairs whose key is absent (``INSERT OR IGNORE``) in one transaction; returns them."""
        rows = self._rows(items)
        stored: list[str] = []
        if not rows:
            return stored
        with self._lock, self._errors():
            for row in rows:
                cursor = self._conn.execute(
                    "INSERT OR IGNORE INTO calls (key, value, created) VALUES (?, ?, ?)", row
                )
                if cursor.rowcount == 1:
                    stored.append(row[0])
            self._conn.commit()
        return stored

    def __len__(self) -> int:
        with self._lock, self._errors():
            return int(self._conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0])

    def __contains__(self, key: object) -> bool:
        with self._lock, self._errors():
            return self._conn.execute("SELECT 1 FROM calls WHERE key = ?", (key,)).fetchone() is not None

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._conn.close()
