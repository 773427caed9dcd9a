"""A persistent call cache (SQLite, WAL mode) and an LLM wrapper that goes through it.

Every LLM call is a pure function of (tags, model, request, code version) at temperature 0,
so repeated epochs and lambda sweeps replay results instead of recomputing them. SQLite in
WAL mode lets several processes (parallel sweeps) read and write the same file safely; a
busy timeout makes writers wait for each other instead of failing.

A replayed result carries the *original* tokens and latency (with ``cached=True``) so the
metered cost of a call does not depend on whether the cache was warm.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from modules.backends.base import GenerationRequest, GenerationResult, LLMBackend

CODE_VERSION = "llm-call-v1"
"""Bump when prompts' meaning or result post-processing changes, to invalidate old entries."""


class CallCache:
    """Key-value store of JSON dicts in one SQLite file, safe across threads and processes.

    Args:
        path: SQLite file (created with its parent directories), or ``":memory:"``.
        busy_timeout_s: How long a writer waits for another process's lock.

    Attributes:
        hits: Number of ``get`` calls that found a value.
        misses: Number of ``get`` calls that did not.
    """

    def __init__(self, path: str | os.PathLike[str], busy_timeout_s: float = 60.0) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        # One connection shared by this object's threads, serialised by a lock: simpler than
        # per-thread connections and fast enough (the LLM call dominates).
        self._conn = sqlite3.connect(self.path, timeout=busy_timeout_s, check_same_thread=False)
        self._lock = threading.Lock()
        with self._lock:
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            if self.path != ":memory:":
                self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = NORMAL")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL)"
            )
            self._conn.commit()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> dict[str, Any] | None:
        """Return the stored dict for ``key``, or None (and count a hit or miss)."""
        with self._lock:
            row = self._conn.execute("SELECT value FROM calls WHERE key = ?", (key,)).fetchone()
            if row is None:
                self.misses += 1
                return None
            self.hits += 1
        return json.loads(row[0])

    def put(self, key: str, value: Mapping[str, Any]) -> None:
        """Store ``value`` (JSON-serialisable) under ``key``, replacing any old value."""
        text = json.dumps(dict(value), sort_keys=True, ensure_ascii=False)
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO calls (key, value, created) VALUES (?, ?, ?)",
                (key, text, time.time()),
            )
            self._conn.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0])

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return self._conn.execute("SELECT 1 FROM calls WHERE key = ?", (key,)).fetchone() is not None

    def stats(self) -> dict[str, int]:
        """Hit/miss counters and the number of stored entries."""
        return {"hits": self.hits, "misses": self.misses, "entries": len(self)}

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> CallCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def call_key(tags: Mapping[str, str], model_id: str, request: GenerationRequest) -> str:
    """The cache key of one call: sha256 over tags, model, request fingerprint and CODE_VERSION."""
    payload = json.dumps(
        {
            "tags": dict(sorted(tags.items())),
            "model": model_id,
            "request": request.fingerprint(),
            "v": CODE_VERSION,
        },
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


_STORED_FIELDS = ("text", "tokens_in", "tokens_out", "latency_s", "model_id", "finish_reason", "truncated")


class CachedLLM:
    """An LLM backend seen through the call cache.

    Args:
        backend: The backend that computes misses.
        cache: The cache, or None to call the backend every time.
    """

    def __init__(self, backend: LLMBackend, cache: CallCache | None = None) -> None:
        self.backend = backend
        self.cache = cache

    @property
    def model_id(self) -> str:
        """The backend's model id."""
        return self.backend.model_id

    @property
    def n_ctx(self) -> int:
        """The backend's context window."""
        return self.backend.n_ctx

    def count_tokens(self, text: str) -> int:
        """Token count of ``text`` for the backend's model."""
        return self.backend.count_tokens(text)

    def generate(
        self, requests: Sequence[GenerationRequest], *, tags: Mapping[str, str]
    ) -> list[GenerationResult]:
        """Answer ``requests`` from the cache where possible; send the misses as one batch.

        Duplicate requests inside one batch are computed once. Failed calls are returned
        but not stored, so a later run retries them.

        Args:
            requests: The generation requests.
            tags: Cache-key tags, e.g. ``{"module": "entity", "tier": "HIGH", "strategy": "model"}``.

        Returns:
            One result per request, in order; replayed ones have ``cached=True``.
        """
        if self.cache is None:
            return self.backend.generate(list(requests))
        keys = [call_key(tags, self.model_id, r) for r in requests]
        results: dict[str, GenerationResult] = {}
        todo: dict[str, GenerationRequest] = {}
        for key, request in zip(keys, requests, strict=True):
            if key in results or key in todo:
                continue
            stored = self.cache.get(key)
            if stored is not None:
                fields = {f: stored[f] for f in _STORED_FIELDS if f in stored}
                results[key] = GenerationResult(**fields, cached=True)
            else:
                todo[key] = request
        if todo:
            fresh = self.backend.generate(list(todo.values()))
            if len(fresh) != len(todo):
                raise RuntimeError(
                    f"backend {type(self.backend).__name__} returned {len(fresh)} results "
                    f"for {len(todo)} requests"
                )
            for key, result in zip(todo, fresh, strict=True):
                results[key] = result
                if result.ok:
                    stored = asdict(result)
                    self.cache.put(key, {f: stored[f] for f in _STORED_FIELDS})
        # A duplicate of a freshly computed request inside the same batch is, for metering,
        # a cache hit: it would have been one with a sequential loop.
        out: list[GenerationResult] = []
        seen: set[str] = set()
        for key in keys:
            res = results[key]
            out.append(replace(res, cached=True) if key in seen and not res.cached and res.ok else res)
            seen.add(key)
        return out
