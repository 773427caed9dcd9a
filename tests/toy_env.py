"""A tiny env in the router's observation layout with a known optimal policy (like SB3's IdentityEnv).

It exercises the router network and PPO plumbing in milliseconds, without LLMs or data: the
learning tests check that PPO with ``router_policy_kwargs`` finds the optimum here.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from envs.observation import ObservationSpec


class ToyRouterEnv(gym.Env[np.ndarray, np.int64]):
    """Five decisions per episode; the best tier depends on the module and on the query.

    At module ``i`` the best tier is HIGH when the query embedding's first coordinate is positive
    and ``i`` is even, and LOW otherwise; MID is never best. Each step pays 1 for the best tier
    and 0 otherwise, so the optimal return is 5 and a uniform random policy earns 5/3 on average.
    Solving it needs both the module descriptor (``i``) and the query content.

    Args:
        embed_dim: Width of the fake embeddings.
        seed: Seed of the query generator.
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (gymnasium's class attribute)

    def __init__(self, embed_dim: int = 8, seed: int | None = None) -> None:
        self.obs_spec = ObservationSpec(embed_dim=embed_dim)
        self.observation_space = self.obs_spec.space()
        self.action_space = gym.spaces.Discrete(3)
        self._rng = np.random.default_rng(seed)
        self._i = 0
        self._q = np.zeros(embed_dim, np.float32)

    def _obs(self) -> np.ndarray:
        s = self.obs_spec
        obs = np.zeros(s.dim, np.float32)
        obs[self._i] = 1.0
        obs[s.query_slice] = self._q
        obs[s.input_slice] = self._q[::-1]
        obs[s.scalar_slice] = np.linspace(0.0, 1.0, s.n_scalars, dtype=np.float32) * (self._i / 4)
        return obs

    def best(self, i: int) -> int:
        """The optimal tier index at module ``i`` for the current query."""
        return 2 if (self._q[0] > 0 and i % 2 == 0) else 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Draw a new unit-norm query and start at the first module."""
        super().reset(seed=seed)
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        v = self._rng.normal(size=self._q.shape)
        self._q = (v / np.linalg.norm(v)).astype(np.float32)
        self._i = 0
        return self._obs(), {}

    def step(self, action: np.int64 | int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Pay 1 for the best tier; the episode ends after the fifth module."""
        reward = float(int(action) == self.best(self._i))
        self._i += 1
        done = self._i >= self.obs_spec.n_modules
        obs = np.zeros(self.obs_spec.dim, np.float32) if done else self._obs()
        return obs, reward, done, False, {}
