"""The router's decision replayed from an outcome table: one question, one path, one step.

An outcome table holds, for every question of a split and every path of a designed set, the F1 and module
cost that path scored (``scripts/powered_study.py`` computes them once, with the real pipeline). Routing a
question is then a contextual bandit: the observation is the question's features (and, for a λ-conditioned
router, the price), the action picks one of the table's paths, and the reward is the objective the learners
of :mod:`evaluation.outcome_learners` maximise, ``F1 − price · cost / ref_cost``. PPO trains on it with no
LLM call, on the same footing as kNN and the plug-in predictor; a router trained here can only choose paths
the table covers, so it is judged counterfactually on exactly those.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np


class OutcomeTableEnv(gym.Env[np.ndarray, np.int64]):
    """One-step episodes over the rows of an outcome table.

    Each ``reset`` draws a question (and, when ``prices`` has more than one value, a price) with the env's
    RNG; ``step`` returns that question's objective on the chosen path and ends the episode.

    Observation: ``features[i]`` followed, when ``conditioned``, by the price scaled by ``price_scale``.
    Action: ``Discrete(n_paths)``, the column of the table.
    Reward: ``f1[i, a] − price · cost[i, a] / ref_cost``.

    Args:
        features: ``(n_questions, dim)`` observation features of the questions.
        f1: ``(n_questions, n_paths)`` quality of each path.
        cost: ``(n_questions, n_paths)`` module cost of each path.
        prices: The prices an episode draws from (uniformly).
        ref_cost: The cost a price is quoted against (the costliest path's mean on the training rows).
        conditioned: Put the price in the observation (the λ-conditioned router); with one price and no
            conditioning the observation is the features alone.
        price_scale: Divides the price in the observation, so that the widest price is about 1.

    Raises:
        ValueError: Shapes disagree, no price, a negative price or a non-positive ``ref_cost``.
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 - Gymnasium's documented class attribute

    def __init__(
        self,
        features: np.ndarray,
        f1: np.ndarray,
        cost: np.ndarray,
        prices: Sequence[float] = (0.0,),
        ref_cost: float = 1.0,
        conditioned: bool = False,
        price_scale: float = 1.0,
    ) -> None:
        features = np.asarray(features, dtype=np.float32)
        f1, cost = np.asarray(f1, dtype=np.float64), np.asarray(cost, dtype=np.float64)
        if features.ndim != 2 or f1.shape != cost.shape or f1.ndim != 2 or f1.shape[0] != features.shape[0]:
            raise ValueError(
                f"features {features.shape}, f1 {f1.shape} and cost {cost.shape} must be (n, dim), "
                "(n, paths), (n, paths) with the same n"
            )
        if f1.shape[0] == 0 or f1.shape[1] == 0:
            raise ValueError(f"an outcome table of shape {f1.shape} has nothing to route")
        if not prices or min(prices) < 0:
            raise ValueError(f"prices must be one or more values >= 0, got {list(prices)}")
        if not ref_cost > 0:
            raise ValueError(f"ref_cost must be positive, got {ref_cost}")
        if not price_scale > 0:
            raise ValueError(f"price_scale must be positive, got {price_scale}")
        self.features, self.f1, self.cost = features, f1, cost
        self.prices = np.asarray(prices, dtype=np.float64)
        self.ref_cost, self.conditioned, self.price_scale = float(ref_cost), conditioned, float(price_scale)
        dim = features.shape[1] + (1 if conditioned else 0)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, shape=(dim,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(f1.shape[1])
        self._row, self._price = 0, float(self.prices[0])

    def observe(self, features: np.ndarray, price: float) -> np.ndarray:
        """The observation of feature rows ``(m, dim)`` at ``price`` (what a trained policy is asked with)."""
        features = np.array(features, dtype=np.float32)  # a copy: a user may keep and change what it got
        if not self.conditioned:
            return features
        column = np.full((features.shape[0], 1), price / self.price_scale, dtype=np.float32)
        return np.concatenate([features, column], axis=1)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Draw a question (and a price); returns its observation and ``{"row", "price"}``."""
        super().reset(seed=seed)
        self._row = int(self.np_random.integers(self.f1.shape[0]))
        self._price = float(self.prices[self.np_random.integers(len(self.prices))])
        obs = self.observe(self.features[self._row : self._row + 1], self._price)[0]
        return obs, {"row": self._row, "price": self._price}

    def step(self, action: np.int64 | int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Score path ``action`` on the drawn question; the episode ends."""
        a = int(action)
        if not 0 <= a < self.f1.shape[1]:
            raise ValueError(f"action {a} is not a path of this table (0..{self.f1.shape[1] - 1})")
        reward = self.f1[self._row, a] - self._price * self.cost[self._row, a] / self.ref_cost
        obs = self.observe(self.features[self._row : self._row + 1], self._price)[0]
        return (
            obs,
            float(reward),
            True,
            False,
            {"row": self._row, "price": self._price, "f1": self.f1[self._row, a]},
        )
