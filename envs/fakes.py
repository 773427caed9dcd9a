"""Deterministic stand-ins for unit tests of the env plumbing and of the learning loop."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from benchmarks.types import Question
from common.cost_weight import CostWeight
from envs.components import EnvComponents
from envs.observation import ObservationBuilder, ObservationSpec
from envs.protocols import AnswerJudge
from envs.question_bank import QuestionItem
from memory.encoder import Encoder, get_encoder
from modules.backends.base import GenerationRequest
from modules.backends.fake import FakeBackend, request_text
from modules.base import ModuleOutput
from modules.cache import CachedLLM, CallCache
from modules.cost import Cost
from modules.pipeline import PipelineResult
from modules.pricing import CostModel
from modules.tier import MODULE_ORDER, Tier
from modules.types import Evidence

#: Metered cost of one module call per tier (GFLOP-like units).
TIER_COSTS: dict[Tier, float] = {Tier.LOW: 0.1, Tier.MID: 1.0, Tier.HIGH: 3.0}

#: Minimum tier each question type needs, by module (modules not listed need LOW).
REQUIREMENTS: dict[str, dict[str, Tier]] = {
    "when": {"temporal": Tier.HIGH},
    "who": {"entity": Tier.HIGH},
    "what": {"topic": Tier.MID},
}

#: The cheapest tiers that answer each question type correctly, in MODULE_ORDER.
OPTIMAL_TIERS: dict[str, tuple[Tier, ...]] = {
    qtype: tuple(req.get(m, Tier.LOW) for m in MODULE_ORDER) for qtype, req in REQUIREMENTS.items()
}

_SUBJECTS = ("Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Grace", "Heidi", "Ivan", "Judy")
_TEMPLATES = {
    "when": "when did {s} visit the museum",
    "who": "who did {s} meet at the party",
    "what": "what did {s} talk about at dinner",
}


class FakePipelineRun:
    """One question's run through the fake pipeline (the ``envs.protocols.RoutableRun`` role).

    It returns the real ``ModuleOutput`` and ``PipelineResult`` values, so the env code it
    exercises sees exactly the types a real run gives.
    """

    def __init__(self, query: str, evidence: Sequence[Evidence]) -> None:
        self.query = query
        self.evidence = tuple(evidence)
        self.outputs: dict[str, ModuleOutput] = {}

    @property
    def done(self) -> bool:
        """All five modules ran."""
        return len(self.outputs) == len(MODULE_ORDER)

    @property
    def next_module(self) -> str:
        """The module about to run."""
        if self.done:
            raise RuntimeError("fake pipeline run is finished")
        return MODULE_ORDER[len(self.outputs)]

    def current_input_text(self) -> str:
        """Evidence for the filter, the previous module's output text afterwards."""
        if not self.outputs:
            return "\n".join(e.text for e in self.evidence)
        return list(self.outputs.values())[-1].text

    def step(self, tier: Tier) -> ModuleOutput:
        """Run the next module at ``tier``."""
        module = self.next_module
        text = f"{module} {tier.name.lower()} notes on: {self.query}"
        out = ModuleOutput(module, tier, text, text, Cost(value=TIER_COSTS[tier]))
        self.outputs[module] = out
        return out

    def result(self) -> PipelineResult:
        """The memory text lists every module's tier (which the fake answerer reads)."""
        if not self.done:
            raise RuntimeError("fake pipeline run is not finished")
        memory = " ".join(f"{m}={o.tier.name}" for m, o in self.outputs.items())
        total = sum((o.cost for o in self.outputs.values()), Cost())
        return PipelineResult(memory, dict(self.outputs), total, tuple(o.tier for o in self.outputs.values()))


class FakePipeline:
    """``begin(query, evidence, question_date)`` -> :class:`FakePipelineRun` (``RoutablePipeline``)."""

    def begin(
        self, query: str, evidence: Sequence[Evidence], question_date: str | None = None
    ) -> FakePipelineRun:
        """Start a run."""
        return FakePipelineRun(query, evidence)


def _tiers_in(memory_text: str) -> dict[str, Tier]:
    return {m: Tier[t] for m, t in re.findall(r"(\w+)=(LOW|MID|HIGH)", memory_text)}


def question_type(question: str) -> str:
    """The synthetic question type: its first word (``when``/``who``/``what``)."""
    first = question.split()[0].lower() if question.split() else ""
    if first not in REQUIREMENTS:
        raise ValueError(f"fake task question must start with one of {sorted(REQUIREMENTS)}: {question!r}")
    return first


