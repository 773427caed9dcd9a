"""The interface of a call-cache store: a persistent map from string keys to JSON dicts."""

from __future__ import annotations

import abc
import json
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any


def decode_value(where: object, key: str, raw: str | bytes) -> dict[str, Any] | None:
    """A stored JSON value, or None (a miss, warned about with its key) when it is not JSON.

    A damaged row must not stop every later run that replays the cache: the call is computed
    again and its result replaces the row.
    """
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        warnings.warn(
            f"call cache {where}: entry {key} is not JSON ({exc}); it is computed again and replaced",
            stacklevel=3,
        )
        return None


class CacheStoreError(RuntimeError):
    """A cache store could not be opened or reached; the message names the store's URL."""


class CacheStore(abc.ABC):
    """A key-value store of JSON-serialisable dicts, safe to share between threads.

    Stores shared between processes (SQLite on one machine, Redis on a cluster) must make
    ``put`` atomic per key: a reader sees either no value or a whole one, never a torn write.
    Values are immutable in practice (the same key always maps to the same call result), so
    a concurrent double ``put`` of one key is harmless.

    Attributes:
        url: Where the store lives (for messages and provenance).
    """

    url: str

    @abc.abstractmethod
    def get_many(self, keys: Sequence[str]) -> list[dict[str, Any] | None]:
        """Values of ``keys`` in order (None where absent), in one round trip where possible."""

    @abc.abstractmethod
    def put_many(self, items: Iterable[tuple[str, Mapping[str, Any]]]) -> None:
        """Store all ``(key, value)`` pairs, replacing old values, in one transaction/round trip."""

    def put_new_many(self, items: Iterable[tuple[str, Mapping[str, Any]]]) -> list[str]:
        """Store the pairs whose key is absent, never replacing a value; returns the keys it stored.

        Stores shared between processes override this with one atomic insert-if-absent, so that a
        value another writer stores in between is kept (this default reads, then writes).
        """
        pairs = list(items)
        existing = self.get_many([k for k, _ in pairs]) if pairs else []
        new = [(k, v) for (k, v), old in zip(pairs, existing, strict=True) if old is None]
        self.put_many(new)
        return [k for k, _ in new]

    @abc.abstractmethod
    def __len__(self) -> int:
        """Number of stored entries."""

    def get(self, key: str) -> dict[str, Any] | None:
        """The value of ``key``, or None."""
        return self.get_many([key])[0]

    def put(self, key: str, value: Mapping[str, Any]) -> None:
        """Store ``value`` under ``key``."""
        self.put_many([(key, value)])

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""
