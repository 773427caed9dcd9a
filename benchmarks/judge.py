"""LLM-as-judge with fixed, versioned prompts, under a choice of protocol."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from benchmarks.judge_protocol import JudgeProtocol, hash_templates, json_object
from benchmarks.types import Question
from modules.backends.base import GenerationRequest
from modules.cache import CachedLLM
from modules.cost import Cost
from modules.pricing import CostModel

PROMPT_VERSION = "judge-v1"

JUDGE_PROMPT = """You grade answers to questions about a long conversation history or a set of documents.
Compare the RESPONSE with the GOLD answer and give a score:
1 = the response states the gold answer's meaning (paraphrases, equivalent dates or numbers,
and extra correct detail are fine);
0.5 = partially correct (some of several required items, or the right fact with a wrong detail);
0 = wrong, contradicts the gold answer, or does not answer.
If the gold answer says the information is not available, score 1 only if the response also
says it cannot answer.
Reply with JSON only: {{"explanation": "<one short sentence>", "score": <0, 0.5 or 1>}}

Question: {question}
GOLD answer: {gold}
RESPONSE: {prediction}"""

#: Identifies the exact judging instructions; stored with every judge score.
PROMPT_HASH = hash_templates(PROMPT_VERSION, {"default": JUDGE_PROMPT})

VALID_SCORES = (0.0, 0.5, 1.0)

JUDGE_SCHEMA = {
    "type": "object",
    "properties": {"explanation": {"type": "string"}, "score": {"type": "number", "enum": [0, 0.5, 1]}},
    "required": ["explanation", "score"],
}

_SCORE_RE = re.compile(r'"score"\s*:\s*"?(\d+(?:\.\d+)?)')


@dataclass(frozen=True)
class JudgeResult:
    """One judge verdict.

    Attributes:
        score: 0, 0.5 or 1; ``None`` when the judge failed.
        failed: The call errored or its output could not be parsed.
        raw: The judge's raw output ("" on a call error).
        explanation: The judge's explanation (if parsed).
        error: Why it failed.
        prompt_hash: Hash of the protocol's prompts (:data:`PROMPT_HASH` for ``budgetmem``).
        cost: What the judge call cost.
        protocol: The protocol's name.
        excluded: The protocol does not judge this question (no call was made).
    """

    score: float | None
    failed: bool
    raw: str
    explanation: str = ""
    error: str | None = None
    prompt_hash: str = PROMPT_HASH
    cost: Cost | None = None
    protocol: str = "budgetmem"
    excluded: bool = False


def parse_judge_output(raw: str) -> tuple[float, str]:
    """Parse ``{"explanation": ..., "score": ...}`` from a judge's output.

    Tolerates code fences and text around the JSON object; as a last resort reads a
    ``"score": x`` pair from a broken object.

    Returns:
        ``(score, explanation)``.

    Raises:
        ValueError: If no valid score in {0, 0.5, 1} can be read.
    """
    obj = json_object(raw)
    if obj is not None and "score" in obj:
        value, explanation = obj["score"], str(obj.get("explanation", ""))
    else:
        m = _SCORE_RE.search(raw)
        if m is None:
            raise ValueError(f"no JSON score in judge output {raw[:80]!r}")
        value, explanation = m.group(1), ""
    try:
        score = float(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"judge score {value!r} is not a number") from exc
    for valid in VALID_SCORES:
        if abs(score - valid) < 1e-9:
            return valid, explanation
    raise ValueError(f"judge score {score} not in {{0, 0.5, 1}}")


class BudgetMemJudge(JudgeProtocol):
    """BudgetMem's graded 0 / 0.5 / 1 judge (:data:`JUDGE_PROMPT`, :func:`parse_judge_output`)."""

    name: ClassVar[str] = "budgetmem"
    version: ClassVar[str] = PROMPT_VERSION
    json_schema: ClassVar[dict[str, Any] | None] = JUDGE_SCHEMA

    def templates(self) -> dict[str, str]:
        """The one template."""
        return {"default": JUDGE_PROMPT}

    def parse(self, raw: str) -> tuple[float, str]:
        """See :func:`parse_judge_output`."""
        return parse_judge_output(raw)


