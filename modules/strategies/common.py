"""Helpers shared by the strategy builders: LLM selection and option checking."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from modules.cache import CachedLLM
from modules.llm_tier import LLMTierConfig
from modules.tier import Tier


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


def module_topk(opts: Mapping[str, Any], tier: Tier) -> int:
    """Chunks the filter keeps at ``tier``: ``module_topk`` is an int, or one budget per tier.

    A per-tier budget (``{LOW: 3, MID: 5, HIGH: 8}``) is the filter's *output budget* lever: a
    dearer tier may hand more (better chosen) evidence downstream, which the answer pays for in
    prompt tokens.
    """
    k = opts.get("module_topk", LLMTierConfig.filter_k)
    if isinstance(k, Mapping):
        return int(k[tier.name])
    return int(k)


def llm_config(opts: Mapping[str, Any], style: str, tier: Tier = Tier.HIGH) -> LLMTierConfig:
    """An :class:`LLMTierConfig` from the shared pipeline options, for an LLM tier at ``tier``."""
    return LLMTierConfig(
        style=style,  # type: ignore[arg-type]
        max_tokens=dict(opts["max_tokens"]) if opts.get("max_tokens") else None,
        max_prompt_tokens=int(opts.get("max_prompt_tokens", LLMTierConfig.max_prompt_tokens)),
        filter_k=module_topk(opts, tier),
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
    if isinstance(k, Mapping):
        if set(k) != {t.name for t in Tier} or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in k.values()
        ):
            raise ValueError(
                f"module_topk as a mapping needs a positive int for each of LOW, MID, HIGH, got {dict(k)!r}"
            )
    elif not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"module_topk must be a positive int or a {{LOW, MID, HIGH}} mapping, got {k!r}")
