"""Reward shaping: ``reward = r_task + λ·α·r_cost`` on the last step of an episode."""

from __future__ import annotations

import collections
from collections.abc import Mapping
from typing import Any

import numpy as np

from common.cost_weight import check_lambda
from envs.config_schema import AlphaConfig, CostConfig
from envs.cost_normalizer import CostNormalizer, percentile_linear
from envs.task_baseline import QuestionBaseline

__all__ = [
    "ALPHA_MODES",
    "CostAlignment",
    "CostNormalizer",
    "RewardShaper",
    "percentile_linear",
]

ALPHA_MODES = ("frozen", "window", "fixed")


def _finite_task(r_task: float) -> float:
    rt = float(r_task)
    if not np.isfinite(rt):
        raise ValueError(f"r_task must be finite, got {r_task!r}")
    return rt


class CostAlignment:
    """The scale α that aligns the spread of the cost term with the task term.

    Args:
        config: The ``cost.alpha`` section (:class:`envs.config_schema.AlphaConfig`): the mode
            (``"frozen"``, ``"window"`` or ``"fixed"``, see docs/design/envs.md), the FIFO window of
            ``(r_task, r_cost)`` pairs, the warm-up after which a frozen α stops moving, the α of
            mode fixed (also used before ``min_history``), the floor of both standard deviations
            and α's clip range. Default: the schema's defaults.
        min_history: Pairs needed before α is estimated from data.

    Raises:
        ValueError: On an unknown mode or inconsistent limits.
    """

    def __init__(self, config: AlphaConfig | None = None, min_history: int = 2) -> None:
        c = config or AlphaConfig()
        mode, window, warmup, alpha = c.mode, c.window, c.warmup, c.value
        std_floor, alpha_min, alpha_max = c.std_floor, c.min, c.max
        if mode not in ALPHA_MODES:
            raise ValueError(f"unknown alpha mode {mode!r}; choose one of {ALPHA_MODES}")
        if int(window) < 1 or int(warmup) < 1 or int(min_history) < 1:
            raise ValueError(
                f"alpha window/warmup/min_history must be >= 1, got {window}/{warmup}/{min_history}"
            )
        if not 0.0 < alpha_min <= alpha_max or std_floor <= 0.0 or alpha <= 0.0:
            raise ValueError(
                f"need 0 < alpha_min <= alpha_max, std_floor > 0, alpha > 0; got {alpha_min}, {alpha_max}, "
                f"{std_floor}, {alpha}"
            )
        self.mode = mode
        self.window = int(window)
        self.warmup = int(warmup)
        self.alpha0 = float(alpha)
        self.std_floor = float(std_floor)
        self.alpha_min = float(alpha_min)
        self.alpha_max = float(alpha_max)
        self.min_history = int(min_history)
        self._task: collections.deque[float] = collections.deque(maxlen=self.window)
        self._cost: collections.deque[float] = collections.deque(maxlen=self.window)
        self.seen = 0
        self.frozen_alpha: float | None = None
        self.alpha = float(alpha)

    def _estimate(self) -> float:
        if len(self._task) < self.min_history:
            return self.alpha0
        s_task = max(float(np.std(self._task)), self.std_floor)
        s_cost = max(float(np.std(self._cost)), self.std_floor)
        return float(np.clip(s_task / s_cost, self.alpha_min, self.alpha_max))

    def update(self, r_task: float, r_cost: float) -> float:
        """Add one ``(r_task, r_cost)`` pair and return the α to use for it."""
        if self.mode == "fixed":
            self.alpha = self.alpha0
            return self.alpha
        if self.frozen_alpha is not None:
            return self.frozen_alpha
        self._task.append(float(r_task))
        self._cost.append(float(r_cost))
        self.seen += 1
        self.alpha = self._estimate()
        if self.mode == "frozen" and self.seen >= self.warmup:
            self.frozen_alpha = self.alpha
        return self.alpha

    def state_dict(self) -> dict[str, Any]:
        """Serializable state."""
        return {
            "mode": self.mode,
            "task": list(self._task),
            "cost": list(self._cost),
            "seen": self.seen,
            "alpha": self.alpha,
            "frozen_alpha": self.frozen_alpha,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore from :meth:`state_dict`."""
        if state["mode"] != self.mode:
            raise ValueError(f"saved alpha mode {state['mode']!r} != configured {self.mode!r}")
        self._task = collections.deque((float(v) for v in state["task"]), maxlen=self.window)
        self._cost = collections.deque((float(v) for v in state["cost"]), maxlen=self.window)
        self.seen = int(state["seen"])
        self.alpha = float(state["alpha"])
        self.frozen_alpha = None if state["frozen_alpha"] is None else float(state["frozen_alpha"])


class RewardShaper:
    """Combine task score and raw cost into the episode reward ``r_task + λ·α·r_cost``.

    Args:
        cost: The config's ``cost`` section (:class:`envs.config_schema.CostConfig`): its window,
            percentiles and ``alpha`` settings are the shaper's; the other keys (λ, unit,
            ``include_answer_cost``) belong to other consumers. Default: the schema's defaults.
        baseline: Optional per-question baseline (``reward.task_baseline``) subtracted from the
            task term of training rewards: ``reward = r_task − b(question) + λ·α·r_cost``. α is
            still estimated on the raw ``r_task``, so λ means the same with and without it, and
            :meth:`evaluate` (validation) never subtracts it.
        lambda_scale: Divide training rewards by ``1 + λ·α`` (``reward.lambda_scale``). A positive
            constant per λ leaves each λ's best policy unchanged; what it changes is the batch:
            without it a λ-conditioned run over λ ∈ {0, …, 10} has λ = 10 episodes whose cost
            term spreads ~10× wider than any λ = 0 reward, and PPO's advantage normalisation over
            the batch turns the λ = 0 task signal into noise (docs/results/locomo.md, run 4). :meth:`evaluate`
            stays unscaled, the objective as written.

    Raises:
        ValueError: On bad normaliser/α settings.
    """

    def __init__(
        self,
        cost: CostConfig | None = None,
        baseline: QuestionBaseline | None = None,
        *,
        lambda_scale: bool = False,
    ) -> None:
        c = cost or CostConfig()
        self.normalizer = CostNormalizer(window=c.window, low_pct=c.low_pct, high_pct=c.high_pct)
        self.alignment = CostAlignment(c.alpha)
        self.baseline = baseline
        self.lambda_scale = bool(lambda_scale)

    def shape(
        self, r_task: float, raw_cost: float, cost_lambda: float, question_id: str | None = None
    ) -> tuple[float, dict[str, float]]:
        """Reward for one finished episode; updates the cost window and the α history.

        The window and α do not depend on λ, so one shaper serves every λ of a λ-conditioned run.

        Args:
            r_task: Task score (token F1 or judge score, in [0, 1]).
            raw_cost: Raw episode cost in the configured unit (>= 0).
            cost_lambda: This episode's λ.
            question_id: The episode's question (needed when the shaper has a baseline).

        Returns:
            ``(reward, terms)`` where ``terms`` holds ``r_task``, ``raw_cost``, ``cost_norm``
            (ĉ), ``r_cost``, ``alpha``, ``cost_lambda``, ``cost_term`` (λ·α·r_cost),
            ``task_baseline`` (b, 0 without a baseline), ``reward_scale`` (the divisor, 1 without
            ``lambda_scale``), ``p_low``, ``p_high`` and ``reward``.

        Raises:
            ValueError: On a non-finite task score, an invalid cost or λ, or a baseline without
                a question id.
        """
        rt = _finite_task(r_task)
        lam = check_lambda(cost_lambda)
        c_hat, bounds = self.normalizer.normalise(raw_cost)
        r_cost = 1.0 - c_hat
        alpha = self.alignment.update(rt, r_cost)
        cost_term = lam * alpha * r_cost
        b = 0.0
        if self.baseline is not None:
            if question_id is None:
                raise ValueError("a reward shaper with a task baseline needs the episode's question_id")
            b = self.baseline.value(question_id)
            self.baseline.update(question_id, rt)
        scale = 1.0 + lam * alpha if self.lambda_scale else 1.0
        reward = (rt - b + cost_term) / scale
        terms = {
            "r_task": rt,
            "raw_cost": float(raw_cost),
            "cost_norm": c_hat,
            "r_cost": r_cost,
            "alpha": alpha,
            "cost_lambda": lam,
            "cost_term": cost_term,
            "task_baseline": b,
            "reward_scale": scale,
            "reward": reward,
            **bounds,
        }
        return reward, terms

    def evaluate(self, r_task: float, raw_cost: float, cost_lambda: float) -> float:
        """The reward this shaper would give now, without updating its window or α history.

        Used to score held-out (validation) episodes on the objective training optimises.
        Before any training episode (empty window) the cost term is 0. ``cost_lambda`` is the
        λ to score at.

        Raises:
            ValueError: On a non-finite task score, an invalid cost or λ.
        """
        rt, c = _finite_task(r_task), float(raw_cost)
        if not np.isfinite(c) or c < 0.0:  # checked here too: an empty window skips the normaliser
            raise ValueError(f"raw cost must be finite and >= 0, got {raw_cost!r}")
        lam = check_lambda(cost_lambda)
        if len(self.normalizer) == 0 or lam == 0.0:
            return rt
        c_hat, _ = self.normalizer.normalise(c, update=False)
        # CostAlignment.alpha is the α of the latest update (the frozen value once frozen).
        return rt + lam * self.alignment.alpha * (1.0 - c_hat)

    def state_dict(self) -> dict[str, Any]:
        """Serializable state (normaliser window, α history and the task baseline, if any)."""
        state: dict[str, Any] = {
            "normalizer": self.normalizer.state_dict(),
            "alignment": self.alignment.state_dict(),
        }
        if self.baseline is not None:
            state["task_baseline"] = self.baseline.state_dict()
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore from :meth:`state_dict`.

        Checkpoints written before the shaper stopped holding λ also carry ``cost_lambda``; it is
        ignored (a resume with another λ is refused by the config hash, the config being λ's owner).
        """
        self.normalizer.load_state_dict(state["normalizer"])
        self.alignment.load_state_dict(state["alignment"])
        # A shaper without a baseline also serves validation, which loads the training worker's
        # statistics and ignores its baseline.
        if self.baseline is not None:
            if "task_baseline" not in state:
                raise ValueError("saved reward-shaper state has no task baseline, but one is configured")
            self.baseline.load_state_dict(state["task_baseline"])
