"""Reasoning tiering: one LLM, three prompting depths."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memory.encoder import Encoder
from modules.base import Module
from modules.cache import CachedLLM, CallCache
from modules.llm_tier import LLMTier
from modules.pricing import CostModel
from modules.strategies.common import check_options, llm_config, pick_llm
from modules.tier import MODULE_ORDER, Tier

NAME = "reasoning"

#: Prompting style per tier.
TIER_STYLES: dict[Tier, str] = {Tier.LOW: "direct", Tier.MID: "cot", Tier.HIGH: "react"}


def build_reasoning(
    llms: Mapping[str, CachedLLM],
    cost_model: CostModel,
    encoder: Encoder | None = None,
    cache: CallCache | None = None,
    **opts: Any,
) -> dict[str, Module]:
    """Build the five modules of the reasoning strategy.

    Args:
        llms: The one LLM under ``"default"`` (or the only entry).
        cost_model: Prices the calls.
        encoder: Unused (accepted for a uniform builder signature).
        cache: Unused (LLM calls are cached by the CachedLLM).
        **opts: ``module_topk``, ``max_tokens`` (by module; applies to every style),
            ``max_prompt_tokens``.
    """
    check_options(NAME, opts)
    llm = pick_llm(llms, NAME, ("default",))
    configs = {tier: llm_config(opts, style, tier) for tier, style in TIER_STYLES.items()}
    return {
        name: Module(
            name,
            NAME,
            {tier: LLMTier(name, tier, NAME, llm, cost_model, cfg) for tier, cfg in configs.items()},
        )
        for name in MODULE_ORDER
    }
