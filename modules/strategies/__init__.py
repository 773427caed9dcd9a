"""The three tiering strategies, selectable by name."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from modules.base import Module
from modules.strategies.capacity import build_capacity
from modules.strategies.implementation import build_implementation
from modules.strategies.reasoning import build_reasoning

StrategyBuilder = Callable[..., dict[str, Module]]

STRATEGIES: dict[str, StrategyBuilder] = {
    "implementation": build_implementation,
    "reasoning": build_reasoning,
    "capacity": build_capacity,
}


def build_modules(
    strategy: str, llms: Mapping[str, Any], cost_model: Any, encoder: Any, cache: Any = None, **opts: Any
) -> dict[str, Module]:
    """Build the five modules of ``strategy``.

    Raises:
        KeyError: Unknown strategy (the message lists the known ones).
    """
    if strategy not in STRATEGIES:
        raise KeyError(f"unknown tiering strategy {strategy!r}; choose one of {sorted(STRATEGIES)}")
    return STRATEGIES[strategy](llms, cost_model, encoder, cache, **opts)


__all__ = ["STRATEGIES", "StrategyBuilder", "build_modules"]
