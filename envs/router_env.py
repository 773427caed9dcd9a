"""The Gymnasium environment: one question per episode, one routing decision per module."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

from common.cost_weight import check_lambda
from envs.episode import TASK_METRICS, Episode, EpisodeRecord
from envs.reward import RewardShaper
from modules.tier import Tier

if TYPE_CHECKING:
    from envs.components import EnvComponents
    from envs.question_bank import QuestionItem


class MemoryRouterEnv(gym.Env[np.ndarray, np.int64]):
    """Route one question's memory pipeline, module by module.

    Args:
        items: The question bank (non-empty).
        components: Built by :func:`envs.components.make_components`.
        reward_shaper: The reward shaper (owns the cost window and α history).
        task_metric: ``"f1"`` (default), ``"em"`` or ``"judge"`` (needs ``components.judge``).
        seed: Seed of the question order (None = nondeterministic until ``reset(seed=...)``).
        include_answer_cost: Add the answer-generation cost to the cost the reward sees;
            None uses ``components.include_answer_cost``.
        max_tier: The dearest tier an action may choose; the action space is
            ``Discrete(max_tier + 1)`` (HIGH: all three tiers).

    Raises:
        ValueError: On an empty bank, an unknown metric or ``"judge"`` without a judge.
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 - Gymnasium's documented class attribute

    def __init__(
        self,
        items: Sequence[QuestionItem],
        components: EnvComponents,
        reward_shaper: RewardShaper,
        task_metric: str = "f1",
        seed: int | None = None,
        *,
        include_answer_cost: bool | None = None,
        max_tier: Tier = Tier.HIGH,
    ) -> None:
        super().__init__()
        if not items:
            raise ValueError("MemoryRouterEnv needs a non-empty question bank")
        if task_metric not in TASK_METRICS:
            raise ValueError(f"unknown task_metric {task_metric!r}; choose one of {TASK_METRICS}")
        if task_metric == "judge" and components.judge is None:
            raise ValueError(
                "task_metric='judge' needs a judge: enable judge in the config (judge.enabled: true)"
            )
        self.items = list(items)
        self.components = components
        self.reward_shaper = reward_shaper
        self.task_metric = task_metric
        self.include_answer_cost = (
            components.include_answer_cost if include_answer_cost is None else bool(include_answer_cost)
        )
        self.spec_obs = components.obs_builder.spec
        self.observation_space = self.spec_obs.space()
        self.max_tier = Tier.parse(max_tier)
        self.action_space = gym.spaces.Discrete(int(self.max_tier) + 1)
        self._order: np.ndarray = np.arange(len(self.items))
        self._cursor = 0
        self._episode: Episode | None = None
        self._item_index = -1
        self.episodes_done = 0
        #: The state before the current episode's reset, its reset options and the actions taken
        #: since: a resumed run restores the state and replays these to continue exactly here.
        self._resume_point: dict[str, Any] | None = None
        self._reseed(seed)

    # ------------------------------------------------------------------ question order
    def _reseed(self, seed: int | None) -> None:
        # gym.Env.reset(seed=...) owns the RNG; calling it here seeds np_random the standard way.
        super().reset(seed=seed)
        self._order = self.np_random.permutation(len(self.items))
        self._cursor = 0

    def _next_index(self) -> int:
        if self._cursor >= len(self._order):
            self._order = self.np_random.permutation(len(self.items))
            self._cursor = 0
        idx = int(self._order[self._cursor])
        self._cursor += 1
        return idx

    # ------------------------------------------------------------------ gym API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start the next question (``options={"index": i}`` picks bank item ``i``)."""
        if seed is not None:
            self._reseed(seed)
        options = options or {}
        self._resume_point = {"state": self.position_state(), "options": jsonable(options), "actions": []}
        if "index" in options:
            idx = int(options["index"])
            if not 0 <= idx < len(self.items):
                raise ValueError(f"reset option index={idx} outside the bank [0, {len(self.items)})")
        else:
            idx = self._next_index()
        self._item_index = idx
        item = self.items[idx]
        self._episode = Episode(item, self.components, cost_lambda=self._episode_lambda(options))
        obs = self._episode.observation()
        info = {
            "question_id": item.question.question_id,
            "category": str(item.question.category),
            "module": self._episode.module,
            "bank_index": idx,
            "cost_lambda": self._episode.cost_lambda,
        }
        return obs, info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Run the current module at the tier ``action`` (0/1/2)."""
        ep = self._episode
        if ep is None or ep.done:
            raise RuntimeError("MemoryRouterEnv.step() called without an active episode: call reset() first")
        tier = self._tier(action)
        if self._resume_point is not None:
            self._resume_point["actions"].append(int(tier))
        out = ep.step(tier)
        info: dict[str, Any] = {
            "module": str(out.module),
            "tier": tier.name,
            "step_cost": out.cost.value,
        }
        if not ep.done:
            return ep.observation(), 0.0, False, False, info
        record = ep.finish(run_judge=self.task_metric == "judge")
        raw_cost = episode_cost(record, self.include_answer_cost)
        task = record.task_score(self.task_metric)
        reward, terms = self.reward_shaper.shape(task, raw_cost, ep.cost_lambda, record.question_id)
        record = _with_reward(record, reward)
        self.episodes_done += 1
        info.update(terminal_info(record, terms, raw_cost))
        info["cost_lambda"] = ep.cost_lambda
        self._episode = None
        return self.components.obs_builder.terminal(), float(reward), True, False, info

    def _episode_lambda(self, options: dict[str, Any]) -> float:
        if "cost_lambda" in options:
            value = options["cost_lambda"]
            return check_lambda(value, f"reset option cost_lambda={value!r}:")
        # Drawn after the question, so the question order is the one of a run without λ draws.
        return self.components.cost_weight.sample(self.np_random)

    def _tier(self, action: Any) -> Tier:
        # The one place an action is checked: the episode, pipeline and modules below take a Tier.
        # As Gymnasium's CartPole does, the action space decides what is valid (an int or a 0-d
        # integer array in range); a clear error instead of an assert, which python -O would drop.
        if not self.action_space.contains(action):
            allowed = ", ".join(f"{int(t)} {t.name}" for t in Tier if t <= self.max_tier)
            raise ValueError(f"action must be an integer in {self.action_space} ({allowed}), got {action!r}")
        return Tier(int(action))

    # ------------------------------------------------------------------ resume support
    def state_dict(self) -> dict[str, Any]:
        """Everything a resumed run needs to continue exactly (JSON-friendly).

        That is the reward-shaper statistics, the question-order RNG, and the current epoch's
        permutation and position in it.
        """
        return {"reward_shaper": self.reward_shaper.state_dict(), **self.position_state()}

    def position_state(self) -> dict[str, Any]:
        """:meth:`state_dict` without the reward statistics: where the question order stands."""
        return {
            "np_random": jsonable(self.np_random.bit_generator.state),
            "order": [int(i) for i in self._order],
            "cursor": self._cursor,
            "episodes_done": self.episodes_done,
            "n_items": len(self.items),
        }

    def resume_point(self) -> dict[str, Any] | None:
        """Where the current episode started and what was done since (None before the first reset).

        ``state`` is :meth:`position_state` just before the episode's ``reset``, so restoring it and
        resetting draws the same question and λ again; ``actions`` are the tiers taken since. The
        reward statistics are not in it: no episode ended since the reset, so they are the current ones.
        """
        return copy.deepcopy(self._resume_point)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output (the bank must have the same size).

        Raises:
            ValueError: If the saved state is for a bank of a different size.
        """
        if int(state["n_items"]) != len(self.items):
            raise ValueError(
                f"saved env state is for {state['n_items']} questions, this bank has {len(self.items)}"
            )
        self.reward_shaper.load_state_dict(state["reward_shaper"])
        bitgen_state = state["np_random"]
        rng = np.random.Generator(getattr(np.random, bitgen_state["bit_generator"])())
        rng.bit_generator.state = bitgen_state
        self.np_random = rng
        self._order = np.asarray(state["order"], dtype=np.int64)
        self._cursor = int(state["cursor"])
        self.episodes_done = int(state["episodes_done"])


