"""Gymnasium environment, reward shaping and evaluation loop of the budget router.

Importing this package registers one gym id per benchmark; each builds a
:class:`envs.router_env.MemoryRouterEnv` from a config dict (keys: :mod:`envs.config_schema`)::

    env = gymnasium.make("BudgetRouter-LoCoMo-v0", config=cfg, split="train")
"""

from __future__ import annotations

import gymnasium as gym

#: gym id -> benchmark name.
ENV_IDS: dict[str, str] = {
    "BudgetRouter-LoCoMo-v0": "locomo",
    "BudgetRouter-LongMemEval-v0": "longmemeval",
    "BudgetRouter-LongMemEvalOracle-v0": "longmemeval_oracle",
    "BudgetRouter-HotpotQA-v0": "hotpotqa",
}


def _register() -> None:
    for env_id, bench in ENV_IDS.items():
        if env_id not in gym.registry:
            gym.register(
                id=env_id,
                entry_point="envs.factory:make_registered_env",
                kwargs={"benchmark": bench},
                # The env checker would run on every gym.make; tests call check_env explicitly.
                disable_env_checker=True,
            )


_register()

__all__ = ["ENV_IDS"]
