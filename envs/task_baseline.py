"""A per-question baseline subtracted from the task reward (variance reduction for PPO).

On real data one episode's token F1 varies far more across questions (sd ≈ 0.37 on LoCoMo with the
Qwen answerer) than across tier paths of the same question (paired sd ≈ 0.18–0.32). A policy
gradient that sees the raw F1 mostly learns which *questions* are easy. Subtracting the mean F1 seen
so far on the same question leaves the part the routing decision can change, as RLOO/GRPO's group
baselines do. The baseline depends only on the question and on earlier episodes, never on this
episode's actions, so the policy gradient stays unbiased; it only lowers its variance.

Validation and evaluation never use it: the objective they report is the raw ``r_task + λ·α·r_cost``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: ``reward.task_baseline`` values: no baseline, or the running mean per question.
TASK_BASELINES = ("none", "question")


class QuestionBaseline:
    """Running mean of the task score per question, with the mean over all questions as fallback.

    A question seen for the first time gets the mean over every episode so far (0 before any), so
    the first visit is centred too.
    """

    def __init__(self) -> None:
        self._sum: dict[str, float] = {}
        self._count: dict[str, int] = {}
        self._total = 0.0
        self._n = 0

    def value(self, question_id: str) -> float:
        """The baseline for the next episode on ``question_id`` (before it is added)."""
        n = self._count.get(question_id, 0)
        if n:
            return self._sum[question_id] / n
        return self._total / self._n if self._n else 0.0

    def update(self, question_id: str, r_task: float) -> None:
        """Add one finished episode's task score."""
        self._sum[question_id] = self._sum.get(question_id, 0.0) + float(r_task)
        self._count[question_id] = self._count.get(question_id, 0) + 1
        self._total += float(r_task)
        self._n += 1

    def __len__(self) -> int:
        """Number of distinct questions seen."""
        return len(self._count)

    def state_dict(self) -> dict[str, Any]:
        """Serializable state (per-question sums and counts)."""
        return {"sum": dict(self._sum), "count": dict(self._count)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore from :meth:`state_dict`.

        Raises:
            ValueError: If the sums and counts name different questions or a count is < 1.
        """
        sums = {str(k): float(v) for k, v in state["sum"].items()}
        counts = {str(k): int(v) for k, v in state["count"].items()}
        if set(sums) != set(counts) or any(c < 1 for c in counts.values()):
            raise ValueError("corrupt question baseline state: sums and counts disagree")
        self._sum, self._count = sums, counts
        self._total = sum(sums.values())
        self._n = sum(counts.values())


def make_task_baseline(kind: str) -> QuestionBaseline | None:
    """The baseline named by ``reward.task_baseline`` (None for ``"none"``).

    Raises:
        ValueError: On an unknown name.
    """
    if kind == "none":
        return None
    if kind == "question":
        return QuestionBaseline()
    raise ValueError(f"unknown reward.task_baseline {kind!r}; choose one of {TASK_BASELINES}")
