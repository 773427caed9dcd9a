"""The roles an :class:`~envs.components.EnvComponents` fills, as Protocols."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from benchmarks.judge import JudgeResult
from benchmarks.types import Question
from modules.base import ModuleOutput
from modules.cache import CachedLLM
from modules.cost import Cost
from modules.pipeline import PipelineResult
from modules.tier import Tier
from modules.types import Evidence

#: ``(question, prediction, benchmark) -> {"f1": ..., "em": ...}``
#: (the default is ``benchmarks.metrics.score_answer``).
Scorer = Callable[[Question, str, str], dict[str, float]]


class RoutableRun(Protocol):
    """One question going through the pipeline, one routed module at a time."""

    @property
    def done(self) -> bool:
        """True once every module has run."""
        ...

    @property
    def next_module(self) -> str:
        """The module about to run (raises once the run is done)."""
        ...

    def current_input_text(self) -> str:
        """What the module about to run will read (embedded into the router's observation)."""
        ...

    def step(self, tier: Tier) -> ModuleOutput:
        """Run the next module at ``tier``."""
        ...

    def result(self) -> PipelineResult:
        """The finished run's memory text, outputs, cost and tiers."""
        ...


class RoutablePipeline(Protocol):
    """A pipeline the router can drive step by step."""

    def begin(
        self, query: str, evidence: Sequence[Evidence], question_date: str | None = None
    ) -> RoutableRun:
        """Start a run for one question over its retrieved evidence."""
        ...


class Answerer(Protocol):
    """Answers a question from the pipeline's memory text."""

    #: The cached LLM behind the answers (its token counter sizes the answerer's context).
    llm: CachedLLM

    def answer(self, question: Question, memory_text: str) -> tuple[str, Cost]:
        """Return ``(prediction, cost of the answer call)``."""
        ...


class AnswerJudge(Protocol):
    """Scores a prediction with an LLM judge."""

    def judge(self, question: Question, prediction: str) -> JudgeResult:
        """The verdict on ``prediction`` (a failed verdict has ``score=None``, ``failed=True``)."""
        ...


__all__ = ["AnswerJudge", "Answerer", "RoutablePipeline", "RoutableRun", "Scorer"]
