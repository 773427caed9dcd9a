"""Build the vectorised training environment around ``envs.router_env.MemoryRouterEnv``."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv

from envs.factory import make_env
from envs.reward import RewardShaper
from envs.router_env import MemoryRouterEnv
from policies.training.interrupt import ignore_interrupts_in_worker


class TrainingStateWrapper(gym.Wrapper):
    """Expose the env state a resumed run needs to continue exactly where the checkpoint was saved.

    ``VecEnv.env_method`` reaches these methods in-process and in subprocesses alike.
    """

    def _router_env(self) -> MemoryRouterEnv:
        env = self.env.unwrapped
        if not isinstance(env, MemoryRouterEnv):
            raise TypeError(f"TrainingStateWrapper wraps a MemoryRouterEnv, got {type(env).__name__}")
        return env

    def training_state(self) -> dict[str, Any]:
        """The current episode's resume point (the env state before its reset, the actions since)."""
        env = self._router_env()
        point = env.resume_point()
        if point is None:  # never reset: the position as it is
            point = {"state": env.position_state(), "options": None, "actions": []}
        # The reward statistics are unchanged since the episode's reset; validation reads them here too.
        return {"resume_point": point, "reward_shaper": env.reward_shaper.state_dict()}

    def load_training_state(self, state: Mapping[str, Any]) -> np.ndarray | None:
        """Restore :meth:`training_state`: the state before the episode, its reset, its actions again.

        Returns:
            The observation the training loop was at (the run continues from it without a reset),
            or None for a checkpoint without a resume point (an older one: reward statistics and
            the question-order RNG are restored, and training starts a new episode).
        """
        env = self._router_env()
        point = state.get("resume_point")
        if point is None:
            env.reward_shaper.load_state_dict(state["reward_shaper"])
            rng = np.random.Generator(np.random.PCG64())
            rng.bit_generator.state = state["np_random"]
            env.np_random = rng
            return None
        env.load_state_dict({**point["state"], "reward_shaper": state["reward_shaper"]})
        if point["options"] is None:
            return None  # the env had not started an episode
        obs, _ = self.env.reset(options=point["options"] or None)
        for action in point["actions"]:
            obs, _reward, done, _truncated, _info = self.env.step(action)
            if done:
                raise RuntimeError("a resume point's actions end an episode; the checkpoint is inconsistent")
        return np.asarray(obs)


def sync_reward_statistics(training_env: VecEnv, shaper: RewardShaper) -> None:
    """Load the first training worker's cost window and α into ``shaper`` (nothing else changes).

    Validation scores held-out episodes with the statistics training has now, without reaching
    into a worker's env: the state travels through :meth:`TrainingStateWrapper.training_state`,
    the same public method checkpoints use, so subprocess workers work too.
    """
    shaper.load_state_dict(training_env.env_method("training_state", indices=[0])[0]["reward_shaper"])


def worker_thunk(
    items: Sequence[Any],
    cfg: Mapping[str, Any],
    rank: int,
    seed: int,
    components: Any | None = None,
) -> Callable[[], gym.Env]:
    """Return the thunk a ``VecEnv`` calls to build worker ``rank``'s env with ``envs.factory.make_env``.

    Args:
        items: The training question bank.
        cfg: The resolved config (used to build components when ``components`` is None).
        rank: Worker index (its seed is ``seed + rank``).
        seed: Base seed.
        components: Shared components (in-process workers), or None to build them in the worker.
    """

    def thunk() -> gym.Env:
        env = make_env(cfg, items=items, components=components, seed=seed + rank)
        return TrainingStateWrapper(Monitor(env))

    return thunk


def _in_worker_process(thunk: Callable[[], gym.Env]) -> Callable[[], gym.Env]:
    """``thunk`` run in a subprocess worker that leaves SIGINT/SIGTERM to the parent (which saves first)."""

    def run() -> gym.Env:
        ignore_interrupts_in_worker()
        return thunk()

    return run


def build_vec_env(
    items: Sequence[Any], cfg: Mapping[str, Any], n_envs: int, seed: int, kind: str, components: Any
) -> VecEnv:
    """``DummyVecEnv`` (shared components), ``SubprocVecEnv`` (components per worker) or ``BatchedVecEnv``.

    Raises:
        ValueError: For an unknown ``kind``.
    """
    if kind == "dummy":
        return DummyVecEnv([worker_thunk(items, cfg, i, seed, components) for i in range(n_envs)])
    if kind == "subproc":
        return SubprocVecEnv(
            [_in_worker_process(worker_thunk(items, cfg, i, seed, None)) for i in range(n_envs)],
            start_method="spawn",
        )
    if kind == "batched":
        # Same envs as "dummy", but concurrent LLM calls of the N envs reach the backend as one batch.
        # An optional scale path, so imported by name (as the backend registry does), never by the core.
        batched = importlib.import_module("scale.batched_vec_env").BatchedVecEnv
        return batched([worker_thunk(items, cfg, i, seed, components) for i in range(n_envs)])
    raise ValueError(f"unknown vec_env kind {kind!r}; choose dummy, subproc or batched")
