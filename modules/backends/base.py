"""The one interface every LLM backend implements (llama.cpp, transformers, vLLM, HTTP, fake)."""

from __future__ import annotations

import abc
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


class BackendError(RuntimeError):
    """A backend failed in a way that retries cannot fix (bad config, missing model file)."""


@dataclass(frozen=True)
class GenerationRequest:
    """One generation call.

    Exactly one of ``messages`` (chat, the backend applies the model's chat template) or
    ``prompt`` (raw completion, e.g. for base models used few-shot) must be set.

    Attributes:
        messages: Chat messages as ``({"role": ..., "content": ...}, ...)``.
        prompt: Raw completion prompt.
        max_tokens: Generation cap.
        stop: Stop strings.
        json_schema: If set, constrain the output to this JSON schema (where supported).
        temperature: Sampling temperature; 0 means greedy (the default, for determinism).
        seed: Sampling seed.
    """

    messages: tuple[dict[str, str], ...] | None = None
    prompt: str | None = None
    max_tokens: int = 128
    stop: tuple[str, ...] = ()
    json_schema: dict[str, Any] | None = field(default=None, hash=False, compare=True)
    temperature: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        if (self.messages is None) == (self.prompt is None):
            raise ValueError("GenerationRequest needs exactly one of messages= or prompt=")
        if self.max_tokens <= 0:
            raise ValueError(f"max_tokens must be > 0, got {self.max_tokens}")

    def fingerprint(self) -> str:
        """A canonical JSON string of everything that determines the output (for cache keys)."""
        return json.dumps(
            {
                "messages": list(self.messages) if self.messages is not None else None,
                "prompt": self.prompt,
                "max_tokens": self.max_tokens,
                "stop": list(self.stop),
                "json_schema": self.json_schema,
                "temperature": self.temperature,
                "seed": self.seed,
            },
            sort_keys=True,
            ensure_ascii=False,
        )


@dataclass(frozen=True)
class GenerationResult:
    """What one generation call returned.

    Attributes:
        text: Generated text ("" on error).
        tokens_in: Prompt tokens as counted by the backend.
        tokens_out: Generated tokens.
        latency_s: Wall-clock seconds of the call.
        model_id: The model that produced it.
        finish_reason: ``"stop"``, ``"length"`` or ``"error"``.
        error: Error message when ``finish_reason == "error"``.
        cached: Whether the result was replayed from the call cache.
        truncated: Whether the backend shortened the prompt to fit its context window
            (see ``modules.backends.prompting.fit_request``).
    """

    text: str
    tokens_in: int
    tokens_out: int
    latency_s: float
    model_id: str
    finish_reason: str = "stop"
    error: str | None = None
    cached: bool = False
    truncated: bool = False

    @property
    def ok(self) -> bool:
        """True unless the call errored."""
        return self.finish_reason != "error"


@dataclass
class PrefixCacheStats:
    """Prompt tokens an engine was sent, and how many of them it served from its prefix (KV) cache.

    Engines that say (llama.cpp's ``timings.cache_n``, vLLM's ``num_cached_tokens``) count every call;
    a benchmark reads :attr:`cached_share` to see what a prompt layout lets the engine reuse.
    """

    prompt: int = 0
    cached: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, prompt: int, cached: int) -> None:
        """Count one call (thread-safe: server slots answer from several threads)."""
        with self._lock:
            self.prompt += int(prompt)
            self.cached += int(cached)

    @property
    def cached_share(self) -> float:
        """Share of prompt tokens served from the cache (0 before any call)."""
        return self.cached / self.prompt if self.prompt else 0.0


class LLMBackend(abc.ABC):
    """Base class of all LLM backends.

    Attributes:
        model_id: Stable model identifier (used in cache keys and the cost table).
        n_ctx: Context window in tokens.
    """

    model_id: str
    n_ctx: int
    #: Prompt tokens sent and served from a prefix cache, for engines that report it (else None).
    prefix_cache: PrefixCacheStats | None = None
    #: ``generate`` may be entered from several threads at once and the engine schedules the requests
    #: itself (server slots, continuous batching, a remote server): episodes in flight call it directly
    #: instead of meeting at a batching barrier (see ``scale.batching``).
    concurrent_calls: bool = False
    #: Questions in flight this engine turns into throughput (what ``--concurrency auto`` picks): 1 for an
    #: engine that runs one request at a time; engines that batch say how many (see their classes).
    in_flight: int = 1
    #: False for a stand-in that only replays (:class:`modules.backends.replay.ReplayBackend`): the call
    #: cache raises on a miss instead of asking it.
    computes: bool = True

    @abc.abstractmethod
    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """Run a batch of requests and return one result per request, in order.

        Errors of individual calls come back as results with ``finish_reason="error"``;
        only configuration errors raise.
        """

    @abc.abstractmethod
    def count_tokens(self, text: str) -> int:
        """Number of tokens ``text`` takes for this model (used for context truncation)."""

    def numerics(self) -> dict[str, str] | None:
        """What besides ``model_id`` and the request decides the text: engine, weights, dtype.

        Part of every call's cache key (:func:`modules.cache.call_key`), so that two engines, two
        builds or two dtypes of one model never replay each other's answers. ``None`` means the
        reference numerics whose keys predate this field (the pinned prebuilt xllamacpp on a
        registry GGUF, and the fake backend): the committed call packs were made there and keep
        replaying. The default names the backend class; engines override it with what they know.
        """
        return {"engine": f"{type(self).__module__}.{type(self).__qualname__}"}

    def close(self) -> None:  # noqa: B027 - optional hook, most backends hold nothing
        """Release resources (servers, threads)."""

    def __enter__(self) -> LLMBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
