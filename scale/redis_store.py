"""Redis store: one call cache shared by every worker of a cluster (an existing server, not ours).

All entries live in one Redis hash (``namespace``), so ``len`` is ``HLEN`` and a batch lookup
is one ``HMGET``. Connection errors and timeouts are retried with exponential backoff (Redis
restarts, failovers); a store that stays unreachable raises :class:`CacheStoreError` naming
the URL rather than silently running without a cache.

Start a server with ``redis-server --port 6379 --save 60 1`` (Debian package ``redis-server``);
point the config's ``cache.path`` at ``redis://HOST:6379/0``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from common.redact import redact_text
from modules.cache_stores.base import CacheStore, CacheStoreError, decode_value

#: Default hash that holds the entries (one per project/code version if you like).
DEFAULT_NAMESPACE = "budget_router:llm_calls"


class RedisStore(CacheStore):
    """Entries of one Redis hash.

    Args:
        url: ``redis://[:password@]host:port/db`` (``rediss://`` for TLS).
        namespace: The hash holding the entries.
        timeout_s: Socket connect/read timeout per attempt.
        retries: Retries of a failed command (exponential backoff, capped at 10 s).
        client: A ready client (tests), instead of connecting to ``url``.

    Raises:
        CacheStoreError: If the ``redis`` package is missing or the server does not answer.
    """

    def __init__(
        self,
        url: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        timeout_s: float = 10.0,
        retries: int = 5,
        client: Any = None,
    ) -> None:
        self.url = redact_text(url)  # what messages and provenance show; the client keeps the real one
        self.namespace = namespace
        if client is None:
            try:
                import redis
                from redis.backoff import ExponentialBackoff
                from redis.retry import Retry
            except ImportError as exc:
                raise CacheStoreError(
                    f"cache URL {url!r} needs the redis client: pip install 'budget-router[ray]' (or redis)"
                ) from exc
            client = redis.Redis.from_url(
                url,
                socket_timeout=timeout_s,
                socket_connect_timeout=timeout_s,
                retry=Retry(ExponentialBackoff(cap=10.0, base=0.1), retries),
                retry_on_error=[redis.ConnectionError, redis.TimeoutError],
            )
        self._client = client
        try:
            self._client.ping()
        except Exception as exc:
            raise CacheStoreError(f"cannot reach the Redis call cache at {url!r}: {exc}") from exc

    def _call(self, what: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:
            raise CacheStoreError(f"Redis call cache {self.url!r}: {what} failed: {exc}") from exc

    def get_many(self, keys: Sequence[str]) -> list[dict[str, Any] | None]:
        """Values of ``keys`` in order, in one ``HMGET``."""
        if not keys:
            return []
        raw = self._call("HMGET", self._client.hmget, self.namespace, list(keys))
        return [None if v is None else decode_value(self.url, k, v) for k, v in zip(keys, raw, strict=True)]

    def put_many(self, items: Iterable[tuple[str, Mapping[str, Any]]]) -> None:
        """Store all pairs in one ``HSET`` (atomic on the server)."""
        mapping = {k: json.dumps(dict(v), sort_keys=True, ensure_ascii=False) for k, v in items}
        if mapping:
            self._call("HSET", self._client.hset, self.namespace, None, None, mapping)

    def put_new_many(self, items: Iterable[tuple[str, Mapping[str, Any]]]) -> list[str]:
        """``HSETNX`` each pair in one transaction (MULTI/EXEC); returns the keys that were absent."""
        pairs = [(k, json.dumps(dict(v), sort_keys=True, ensure_ascii=False)) for k, v in items]
        if not pairs:
            return []

        def run() -> list[Any]:
            pipe = self._client.pipeline(transaction=True)
            for key, value in pairs:
                pipe.hsetnx(self.namespace, key, value)
            return list(pipe.execute())

        flags = self._call("HSETNX", run)
        return [key for (key, _), flag in zip(pairs, flags, strict=True) if int(flag) == 1]

    def __len__(self) -> int:
        return int(self._call("HLEN", self._client.hlen, self.namespace))

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and bool(self._call("HEXISTS", self._client.hexists, self.namespace, key))

    def clear(self) -> None:
        """Delete every entry of this namespace."""
        self._call("DEL", self._client.delete, self.namespace)

    def close(self) -> None:
        """Close the client's connections."""
        self._client.close()
