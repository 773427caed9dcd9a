"""Run a non-LLM tier (rules, spaCy, MiniLM, tagger, TextRank) with caching and metering."""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from collections.abc import Callable
from typing import Any

from common.lru import LRU as MemoLRU
from modules.backends.result_check import InvalidResult, check_local_output
from modules.base import MODULES_CODE_VERSION, ModuleInput, ModuleOutput, ModuleValue
from modules.cache import CallCache
from modules.pricing import CostModel
from modules.tier import Tier

#: ``fn(inp) -> (json_value, gflops)``; filter functions return kept indices.
LocalFn = Callable[[ModuleInput], tuple[Any, float]]

_LRU_SIZE = 8192


#: Local outputs of this process, shared by all tiers: keyed by cache and output key (see ``__call__``).
LRU: MemoLRU[str, dict[str, Any]] = MemoLRU(_LRU_SIZE)


def _cache_identity(cache: CallCache | None) -> str:
    """Which cache an LRU entry belongs to: its path (an in-memory cache: the object)."""
    if cache is None:
        return ""
    return f"memory@{id(cache)}" if cache.path == ":memory:" else cache.path


def input_key(inp: ModuleInput, *, reads_query: bool) -> str:
    """Hash of the input fields a tier reads.

    Always the evidence texts and timestamps and the question date (the temporal tagger's
    fallback reference time); the relations for the summary; the query only when
    ``reads_query`` (relation extractors ignore it, so their results are reused across
    questions over the same evidence).
    """
    payload = {
        "evidence": [[e.text, e.timestamp] for e in inp.evidence],
        "relations": {m: list(v) for m, v in sorted(inp.relations.items())}
        if inp.module == "summary"
        else {},
        "query": inp.query if reads_query else None,
        "question_date": inp.question_date,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def lookup_or_compute(
    cache: CallCache | None, key: str, tags: dict[str, str], compute: Callable[[], tuple[Any, float]]
) -> tuple[dict[str, Any], bool]:
    """A local output: from this process's memo, else from ``cache``, else computed and stored in both.

    Args:
        cache: The persistent cache (None: the memo only).
        key: The output's cache key.
        tags: Module, tier, strategy and method, stored with the output (a pack export picks by method).
        compute: Returns ``(raw_value, gflops)``.

    Returns:
        ``({raw, gflops, latency_s, tags}, whether it was cached)``.
    """
    # The LRU is process-wide; keyed by the cache too, so that a hit means this cache holds the output.
    # Otherwise an output computed for another cache earlier in the process (a test, a second study) is
    # never written to this one, and a pack exported from it lacks the output a replay needs.
    lru_key = f"{_cache_identity(cache)}|{key}"
    stored = LRU.get(lru_key)
    if stored is None and cache is not None:
        stored = cache.get(key)
        if stored is not None:
            try:
                check_local_output(stored)
                if "tags" not in stored:  # cached before outputs named their method: name it now, so
                    stored = {**stored, "tags": tags}  # that a pack export can pick it by method
                    cache.put(key, stored)
                LRU.put(lru_key, stored)
            except InvalidResult as exc:
                warnings.warn(
                    f"call cache {cache.path}: entry {key} is not a valid {tags.get('module')} "
                    f"{tags.get('tier')} output ({exc}); it is computed again and replaced",
                    stacklevel=3,
                )
                stored = None
    if stored is not None:
        return stored, True
    t0 = time.perf_counter()
    raw, gf = compute()
    stored = {"raw": raw, "gflops": gf, "latency_s": time.perf_counter() - t0, "tags": tags}
    LRU.put(lru_key, stored)
    if cache is not None:
        cache.put(key, stored)
    return stored, False


class LocalStep:
    """A deterministic step inside a local tier, cached as a local output of its own.

    Some local tiers are cheap to store but one of their steps is computed in floating point, e.g. the
    extractive summary's MiniLM ranking of sentences: its summary text is recomputed on replay (texts are
    most of a pack's bytes), so the ranking, a few indices, is what must come back exactly, on any CPU
    (near-ties of cosines can order differently under another ISA or thread count), and fast. The step's
    arguments are its key; its value must be JSON.

    Args:
        module: Module of the tier the step belongs to.
        tier: That tier.
        strategy: Strategy name (cache tag).
        method: The step's name (cache tag; what a pack export's ``--local`` picks), e.g. ``"minilm-rank"``.
        fn: The pure step ``fn(*args) -> JSON value``.
        cache: Optional persistent cache shared with the LLM calls.
        params: Settings that change the output (e.g. the encoder's name): part of the key.
    """

    def __init__(
        self,
        module: str,
        tier: Tier,
        strategy: str,
        method: str,
        fn: Callable[..., Any],
        cache: CallCache | None = None,
        *,
        params: str = "",
    ) -> None:
        self.fn, self.cache = fn, cache
        self.tags = {"module": module, "tier": tier.name, "strategy": strategy, "method": method}
        self._tag = f"local|{module}|{tier.name}|{strategy}|{method}[{params}]|{MODULES_CODE_VERSION}"

    def key(self, *args: Any) -> str:
        """The cache key of a call with ``args``."""
        payload = json.dumps(args, ensure_ascii=False, sort_keys=True)
        return hashlib.sha256(f"{self._tag}|{payload}".encode()).hexdigest()

    def __call__(self, *args: Any) -> Any:
        """The step's (possibly cached) value for ``args``."""
        stored, _ = lookup_or_compute(self.cache, self.key(*args), self.tags, lambda: (self.fn(*args), 0.0))
        return stored["raw"]


class LocalTier:
    """A callable ``ModuleInput -> ModuleOutput`` for one non-LLM tier.

    Args:
        module: Module name.
        tier: The tier this implements.
        strategy: Strategy name (cache tag).
        method: Name of the implementation (cache tag and report label), e.g. ``"spacy_sm"``.
        fn: The pure function computing ``(raw_value, gflops)``.
        cost_model: Converts GFLOPs into the configured cost unit.
        cache: Optional persistent cache shared with the LLM calls.
        reads_query: Whether ``fn`` reads the question (filter, summary) or only the evidence
            (the relation extractors: their results are reused across questions).
    """

    def __init__(
        self,
        module: str,
        tier: Tier,
        strategy: str,
        method: str,
        fn: LocalFn,
        cost_model: CostModel,
        cache: CallCache | None = None,
        *,
        reads_query: bool,
        params: str = "",
    ) -> None:
        self.module, self.tier, self.strategy, self.method = module, tier, strategy, method
        self.fn, self.cost_model, self.cache, self.reads_query = fn, cost_model, cache, reads_query
        #: Settings that change the output (e.g. ``k=3``): part of the cache key.
        self.params = params
        #: Stored with each output: the key is a hash, and a pack export picks local outputs by method
        #: (``Filters.local``: those computed in floating point can differ between CPU classes).
        self.tags = {"module": module, "tier": tier.name, "strategy": strategy, "method": method}

    def key(self, inp: ModuleInput) -> str:
        """The cache key of ``inp`` for this tier."""
        method = f"{self.method}[{self.params}]" if self.params else self.method
        tag = f"local|{self.module}|{self.tier.name}|{self.strategy}|{method}|{MODULES_CODE_VERSION}"
        return hashlib.sha256(f"{tag}|{input_key(inp, reads_query=self.reads_query)}".encode()).hexdigest()

    def __call__(self, inp: ModuleInput) -> ModuleOutput:
        """Return the (possibly cached) output of the tier on ``inp``."""
        stored, cached = lookup_or_compute(self.cache, self.key(inp), self.tags, lambda: self.fn(inp))
        raw = stored["raw"]
        value: ModuleValue = (
            tuple(inp.evidence[i] for i in raw)
            if self.module == "filter"
            else (tuple(raw) if isinstance(raw, list) else raw)
        )
        cost = self.cost_model.non_llm(float(stored["gflops"]), float(stored["latency_s"]))
        return ModuleOutput.of(
            self.module, self.tier, value, cost, cached=cached, notes=(f"method={self.method}",)
        )
