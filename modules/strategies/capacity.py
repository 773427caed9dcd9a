"""Capacity tiering: one prompt, three model sizes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memory.encoder import Encoder
from modules.base import Module
from modules.cache import CachedLLM, CallCache
from modules.llm_tier import LLMTier
from modules.models import MODELS
from modules.pricing import CostModel
from modules.strategies.common import check_options, llm_config
from modules.tier import MODULE_ORDER, Tier

NAME = "capacity"

#: Default model key per tier (keys of :data:`modules.models.MODELS`).
DEFAULT_MODELS: dict[Tier, str] = {
    Tier.LOW: "smollm2-135m",
    Tier.MID: "gemma3-270m",
    Tier.HIGH: "qwen2.5-1.5b",
}


def is_chat_model(model_id: str) -> bool:
    """Whether ``model_id`` takes chat messages (unknown models are assumed to)."""
    spec = MODELS.get(model_id)
    return True if spec is None else spec.chat


def build_capacity(
    llms: Mapping[str, CachedLLM],
    cost_model: CostModel,
    encoder: Encoder | None = None,
    cache: CallCache | None = None,
    **opts: Any,
) -> dict[str, Module]:
    """Build the five modules of the capacity strategy.

    Args:
        llms: One LLM per tier under ``"low"``, ``"mid"``, ``"high"``.
        cost_model: Prices each call with its own model's rate.
        encoder: Unused (uniform builder signature).
        cache: Unused (LLM calls are cached by the CachedLLM).
        **opts: ``module_topk``, ``max_tokens``, ``max_prompt_tokens``.

    Raises:
        ValueError: A tier's LLM is missing.
    """
    check_options(NAME, opts)
    missing = [t.name.lower() for t in Tier if t.name.lower() not in llms]
    if missing:
        raise ValueError(
            f"strategy 'capacity' needs one LLM per tier under keys low/mid/high; missing {missing} "
            f"(defaults: {', '.join(f'{t.name.lower()}={m}' for t, m in DEFAULT_MODELS.items())})"
        )
    by_tier = {t: llms[t.name.lower()] for t in Tier}
    configs = {
        t: llm_config(opts, "direct" if is_chat_model(llm.model_id) else "fewshot", t)
        for t, llm in by_tier.items()
    }
    return {
        name: Module(
            name, NAME, {t: LLMTier(name, t, NAME, by_tier[t], cost_model, configs[t]) for t in Tier}
        )
        for name in MODULE_ORDER
    }
