"""Key-value stores behind :class:`modules.cache.CallCache`, opened by URL."""

from __future__ import annotations

import importlib
import os
from typing import Any

from modules.cache_stores.base import CacheStore, CacheStoreError
from modules.cache_stores.sqlite_store import SQLiteStore

#: URL scheme -> ``"module:Class"`` (imported on first use, so redis is optional).
STORES: dict[str, str] = {
    "sqlite": "modules.cache_stores.sqlite_store:SQLiteStore",
    "redis": "scale.redis_store:RedisStore",
    "rediss": "scale.redis_store:RedisStore",
}


def store_scheme(url: str | os.PathLike[str]) -> str:
    """The registry scheme of ``url``: ``"sqlite"`` for plain paths and ``":memory:"``."""
    text = os.fspath(url)
    if "://" not in text:
        return "sqlite"
    return text.split("://", 1)[0].lower()


def open_store(url: str | os.PathLike[str], **kwargs: Any) -> CacheStore:
    """Open the store that ``url`` names.

    Args:
        url: A SQLite path (``calls.sqlite``, ``sqlite:///abs/calls.sqlite``, ``":memory:"``) or a
            Redis URL (``redis://localhost:6379/0``).
        **kwargs: Passed to the store's constructor (e.g. ``busy_timeout_s`` for SQLite,
            ``namespace`` for Redis).

    Raises:
        CacheStoreError: For an unknown scheme or a store that cannot be opened.
    """
    scheme = store_scheme(url)
    if scheme not in STORES:
        raise CacheStoreError(
            f"cache URL {os.fspath(url)!r}: unknown scheme {scheme!r}; use one of {sorted(STORES)}"
        )
    module_name, cls_name = STORES[scheme].split(":")
    cls = getattr(importlib.import_module(module_name), cls_name)
    text = os.fspath(url)
    if scheme == "sqlite" and text.startswith("sqlite://"):
        text = text[len("sqlite://") :]
    return cls(text, **kwargs)


__all__ = ["STORES", "CacheStore", "CacheStoreError", "SQLiteStore", "open_store", "store_scheme"]
