"""The one env factory: a ready :class:`MemoryRouterEnv` from a config."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from envs.components import EnvComponents, make_components
from envs.config_schema import (
    ActionsConfig,
    CostConfig,
    QuestionBankConfig,
    RewardConfig,
    check_choice,
    parse,
)
from envs.question_bank import QuestionItem, question_bank_from
from envs.reward import RewardShaper
from envs.router_env import MemoryRouterEnv
from envs.task_baseline import TASK_BASELINES, make_task_baseline
from modules.tier import Tier


def make_env(
    config: Mapping[str, Any],
    *,
    split: str | None = None,
    items: Sequence[QuestionItem] | None = None,
    components: EnvComponents | None = None,
    seed: int | None = None,
) -> MemoryRouterEnv:
    """Build components, question bank and reward shaper from ``config`` and wrap them in the env.

    Args:
        config: The env config (keys: :class:`envs.config_schema.EnvConfig`).
        split: Question bank split (default ``question_bank.split``).
        items: A prebuilt bank (skips building one).
        components: Prebuilt components built from the same ``config`` (lets several envs
            share models and caches); their task metric and cost weight are the env's.
        seed: Seed of the question order.

    Returns:
        The environment (with its own reward shaper: the cost window, α history and task baseline).
    """
    # Only the sections read here: with prebuilt components and items a config may hold no more.
    cost = parse(CostConfig, config.get("cost") or {}, "config section 'cost'")
    comps = components if components is not None else make_components(config)
    if items is None:
        qb = parse(QuestionBankConfig, config.get("question_bank") or {}, "config section 'question_bank'")
        items = question_bank_from(config, split or qb.split, comps.encoder)
    reward = parse(RewardConfig, config.get("reward") or {}, "config section 'reward'")
    check_choice("reward.task_baseline", reward.task_baseline, TASK_BASELINES)
    shaper = RewardShaper(cost, make_task_baseline(reward.task_baseline), lambda_scale=reward.lambda_scale)
    actions = parse(ActionsConfig, config.get("actions") or {}, "config section 'actions'")
    return MemoryRouterEnv(
        items, comps, shaper, task_metric=comps.task_metric, seed=seed, max_tier=Tier.parse(actions.max_tier)
    )


def make_registered_env(
    benchmark: str,
    config: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> MemoryRouterEnv:
    """Entry point of the registered gym ids: ``config`` with its benchmark forced to ``benchmark``.

    ``gym.make("BudgetRouter-LoCoMo-v0", config=cfg, split="val")`` ends up here.

    Raises:
        ValueError: If ``config`` names a different benchmark than the id.
    """
    cfg = copy.deepcopy(dict(config or {}))
    named = (cfg.get("benchmark") or {}).get("name")
    if named is not None and named != benchmark:
        raise ValueError(f"gym id is for benchmark {benchmark!r} but config benchmark.name is {named!r}")
    cfg["benchmark"] = {**(cfg.get("benchmark") or {}), "name": benchmark}
    return make_env(cfg, **kwargs)
