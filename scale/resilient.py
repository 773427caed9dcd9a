"""Ride out backend outages: pause and retry, and stop cleanly instead of degrading results.

A backend returns failed calls as ``finish_reason="error"`` results; the modules then fall
back to degraded outputs, which is right for a *bad request* but wrong for an *outage* (a
server restarting, a dropped network): a training run would learn from rewards of fallback
outputs, and a sweep would record numbers that depend on when the server hiccupped.

:class:`ResilientBackend` wraps any backend. Calls that failed for a transient reason
(connection refused/reset, timeouts, HTTP 429/5xx, "gave up after N attempts") are retried
with exponential backoff while the outage lasts, up to ``max_outage_s``; then it raises
:class:`BackendOutage`, so the run stops (and resumes from its last checkpoint later) rather
than continuing on fallbacks. Permanent errors (HTTP 400, prompt too long) come back at
once as before. Nothing failed is ever stored: :class:`modules.cache.CachedLLM` caches only
``ok`` results, and an outage raises before anything of that batch is stored.

Config: ``backend: {name: resilient, inner: {name: openai, model: ..., base_url: ...},
max_outage_s: 600}``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from modules.backends.base import BackendError, GenerationRequest, GenerationResult, LLMBackend

#: Error messages that mean "the service is unavailable", not "this request is bad".
TRANSIENT_ERROR = re.compile(
    r"connection|timed out|timeout|gave up after|HTTP (429|5\d\d)|unavailable|refused|reset by peer|"
    r"remote end closed|broken pipe|max retries",
    re.IGNORECASE,
)


class BackendOutage(BackendError):
    """The backend stayed unavailable longer than ``max_outage_s``; nothing was cached."""


def is_transient(result: GenerationResult) -> bool:
    """True if ``result`` failed in a way that waiting can fix (see :data:`TRANSIENT_ERROR`)."""
    return not result.ok and bool(TRANSIENT_ERROR.search(result.error or ""))


class ResilientBackend(LLMBackend):
    """Retry transient failures of ``inner`` during an outage of up to ``max_outage_s`` seconds.

    Args:
        inner: The wrapped backend, or its config (``{"name": "openai", ...}``, built with
            :func:`modules.backends.get_backend`).
        max_outage_s: How long to keep retrying one batch before raising :class:`BackendOutage`.
        backoff_s: First pause; doubles after every failed retry.
        max_backoff_s: Longest single pause.
        transient: Predicate deciding which failed results are worth retrying.
        sleep: The pause function (tests pass a fake clock's).

    Attributes:
        retries: Retry rounds made so far.
        outage_s: Total seconds spent waiting for the backend.
    """

    def __init__(
        self,
        inner: LLMBackend | Mapping[str, Any],
        *,
        max_outage_s: float = 600.0,
        backoff_s: float = 1.0,
        max_backoff_s: float = 60.0,
        transient: Callable[[GenerationResult], bool] = is_transient,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if max_outage_s < 0 or backoff_s <= 0 or max_backoff_s <= 0:
            raise ValueError(
                "need max_outage_s >= 0, backoff_s > 0, max_backoff_s > 0; "
                f"got {max_outage_s}, {backoff_s}, {max_backoff_s}"
            )
        if isinstance(inner, Mapping):
            from modules.backends import get_backend

            spec = dict(inner)
            if "name" not in spec:
                raise BackendError(f"resilient backend: inner config {spec!r} lacks 'name'")
            inner = get_backend(spec.pop("name"), **spec)
        self.inner = inner
        self.model_id = inner.model_id
        self.n_ctx = inner.n_ctx
        self.max_outage_s = max_outage_s
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.transient = transient
        self._sleep = sleep
        self.retries = 0
        self.outage_s = 0.0

    def numerics(self) -> dict[str, str] | None:
        """The wrapped backend's: retrying changes no text."""
        return self.inner.numerics()

    def count_tokens(self, text: str) -> int:
        """The inner backend's token count."""
        return self.inner.count_tokens(text)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """Run the batch; retry its transient failures until they succeed or the outage is too long.

        Raises:
            BackendOutage: Transient failures persisted for more than ``max_outage_s``.
        """
        results = list(self.inner.generate(list(requests)))
        waited = 0.0
        delay = self.backoff_s
        while True:
            todo = [i for i, r in enumerate(results) if self.transient(r)]
            if not todo:
                return results
            if waited >= self.max_outage_s:
                raise BackendOutage(
                    f"backend {self.model_id!r} unavailable for {waited:.0f} s (> max_outage_s="
                    f"{self.max_outage_s:g}); {len(todo)} of {len(results)} calls failed, last error: "
                    f"{results[todo[-1]].error}"
                )
            pause = min(delay, self.max_backoff_s, max(self.max_outage_s - waited, 0.0))
            self._sleep(pause)
            waited += pause
            self.outage_s += pause
            delay *= 2
            self.retries += 1
            again = self.inner.generate([requests[i] for i in todo])
            for i, res in zip(todo, again, strict=True):
                results[i] = res

    def close(self) -> None:
        """Close the inner backend."""
        self.inner.close()