def _with_reward(record: EpisodeRecord, reward: float) -> EpisodeRecord:
    from dataclasses import replace

    return replace(record, reward=float(reward))


def terminal_info(record: EpisodeRecord, terms: dict[str, float], raw_cost: float) -> dict[str, Any]:
    """The terminal-step ``info`` entries (documented in docs/design/envs.md)."""
    return {
        "question_id": record.question_id,
        "category": record.category,
        "tiers": {m: t.name for m, t in zip(record.module_costs, record.tiers, strict=True)},
        "cost": {
            "module": record.module_cost,
            "answer": record.answer_cost,
            "total": record.total_cost,
            "reward_cost": raw_cost,
            "per_module": {m: c.value for m, c in record.module_costs.items()},
        },
        "f1": record.f1,
        "em": record.em,
        "judge": record.judge,
        "judge_failed": record.judge_failed,
        "cache_hit_rate": record.cache_hit_rate,
        "reward_terms": dict(terms),
        "record": record,
    }


def episode_cost(record: EpisodeRecord, include_answer_cost: bool) -> float:
    """The raw cost the reward sees: module cost, plus answer generation if configured."""
    return record.module_cost + (record.answer_cost if include_answer_cost else 0.0)


def jsonable(obj: Any) -> Any:
    """Make a numpy bit-generator state (which holds numpy ints) plain JSON values."""
    if isinstance(obj, dict):
        return {k: jsonable(v) for k, v in obj.items()}
    if isinstance(obj, np.integer):
        return int(obj)
    return obj
