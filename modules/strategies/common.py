"""Helpers shared by the strategy builders: LLM selection and option checking."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from modules.cache import CachedLLM
from modules.llm_tier import LLMTierConfig


def pick_llm(llms: Mapping[str, CachedLLM], strategy: str, keys: tuple[str, ...]) -> CachedLLM:
    """The LLM stored under the first of ``keys`` present, or the only one given.

    Raises:
        ValueError: None of ``keys`` is present and there is not exactly one LLM.
    """
    for key in keys:
        if key in llms:
            return llms[key]
    if len(llms) == 1:
        return next(iter(llms.values()))
    raise ValueError(
        f"strategy {strategy!r} needs an LLM under one of the keys {list(keys)} "
        f"(or exactly one LLM); got keys {sorted(llms)}"
    )


def llm_config(opts: Mapping[str, Any], style: str) -> LLMTierConfig:
    """An :class:`LLMTierConfig` from the shared pipeline options."""
    return LLMTierConfig(
        style=style,  # type: ignore[arg-type]
        max_tokens=dict(opts["max_tokens"]) if opts.get("max_tokens") else None,
        max_prompt_tokens=int(opts.get("max_prompt_tokens", LLMTierConfig.max_prompt_tokens)),
        filter_k=int(opts.get("module_topk", LLMTierConfig.filter_k)),
        keep_evidence=bool(opts.get("keep_evidence", False)),
    )


#: Options every strategy accepts (passed through ``build_pipeline(**opts)``).
COMMON_OPTIONS = frozenset({"module_topk", "max_tokens", "max_prompt_tokens", "keep_evidence"})


def check_options(strategy: str, opts: Mapping[str, Any], extra: frozenset[str] = frozenset()) -> None:
    """Reject unknown options by name (a typo must not silently fall back to a default).

    Raises:
        TypeError: An option is not recognised.
    """
    unknown = sorted(set(opts) - COMMON_OPTIONS - extra)
    if unknown:
        raise TypeError(
            f"strategy {strategy!r} got unknown options {unknown}; accepted: {sorted(COMMON_OPTIONS | extra)}"
        )
    k = opts.get("module_topk", 5)
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"module_topk must be a positive int, got {k!r}")