class FakeAnswerer:
    """Answers through a real ``CachedLLM`` over the fake backend; right iff the tiers suffice.

    The backend's responder reads the tiers from the prompt (the memory text) and returns the
    gold answer when every requirement of the question type is met, else ``"unknown"``.
    Going through ``CachedLLM`` and ``CostModel`` exercises cache-hit counting and pricing.
    """

    def __init__(self, cache: CallCache | None = None, cost_model: CostModel | None = None) -> None:
        def responder(request: GenerationRequest) -> str:
            text = request_text(request)
            m = re.search(r"QUESTION: (.*)\nGOLD: (.*)\nMEMORY: (.*)", text)
            if m is None:
                return "unknown"
            tiers = _tiers_in(m.group(3))
            need = REQUIREMENTS[question_type(m.group(1))]
            ok = all(tiers.get(mod, Tier.LOW) >= t for mod, t in need.items())
            return m.group(2) if ok else "unknown"

        self.llm = CachedLLM(FakeBackend(responder=responder), cache)
        self.cost_model = cost_model or CostModel(unit="gflops")

    def answer(self, question: Question, memory_text: str) -> tuple[str, Cost]:
        """Return ``(prediction, cost)``."""
        prompt = f"QUESTION: {question.question}\nGOLD: {question.answer}\nMEMORY: {memory_text}"
        res = self.llm.generate([GenerationRequest(prompt=prompt, max_tokens=16)], tags={"module": "answer"})[
            0
        ]
        return res.text.strip(), self.cost_model.llm(res)


def token_f1_scorer(question: Question, prediction: str, benchmark: str) -> dict[str, float]:
    """Plain bag-of-words F1 / EM (the fake task needs no benchmark-specific normalisation)."""
    pred = prediction.lower().split()
    gold = str(question.answer).lower().split()
    common = sum(min(pred.count(w), gold.count(w)) for w in set(pred))
    if not pred or not gold or common == 0:
        f1 = 0.0
    else:
        p, r = common / len(pred), common / len(gold)
        f1 = 2 * p * r / (p + r)
    return {"f1": f1, "em": float(pred == gold)}


def make_fake_bank(n_per_type: int = 10, k: int = 3) -> list[QuestionItem]:
    """Synthetic questions of the three types, with hashing-friendly evidence texts."""
    items: list[QuestionItem] = []
    for qtype, template in _TEMPLATES.items():
        for i in range(n_per_type):
            s = _SUBJECTS[i % len(_SUBJECTS)]
            text = template.format(s=s) + (f" number {i}" if i >= len(_SUBJECTS) else "")
            q = Question(
                question_id=f"{qtype}-{i}", question=text, answer=f"answer {qtype} {i}", category=qtype
            )
            ev = tuple(
                Evidence(
                    chunk_id=f"{qtype}-{i}-{j}",
                    text=f"{s} chunk {j} about {qtype} things",
                    score=1.0 - j / 10,
                )
                for j in range(k)
            )
            items.append(QuestionItem(question=q, sample_id=f"fake-{qtype}", benchmark="fake", evidence=ev))
    return items


def make_fake_components(
    *,
    cost_weight: CostWeight | None = None,
    cache: CallCache | None = None,
    include_answer_cost: bool = False,
    judge: AnswerJudge | None = None,
    task_metric: str = "f1",
    encoder: Encoder | None = None,
    extra: Mapping[str, Any] | None = None,
) -> EnvComponents:
    """Components for the synthetic task: hashing encoder, fake pipeline, fake-backend answerer."""
    enc = encoder if encoder is not None else get_encoder("hashing")
    cost_model = CostModel(unit="gflops")
    answerer = FakeAnswerer(cache, cost_model)
    return EnvComponents(
        encoder=enc,
        pipeline=FakePipeline(),
        answerer=answerer,
        judge=judge,
        cost_model=cost_model,
        cache=cache,
        obs_builder=ObservationBuilder(ObservationSpec(embed_dim=int(enc.dim)), enc),
        benchmark="fake",
        cost_weight=cost_weight or CostWeight(),
        include_answer_cost=include_answer_cost,
        task_metric=task_metric,
        scorer=token_f1_scorer,
        llms={"answer": answerer.llm},
        config=dict(extra or {}),
    )
