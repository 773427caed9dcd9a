"""Build the vectorised training environment around ``envs.router_env.MemoryRouterEnv``.

Each worker env gets its own ``RewardShaper`` (as ``envs.reward`` prescribes) and the seed
``seed + rank``. With ``DummyVecEnv`` (default) all workers share one ``EnvComponents`` (one
encoder, one llama.cpp instance, one call cache); with ``SubprocVecEnv`` each worker process
builds its own from the config.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv

from envs.components import make_components
from envs.reward import RewardShaper
from envs.router_env import MemoryRouterEnv, jsonable


class TrainingStateWrapper(gym.Wrapper):
    """Expose the env state a resumed run needs (reward shaper, question-order RNG).

    ``VecEnv.env_method`` reaches these methods in-process and in subprocesses alike.
    """

    def training_state(self) -> dict[str, Any]:
        """Reward-shaper state and the question-order RNG state (JSON-friendly)."""
        env = self.env.unwrapped
        return {
            "reward_shaper": env.reward_shaper.state_dict(),
            "np_random": jsonable(env.np_random.bit_generator.state),
        }

    def load_training_state(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`training_state` saved."""
        env = self.env.unwrapped
        env.reward_shaper.load_state_dict(state["reward_shaper"])
        rng = np.random.Generator(np.random.PCG64())
        rng.bit_generator.state = state["np_random"]
        env.np_random = rng


def reward_shaper_from(cfg: Mapping[str, Any]) -> RewardShaper:
    """A fresh reward shaper from the ``cost`` section."""
    return RewardShaper.from_config(dict(cfg.get("cost") or {}))


def env_factory(
    items: Sequence[Any],
    cfg: Mapping[str, Any],
    rank: int,
    seed: int,
    components: Any | None = None,
) -> Callable[[], gym.Env]:
    """Return a thunk that builds worker ``rank``'s env.

    Args:
        items: The training question bank.
        cfg: The resolved config (used to build components when ``components`` is None).
        rank: Worker index (its seed is ``seed + rank``).
        seed: Base seed.
        components: Shared components (in-process workers), or None to build them in the worker.
    """
    task_metric = str((cfg.get("reward") or {}).get("task_metric", "f1"))

    def thunk() -> gym.Env:
        comps = components if components is not None else make_components(cfg)
        env = MemoryRouterEnv(
            items, comps, reward_shaper_from(cfg), task_metric=task_metric, seed=seed + rank
        )
        return TrainingStateWrapper(Monitor(env))

    return thunk


def build_vec_env(
    items: Sequence[Any], cfg: Mapping[str, Any], n_envs: int, seed: int, kind: str, components: Any
) -> VecEnv:
    """``DummyVecEnv`` (shared components), ``SubprocVecEnv`` (components per worker) or ``BatchedVecEnv``.

    Raises:
        ValueError: For an unknown ``kind``.
    """
    if kind == "dummy":
        return DummyVecEnv([env_factory(items, cfg, i, seed, components) for i in range(n_envs)])
    if kind == "subproc":
        return SubprocVecEnv(
            [env_factory(items, cfg, i, seed, None) for i in range(n_envs)], start_method="spawn"
        )
    if kind == "batched":
        # Same envs as "dummy", but concurrent LLM calls of the N envs reach the backend as one batch.
        from policies.training.batched_vec_env import BatchedVecEnv

        return BatchedVecEnv([env_factory(items, cfg, i, seed, components) for i in range(n_envs)])
    raise ValueError(f"unknown vec_env kind {kind!r}; choose dummy, subproc or batched")
