"""LLM-as-judge with a fixed, versioned prompt.

The judge sees the question, the gold answer and the prediction and must reply with JSON
``{"explanation": str, "score": 0 | 0.5 | 1}``. :data:`PROMPT_HASH` (sha256 of the prompt
template and the version tag) is recorded with every result, so scores from different
prompts are never mixed silently.

A call that errors or whose output cannot be parsed is a *failure*: ``score=None`` and
``failed=True``. It is counted, never turned into a 0 (BudgetMem scores parse failures as 0,
which biases judge means downward whenever the judge misbehaves).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

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
PROMPT_HASH = hashlib.sha256(f"{PROMPT_VERSION}\n{JUDGE_PROMPT}".encode()).hexdigest()[:16]

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
        prompt_hash: :data:`PROMPT_HASH` of the prompt used.
        cost: What the judge call cost.
    """

    score: float | None
    failed: bool
    raw: str
    explanation: str = ""
    error: str | None = None
    prompt_hash: str = PROMPT_HASH
    cost: Cost | None = None


def parse_judge_output(raw: str) -> tuple[float, str]:
    """Parse ``{"explanation": ..., "score": ...}`` from a judge's output.

    Tolerates code fences and text around the JSON object; as a last resort reads a
    ``"score": x`` pair from a broken object.

    Returns:
        ``(score, explanation)``.

    Raises:
        ValueError: If no valid score in {0, 0.5, 1} can be read.
    """
    start, end = raw.find("{"), raw.rfind("}")
    obj = None
    if start != -1 and end > start:
        try:
            obj = json.loads(raw[start : end + 1])
        except json.JSONDecodeError:
            obj = None
    if isinstance(obj, dict) and "score" in obj:
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


class Judge:
    """Scores predictions with an LLM through the call cache.

    Args:
        llm: The judge model (any backend wrapped in :class:`~modules.cache.CachedLLM`).
        cost_model: Prices the judge calls (default: GFLOPs).
        max_tokens: Generation cap of a verdict.
        use_schema: Ask the backend to constrain output to :data:`JUDGE_SCHEMA` where supported.
    """

    def __init__(
        self,
        llm: CachedLLM,
        cost_model: CostModel | None = None,
        max_tokens: int = 160,
        use_schema: bool = True,
    ) -> None:
        self.llm = llm
        self.cost_model = cost_model or CostModel()
        self.max_tokens = max_tokens
        self.use_schema = use_schema

    def request(self, question: Question, prediction: str) -> GenerationRequest:
        """The generation request judging ``prediction`` for ``question``."""
        prompt = JUDGE_PROMPT.format(question=question.question, gold=question.answer, prediction=prediction)
        return GenerationRequest(
            messages=({"role": "user", "content": prompt},),
            max_tokens=self.max_tokens,
            json_schema=JUDGE_SCHEMA if self.use_schema else None,
        )

    def judge_many(self, items: Sequence[tuple[Question, str]]) -> list[JudgeResult]:
        """Judge a batch of ``(question, prediction)`` pairs (one backend batch)."""
        requests = [self.request(q, p) for q, p in items]
        results = self.llm.generate(requests, tags={"module": "judge", "prompt": PROMPT_HASH})
        out = []
        for res in results:
            cost = self.cost_model.llm(res)
            if not res.ok:
                out.append(JudgeResult(None, True, res.text, error=res.error or "call failed", cost=cost))
                continue
            try:
                score, explanation = parse_judge_output(res.text)
            except ValueError as exc:
                out.append(JudgeResult(None, True, res.text, error=str(exc), cost=cost))
                continue
            out.append(JudgeResult(score, False, res.text, explanation=explanation, cost=cost))
        return out

    def judge(self, question: Question, prediction: str) -> JudgeResult:
        """Judge one prediction."""
        return self.judge_many([(question, prediction)])[0]


def make_judge(
    backend: str,
    *,
    cache_path: str | None = None,
    cost_model: CostModel | None = None,
    max_tokens: int = 160,
    **backend_kwargs: object,
) -> Judge:
    """Build a :class:`Judge` on any registered backend (``modules.backends.get_backend``).

    Args:
        backend: Backend name (``"llamacpp"``, ``"transformers"``, ``"vllm"``, ``"openai"``, ``"fake"``).
        cache_path: Optional call-cache file (verdicts are replayed on later runs).
        cost_model: Prices the judge calls (default: GFLOPs).
        max_tokens: Generation cap of a verdict.
        **backend_kwargs: Passed to the backend (e.g. ``model="qwen2.5-1.5b"``).
    """
    from modules.backends import get_backend
    from modules.cache import CallCache

    cache = CallCache(cache_path) if cache_path else None
    return Judge(CachedLLM(get_backend(backend, **backend_kwargs), cache), cost_model, max_tokens=max_tokens)