def _protocols() -> dict[str, JudgeProtocol]:
    from benchmarks.judge_protocols import LoCoMoJudge, LongMemEvalJudge

    return {p.name: p for p in (BudgetMemJudge(), LoCoMoJudge(), LongMemEvalJudge())}


#: name -> protocol (``judge.protocol`` in configs).
PROTOCOLS: dict[str, JudgeProtocol] = _protocols()


def get_protocol(name: str | JudgeProtocol | None) -> JudgeProtocol:
    """The protocol called ``name`` (None: ``budgetmem``; a protocol instance is returned as is).

    Raises:
        KeyError: For an unknown name (the message lists the known ones).
    """
    if isinstance(name, JudgeProtocol):
        return name
    key = name or "budgetmem"
    if key not in PROTOCOLS:
        raise KeyError(f"unknown judge protocol {key!r}: expected one of {', '.join(sorted(PROTOCOLS))}")
    return PROTOCOLS[key]


class Judge:
    """Scores predictions with an LLM through the call cache.

    Args:
        llm: The judge model (any backend wrapped in :class:`~modules.cache.CachedLLM`).
        cost_model: Prices the judge calls (default: GFLOPs).
        max_tokens: Generation cap of a verdict (default: the protocol's).
        use_schema: Ask the backend to constrain output to the protocol's JSON schema where supported.
        protocol: A protocol name or instance (default ``budgetmem``).
    """

    def __init__(
        self,
        llm: CachedLLM,
        cost_model: CostModel | None = None,
        max_tokens: int | None = None,
        use_schema: bool = True,
        protocol: str | JudgeProtocol | None = None,
    ) -> None:
        self.llm = llm
        self.cost_model = cost_model or CostModel()
        self.protocol = get_protocol(protocol)
        self.max_tokens = self.protocol.max_tokens if max_tokens is None else max_tokens
        self.use_schema = use_schema
        self.prompt_hash = self.protocol.prompt_hash

    def request(self, question: Question, prediction: str) -> GenerationRequest:
        """The generation request judging ``prediction`` for ``question``."""
        return GenerationRequest(
            messages=({"role": "user", "content": self.protocol.prompt(question, prediction)},),
            max_tokens=self.max_tokens,
            json_schema=self.protocol.json_schema if self.use_schema else None,
        )

    def _result(self, score: float | None, failed: bool, raw: str, **kw: Any) -> JudgeResult:
        name = self.protocol.name
        return JudgeResult(score, failed, raw, prompt_hash=self.prompt_hash, protocol=name, **kw)

    def judge_many(self, items: Sequence[tuple[Question, str]]) -> list[JudgeResult]:
        """Judge a batch of ``(question, prediction)`` pairs in one backend batch (excluded: no call)."""
        out: list[JudgeResult | None] = []
        todo: list[tuple[int, Question, str]] = []
        for q, p in items:
            reason = self.protocol.excluded(q)
            out.append(self._result(None, False, "", error=reason, excluded=True) if reason else None)
            if not reason:
                todo.append((len(out) - 1, q, p))
        requests = [self.request(q, p) for _, q, p in todo]
        tags = {"module": "judge", "prompt": self.prompt_hash}
        results = self.llm.generate(requests, tags=tags) if requests else []
        for (i, _, _), res in zip(todo, results, strict=True):
            cost = self.cost_model.llm(res)
            if not res.ok:
                out[i] = self._result(None, True, res.text, error=res.error or "call failed", cost=cost)
                continue
            try:
                score, explanation = self.protocol.parse(res.text)
            except ValueError as exc:
                out[i] = self._result(None, True, res.text, error=str(exc), cost=cost)
                continue
            out[i] = self._result(score, False, res.text, explanation=explanation, cost=cost)
        return [r for r in out if r is not None]

    def judge(self, question: Question, prediction: str) -> JudgeResult:
        """Judge one prediction."""
        return self.judge_many([(question, prediction)])[0]

