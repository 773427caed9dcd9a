"""Which LLMs a strategy's tiers call, and what the tiers stand for under a config.

Kept apart from :mod:`envs.components` (which builds the models) and the strategies, so that an
exported router (:mod:`policies.router`) can check a pipeline without importing one.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

#: The LLM roles each tiering strategy reads from ``llms`` (see modules/strategies/*): the
#: implementation strategy's HIGH tiers, the reasoning strategy's one model, one model per
#: tier for the capacity strategy. A strategy not listed gets one LLM under ``"default"``.
STRATEGY_LLM_ROLES: dict[str, tuple[str, ...]] = {
    "implementation": ("high",),
    "reasoning": ("default",),
    "capacity": ("low", "mid", "high"),
}


def merge_backend(base: Mapping[str, Any], override: Mapping[str, Any] | None) -> dict[str, Any]:
    """``override`` merged onto the default backend ``base``: a role's or the answerer's LLM options."""
    if override and "name" in override and override["name"] != base.get("name"):
        # Another backend shares no constructor options with the base one (a llama.cpp n_threads
        # means nothing to an OpenAI-compatible endpoint): the override stands alone.
        return copy.deepcopy(dict(override))
    out = copy.deepcopy(dict(base))
    out.update(copy.deepcopy(dict(override or {})))
    return out


def tier_meaning(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """What LOW, MID and HIGH stand for under a config: the strategy, its options, each LLM role's model.

    A router's choices only mean what they meant in training if these are equal: the same tier of
    another strategy (or of the same strategy on another model, or with other options such as the
    quality ladder's ``keep_evidence``) is another computation. Which *engine* runs a model, the
    benchmark, the memory and the action space's ``max_tier`` do not change it.
    """
    strategy = cfg.get("strategy") or {}
    name = strategy.get("name")
    meaning: dict[str, Any] = {
        "strategy.name": name,
        "strategy.options": dict(strategy.get("options") or {}),
    }
    backend, llms = cfg.get("backend") or {}, cfg.get("llms") or {}
    for role in STRATEGY_LLM_ROLES.get(str(name), ("default",)):
        meaning[f"llms.{role}.model"] = merge_backend(backend, llms.get(role)).get("model")
    return meaning


def tier_meaning_differences(trained: Mapping[str, Any], given: Mapping[str, Any]) -> list[str]:
    """``key: trained X, given Y`` for each :func:`tier_meaning` entry that differs (empty: none)."""
    a, b = tier_meaning(trained), tier_meaning(given)
    return [f"{key}: trained {a[key]!r}, given {b.get(key)!r}" for key in a if a[key] != b.get(key)]
