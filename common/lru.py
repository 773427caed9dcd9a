"""A small thread-safe least-recently-used memo (the in-process caches of local tiers and rankings)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRU(Generic[K, V]):
    """At most ``size`` entries; a lookup or a write makes an entry the most recent, the least recent goes.

    Args:
        size: The most entries kept (> 0).
    """

    def __init__(self, size: int) -> None:
        if size <= 0:
            raise ValueError(f"LRU size must be > 0, got {size}")
        self.size = size
        self._data: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The value of ``key`` (None if absent)."""
        with self._lock:
            val = self._data.get(key)
            if val is not None:
                self._data.move_to_end(key)
            return val

    def put(self, key: K, value: V) -> None:
        """Store ``value`` under ``key``, dropping the least recent entries past ``size``."""
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.size:
                self._data.popitem(last=False)

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)
