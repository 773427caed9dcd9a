"""One question, run step by step: the code shared by the training env and the evaluation loop."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from benchmarks.metrics import score_answer
from benchmarks.types import Question
from envs.protocols import RoutableRun, Scorer
from modules.base import ModuleOutput
from modules.cost import Cost
from modules.tier import MODULE_ORDER, Tier

if TYPE_CHECKING:
    from envs.components import EnvComponents
    from envs.question_bank import QuestionItem

#: Task metrics the reward can use.
TASK_METRICS = ("f1", "em", "judge")


@dataclass(frozen=True)
class EpisodeRecord:
    """Everything measured about one routed question.

    Attributes:
        question_id: The question's id.
        category: Its category label (for per-category reports).
        tiers: The tier chosen for each module, in ``MODULE_ORDER``.
        module_costs: Metered cost of each module call, by module name.
        module_cost: Sum of ``module_costs`` values (the router's cost).
        answer_cost: Cost value of the answer generation.
        total_cost: ``module_cost + answer_cost``.
        f1: Token F1 of the prediction (benchmark's variant, e.g. ``f1_max`` for LoCoMo cat 1).
        em: Exact match.
        judge: LLM-judge score in [0, 1], or None when no judge ran.
        judge_failed: The judge ran but its verdict could not be parsed (``judge`` is then None; the
            training reward counts it as 0, reports leave it out of the judge mean and count it).
        failures: Failed or unparseable calls (modules and answer).
        latency_s: Metered latency of all calls (modules and answer).
        prediction: The generated answer.
        gold: The gold answer.
        cache_hits: LLM calls replayed from the cache (modules and answer).
        calls: LLM calls made (modules and answer).
        sample_id: The history the question belongs to.
        benchmark: Benchmark name.
        reward: The shaped reward, when the record comes from the training env (else None).
        cost_lambda: The λ the router saw in its observation for this question.
        judge_protocol: The judge protocol that ran ("" when none did; see :mod:`benchmarks.judge`).
        judge_prompt_hash: Hash of that protocol's prompts ("" when no judge ran).
        errors: Why calls failed (the first few distinct reasons; empty when none did).
    """

    question_id: str
    category: str
    tiers: tuple[Tier, ...]
    module_costs: dict[str, Cost]
    module_cost: float
    answer_cost: float
    total_cost: float
    f1: float
    em: float
    judge: float | None
    judge_failed: bool
    failures: int
    latency_s: float
    prediction: str
    gold: str
    cache_hits: int
    calls: int
    sample_id: str = ""
    benchmark: str = ""
    reward: float | None = field(default=None, compare=False)
    cost_lambda: float = 0.0
    judge_protocol: str = ""
    judge_prompt_hash: str = ""
    errors: tuple[str, ...] = field(default=(), compare=False)

    @property
    def cache_hit_rate(self) -> float:
        """Fraction of LLM calls served from the cache (0 when no LLM call was made)."""
        return self.cache_hits / self.calls if self.calls else 0.0

    def task_score(self, metric: str) -> float:
        """The task reward ``r_task`` under ``metric`` (``"f1"``, ``"em"`` or ``"judge"``).

        A missing or failed judge verdict counts as 0, like the reference implementation.

        Raises:
            ValueError: For an unknown metric.
        """
        if metric == "f1":
            return self.f1
        if metric == "em":
            return self.em
        if metric == "judge":
            return 0.0 if self.judge is None or self.judge_failed else float(self.judge)
        raise ValueError(f"unknown task metric {metric!r}; choose one of {TASK_METRICS}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (tiers as names, costs as dicts)."""
        return {
            "question_id": self.question_id,
            "category": self.category,
            "sample_id": self.sample_id,
            "benchmark": self.benchmark,
            "tiers": [t.name for t in self.tiers],
            "module_costs": {m: c.to_dict() for m, c in self.module_costs.items()},
            "module_cost": self.module_cost,
            "answer_cost": self.answer_cost,
            "total_cost": self.total_cost,
            "f1": self.f1,
            "em": self.em,
            "judge": self.judge,
            "judge_failed": self.judge_failed,
            "failures": self.failures,
            "latency_s": self.latency_s,
            "prediction": self.prediction,
            "gold": self.gold,
            "cache_hits": self.cache_hits,
            "calls": self.calls,
            "cache_hit_rate": self.cache_hit_rate,
            "reward": self.reward,
            "cost_lambda": self.cost_lambda,
            "judge_protocol": self.judge_protocol,
            "judge_prompt_hash": self.judge_prompt_hash,
            **({"errors": list(self.errors)} if self.errors else {}),
        }


def _default_scorer(question: Question, prediction: str, benchmark: str) -> dict[str, float]:
    return score_answer(question, prediction, benchmark)


class Episode:
    """Drive one question through the pipeline, one routed module at a time.

    Args:
        item: The question and its retrieved evidence.
        components: Encoder, pipeline, answerer, judge, observation builder, ...
        cost_lambda: This episode's λ, shown to the router in every observation; None uses
            ``components.cost_weight.default`` (the env draws one per episode from the weight).
    """

    def __init__(
        self, item: QuestionItem, components: EnvComponents, cost_lambda: float | None = None
    ) -> None:
        self.item = item
        self.components = components
        self.cost_lambda = components.cost_weight.default if cost_lambda is None else float(cost_lambda)
        q = item.question
        self.run: RoutableRun = components.pipeline.begin(
            q.question, list(item.evidence), question_date=q.question_date
        )
        self.tiers: list[Tier] = []
        self.module_costs: dict[str, Cost] = {}
        self._cost_so_far = 0.0

    @functools.cached_property
    def query_emb(self) -> np.ndarray:
        """The question's embedding, computed at the first observation (a fixed path never asks)."""
        return self.components.obs_builder.embed(self.item.question.question)

    @property
    def done(self) -> bool:
        """True once every module has run."""
        return self.run.done

    @property
    def module(self) -> str:
        """Name of the module about to run."""
        return self.run.next_module

    def observation(self) -> np.ndarray:
        """Observation for the module about to run (see :mod:`envs.observation`).

        Raises:
            RuntimeError: If the episode is already finished.
        """
        if self.done:
            raise RuntimeError("Episode.observation() called after the last module ran")
        builder = self.components.obs_builder
        module = self.module
        if module not in builder.index:
            raise RuntimeError(
                f"pipeline asked for module {module!r}, not in the observation spec {MODULE_ORDER}"
            )
        idx = builder.index[module]
        text = self.run.current_input_text()
        scalars = builder.scalar_features(
            idx, builder.spec.n_modules, text, self._cost_so_far, self.cost_lambda
        )
        return builder.build(idx, self.query_emb, text, scalars)

    def step(self, tier: Tier) -> ModuleOutput:
        """Run the next module at ``tier`` and return its output."""
        if self.done:
            raise RuntimeError("Episode.step() called after the last module ran")
        out = self.run.step(tier)
        self.tiers.append(tier)
        self.module_costs[out.module] = out.cost
        self._cost_so_far += out.cost.value
        return out

    def finish(self, *, run_judge: bool) -> EpisodeRecord:
        """Answer, score and summarise the finished episode.

        Args:
            run_judge: Ask the LLM judge (if the components have one).

        Raises:
            RuntimeError: If modules are still pending.
        """
        if not self.done:
            raise RuntimeError(f"Episode.finish() called before all modules ran (next: {self.module!r})")
        c = self.components
        q = self.item.question
        result = self.run.result()
        prediction, answer_cost = c.answerer.answer(q, result.memory_text)
        scorer: Scorer = c.scorer or _default_scorer
        scores = scorer(q, prediction, self.item.benchmark)
        judge_score: float | None = None
        judge_failed = False
        protocol = prompt_hash = ""
        if run_judge and c.judge is not None:
            verdict = c.judge.judge(q, prediction)
            judge_failed = verdict.failed
            judge_score = verdict.score
            protocol, prompt_hash = verdict.protocol, verdict.prompt_hash
        module_total = sum(self.module_costs.values(), Cost())
        both = module_total + answer_cost
        return EpisodeRecord(
            question_id=q.question_id,
            category=str(q.category),
            tiers=tuple(self.tiers),
            module_costs=dict(self.module_costs),
            module_cost=float(module_total.value),
            answer_cost=float(answer_cost.value),
            total_cost=float(both.value),
            f1=float(scores["f1"]),
            em=float(scores.get("em", 0.0)),
            judge=judge_score,
            judge_failed=judge_failed,
            failures=int(both.failures),
            latency_s=float(both.latency_s),
            prediction=prediction,
            gold=str(q.answer),
            cache_hits=int(both.cache_hits),
            calls=int(both.calls),
            sample_id=self.item.sample_id,
            benchmark=self.item.benchmark,
            cost_lambda=self.cost_lambda,
            judge_protocol=protocol,
            judge_prompt_hash=prompt_hash,
            errors=both.errors,
        )
