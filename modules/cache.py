"""A persistent call cache (SQLite in WAL mode, or Redis) and an LLM wrapper that goes through it."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from typing import Any, Protocol

from common.redact import redact_text
from modules.backends.base import GenerationRequest, GenerationResult, LLMBackend
from modules.backends.result_check import (
    STORED_FIELDS,
    InvalidResult,
    as_failure,
    check_result,
    result_from_stored,
)
from modules.cache_stores import CacheStore, open_store, store_scheme

CODE_VERSION = "llm-call-v1"
"""Bump when prompts' meaning or result post-processing changes, to invalidate old entries."""


class CallCache:
    """Key-value store of JSON dicts behind a pluggable store, safe across threads and processes.

    Args:
        path: Where the entries live: a SQLite file (created with its parent directories),
            ``":memory:"``, or a store URL such as ``redis://host:6379/0`` (see
            :func:`modules.cache_stores.open_store`).
        busy_timeout_s: How long a SQLite writer waits for another process's lock.
        store: A ready :class:`~modules.cache_stores.CacheStore` (then ``path`` is only a label).

    Attributes:
        hits: Number of looked-up keys that had a value.
        misses: Number of looked-up keys that did not.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = ":memory:",
        busy_timeout_s: float = 60.0,
        *,
        store: CacheStore | None = None,
    ) -> None:
        if store is None:
            kwargs = {"busy_timeout_s": busy_timeout_s} if store_scheme(path) == "sqlite" else {}
            store = open_store(path, **kwargs)
        self.store = store
        # For messages only: a store URL's credentials (redis://:PW@host) never reach a log line.
        self.path = redact_text(str(store.url if path == ":memory:" and store.url else os.fspath(path)))
        self._count_lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get_many(self, keys: Sequence[str]) -> list[dict[str, Any] | None]:
        """Values of ``keys`` in order (None where absent), counting hits and misses."""
        values = self.store.get_many(list(keys))
        found = sum(v is not None for v in values)
        with self._count_lock:
            self.hits += found
            self.misses += len(values) - found
        return values

    def get(self, key: str) -> dict[str, Any] | None:
        """Return the stored dict for ``key``, or None (and count a hit or miss)."""
        return self.get_many([key])[0]

    def put_many(self, items: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        """Store several ``(key, value)`` pairs in one transaction / round trip."""
        self.store.put_many(items)

    def put(self, key: str, value: Mapping[str, Any]) -> None:
        """Store ``value`` (JSON-serialisable) under ``key``, replacing any old value."""
        self.store.put_many([(key, value)])

    def __len__(self) -> int:
        return len(self.store)

    def __contains__(self, key: object) -> bool:
        return key in self.store

    def stats(self) -> dict[str, int]:
        """Hit/miss counters and the number of stored entries."""
        return {"hits": self.hits, "misses": self.misses, "entries": len(self)}

    def close(self) -> None:
        """Close the store's connection."""
        self.store.close()

    def __enter__(self) -> CallCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def call_key(
    tags: Mapping[str, str],
    model_id: str,
    request: GenerationRequest,
    numerics: Mapping[str, str] | None = None,
) -> str:
    """The cache key of one call: sha256 over tags, model, request fingerprint, numerics and CODE_VERSION.

    Args:
        tags: The call's tags (module, tier, strategy, ...).
        model_id: The backend's model id.
        request: The request.
        numerics: The backend's :meth:`~modules.backends.base.LLMBackend.numerics`; None (the
            reference engine) leaves it out, so keys made before it existed stay valid.
    """
    body: dict[str, Any] = {
        "tags": dict(sorted(tags.items())),
        "model": model_id,
        "request": request.fingerprint(),
        "v": CODE_VERSION,
    }
    if numerics is not None:
        body["numerics"] = dict(sorted(numerics.items()))
    payload = json.dumps(body, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()




class _Flight:
    """A call being computed by one thread, waited for by the others that need the same key."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: GenerationResult | None = None


class CachedLLM:
    """An LLM backend seen through the call cache.

    A call that another thread is computing is not computed twice: the second thread waits for the
    first one's result (a backend that takes concurrent calls, e.g. llama.cpp slots, could otherwise
    compute one key twice, and an engine whose numerics depend on the batch would store one answer
    while the episode that computed the other recorded it: its table would not replay).

    Args:
        backend: The backend that computes misses.
        cache: The cache, or None to call the backend every time.
    """

    def __init__(self, backend: LLMBackend, cache: CallCache | None = None) -> None:
        self.backend = backend
        self.cache = cache
        #: Keys of cache rows that failed the result check (each reported once, then recomputed).
        self.invalid_rows: set[str] = set()
        # Asked once: an engine may hash its weights file to answer.
        self.numerics = backend.numerics()
        self._flights: dict[str, _Flight] = {}
        self._flights_lock = threading.Lock()

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
        but not stored, so a later run retries them. Every result passes
        :func:`modules.backends.result_check.check_result` on the way in: a malformed backend
        result becomes a counted failure, a malformed cache row a miss (reported once, with its
        key). Inside a batching scheduler's worker thread (see :mod:`scale.batching`) the
        requests wait there and go to the backend together with the other episodes' calls.

        Args:
            requests: The generation requests.
            tags: Cache-key tags, e.g. ``{"module": "entity", "tier": "HIGH", "strategy": "model"}``.

        Returns:
            One result per request, in order; replayed ones have ``cached=True``.
        """
        items = [(r, tags) for r in requests]
        batcher = current_batcher()
        if batcher is not None:
            return batcher.submit(self, items)
        return self.generate_tagged(items)

    def generate_tagged(
        self, items: Sequence[tuple[GenerationRequest, Mapping[str, str]]]
    ) -> list[GenerationResult]:
        """Like :meth:`generate`, but every request carries its own tags (one backend batch for all).

        Args:
            items: ``(request, tags)`` pairs.

        Returns:
            One result per pair, in order.
        """
        requests = [r for r, _ in items]
        if self.cache is None:
            return self.backend.generate(requests) if requests else []
        keys = [call_key(tags, self.model_id, r, self.numerics) for r, tags in items]
        results: dict[str, GenerationResult] = {}
        todo: dict[str, GenerationRequest] = {}
        unique = list(dict.fromkeys(keys))
        by_key = dict(zip(keys, requests, strict=True))
        tags_by_key = {key: tags for key, (_, tags) in zip(keys, items, strict=True)}
        for key, stored in zip(unique, self.cache.get_many(unique), strict=True):
            if stored is not None:
                try:
                    results[key] = result_from_stored(stored)
                    continue
                except InvalidResult as exc:
                    self._report_invalid_row(key, exc)
            todo[key] = by_key[key]
        if todo and not self.backend.computes:
            self._replay_miss(todo, tags_by_key)
        with self._flights_lock:
            theirs = {key: self._flights[key] for key in todo if key in self._flights}
            mine = {key: _Flight() for key in todo if key not in theirs}
            self._flights.update(mine)
        todo = {key: todo[key] for key in mine}
        try:
            if todo:
                self._compute(todo, tags_by_key, results)
        finally:
            with self._flights_lock:
                for key, flight in mine.items():
                    flight.result = results.get(key)
                    del self._flights[key]
                    flight.done.set()
        for key, flight in theirs.items():
            flight.done.wait()
            if flight.result is not None and flight.result.ok:
                # A hit for metering: a sequential loop would have found it in the cache.
                results[key] = replace(flight.result, cached=True)
            else:  # the other thread failed: a failure is not stored, so compute it here
                results[key] = self.generate_tagged([(by_key[key], tags_by_key[key])])[0]
        # A duplicate of a freshly computed request inside the same batch is, for metering,
        # a cache hit: it would have been one with a sequential loop.
        out: list[GenerationResult] = []
        seen: set[str] = set()
        for key in keys:
            res = results[key]
            out.append(replace(res, cached=True) if key in seen and not res.cached and res.ok else res)
            seen.add(key)
        return out

    def _compute(
        self,
        todo: Mapping[str, GenerationRequest],
        tags_by_key: Mapping[str, Mapping[str, str]],
        results: dict[str, GenerationResult],
    ) -> None:
        """Compute ``todo`` in one backend batch, store the good results, add all to ``results``."""
        assert self.cache is not None
        fresh = self.backend.generate(list(todo.values()))
        if len(fresh) != len(todo):
            raise RuntimeError(
                f"backend {type(self.backend).__name__} returned {len(fresh)} results "
                f"for {len(todo)} requests"
            )
        good: list[tuple[str, dict[str, Any]]] = []
        for key, result in zip(todo, fresh, strict=True):
            try:
                result = check_result(result)
            except InvalidResult as exc:
                result = as_failure(result, f"{type(self.backend).__name__}: {exc}")
            results[key] = result
            if result.ok:
                stored = asdict(result)
                # The tags ride along (not read back, not part of the result) so that a cache
                # can be broken down by module afterwards, e.g. a sweep's calls per trial.
                value = {f: stored[f] for f in STORED_FIELDS} | {"tags": dict(tags_by_key[key])}
                if self.numerics is not None:  # which engine wrote it, for `cache_pack inspect`
                    value["numerics"] = dict(self.numerics)
                good.append((key, value))
        self.cache.put_many(good)

    def _replay_miss(
        self, todo: Mapping[str, GenerationRequest], tags_by_key: Mapping[str, Mapping[str, str]]
    ) -> None:
        """Stop a replay at the first call the cache lacks, naming it (key, tags, model, numerics)."""
        from modules.backends.replay import ReplayMiss

        key = next(iter(todo))
        tags = ", ".join(f"{k}={v}" for k, v in sorted(tags_by_key[key].items()))
        where = self.cache.path if self.cache is not None else "?"
        raise ReplayMiss(
            f"replay: {len(todo)} call(s) are not in the call cache {where}, e.g. key {key[:16]}… "
            f"({tags}; model {self.model_id}, numerics {self.numerics}). Import the packs that hold them "
            "(python -m modules.cache_pack import PACK...), or run without cache.replay to compute them"
        )

    def _report_invalid_row(self, key: str, exc: InvalidResult) -> None:
        if key in self.invalid_rows:
            return
        self.invalid_rows.add(key)
        where = self.cache.path if self.cache is not None else "?"
        warnings.warn(
            f"call cache {where}: entry {key} is not a valid call result ({exc}); it is computed again "
            "and the new result replaces it",
            stacklevel=4,
        )


class Batcher(Protocol):
    """What :meth:`CachedLLM.generate` hands its calls to inside a batching worker thread."""

    def submit(
        self, llm: CachedLLM, items: Sequence[tuple[GenerationRequest, Mapping[str, str]]]
    ) -> list[GenerationResult]:
        """Queue the calls, wait until their batch ran, return their results in order."""
        ...


_THREAD = threading.local()


def current_batcher() -> Batcher | None:
    """The batcher bound to the calling thread (None outside batched rollouts)."""
    return getattr(_THREAD, "batcher", None)


def bind_batcher(batcher: Batcher | None) -> None:
    """Route this thread's :meth:`CachedLLM.generate` calls through ``batcher`` (None unbinds)."""
    _THREAD.batcher = batcher
