"""A ``DummyVecEnv`` whose N env steps run side by side so their LLM calls go out as one batch.

SB3's ``DummyVecEnv.step_wait`` steps the envs one after another, so each env's module call
reaches the backend alone. :class:`BatchedVecEnv` runs the N ``env.step`` (and the
auto-``reset`` of finished episodes) under a :class:`scale.batching.LockstepBatcher`: every
env step runs one module for its episode, and the calls of all N episodes that use the same
model are sent to the backend together. Everything else (buffers, terminal observations,
info dicts) is exactly DummyVecEnv's, and the envs share one ``EnvComponents`` in-process.
"""

from __future__ import annotations

from copy import deepcopy
from functools import partial
from typing import Any

import numpy as np
from stable_baselines3.common.vec_env import DummyVecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvStepReturn

from scale.batching import LockstepBatcher


class BatchedVecEnv(DummyVecEnv):
    """``DummyVecEnv`` with batched LLM calls across its envs (same constructor).

    Attributes:
        batcher: The batcher (its ``stats`` tell the batch sizes the backend saw).
    """

    def __init__(self, env_fns: Any) -> None:
        super().__init__(env_fns)
        self.batcher: LockstepBatcher[tuple[Any, ...]] = LockstepBatcher()

    def _step_one(self, env_idx: int) -> tuple[Any, ...]:
        env = self.envs[env_idx]
        obs, rew, terminated, truncated, info = env.step(self.actions[env_idx])
        reset_info: dict[str, Any] | None = None
        final_obs = None
        if terminated or truncated:
            final_obs = obs
            obs, reset_info = env.reset()
        return obs, rew, terminated, truncated, info, final_obs, reset_info

    def step_wait(self) -> VecEnvStepReturn:
        """Step all envs together (LLM calls batched), then fill the buffers like DummyVecEnv."""
        outs = self.batcher.run([partial(self._step_one, i) for i in range(self.num_envs)])
        for env_idx, (obs, rew, terminated, truncated, info, final_obs, reset_info) in enumerate(outs):
            self.buf_rews[env_idx] = rew
            self.buf_infos[env_idx] = info
            self.buf_dones[env_idx] = terminated or truncated
            info["TimeLimit.truncated"] = truncated and not terminated
            if self.buf_dones[env_idx]:
                info["terminal_observation"] = final_obs
                self.reset_infos[env_idx] = reset_info or {}
            self._save_obs(env_idx, obs)
        infos = deepcopy(self.buf_infos)
        return self._obs_from_buf(), np.copy(self.buf_rews), np.copy(self.buf_dones), infos
