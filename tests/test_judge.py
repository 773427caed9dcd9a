"""LLM judge: prompt versioning, JSON parsing, and failures that never become a silent 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.judge import JUDGE_PROMPT, PROMPT_HASH, Judge, parse_judge_output
from benchmarks.types import Question
from modules.backends.base import GenerationRequest
from modules.backends.fake import FakeBackend, request_text
from modules.cache import CachedLLM

Q = Question(question_id="q1", question="Where did Sam go?", answer="the Rockies", category="4")


def make_judge(reply: str | None = None, **fake_kwargs: object) -> tuple[Judge, FakeBackend]:
    responder = (lambda _r: reply) if reply is not None else None
    backend = FakeBackend(responder=responder, **fake_kwargs)  # type: ignore[arg-type]
    return Judge(CachedLLM(backend, None)), backend


def test_prompt_hash_is_stable_and_sensitive() -> None:
    assert len(PROMPT_HASH) == 16
    import hashlib

    assert hashlib.sha256(f"judge-v1\n{JUDGE_PROMPT}".encode()).hexdigest()[:16] == PROMPT_HASH


@pytest.mark.parametrize(
    ("raw", "score"),
    [
        ('{"explanation": "same place", "score": 1}', 1.0),
        ('```json\n{"explanation": "partly", "score": 0.5}\n```', 0.5),
        ('Sure! {"explanation": "no", "score": 0} hope that helps', 0.0),
        ('{"explanation": "broken "quote", "score": "1"}', 1.0),  # invalid JSON, regex fallback
    ],
)
def test_parse_valid(raw: str, score: float) -> None:
    assert parse_judge_output(raw)[0] == score


@pytest.mark.parametrize(
    "raw", ["", "I think it is right", '{"score": 0.7}', '{"explanation": "x"}', '{"score": "high"}']
)
def test_parse_invalid(raw: str) -> None:
    with pytest.raises(ValueError):
        parse_judge_output(raw)


def test_judge_sees_question_gold_and_prediction() -> None:
    judge, backend = make_judge(json.dumps({"explanation": "ok", "score": 1}))
    res = judge.judge(Q, "They went to the Rocky Mountains")
    assert res.score == 1.0 and not res.failed and res.prompt_hash == PROMPT_HASH
    text = request_text(backend.seen[0])
    assert "Where did Sam go?" in text and "the Rockies" in text and "Rocky Mountains" in text
    assert res.cost is not None and res.cost.calls == 1 and res.cost.value > 0


def test_unparseable_output_is_a_counted_failure_not_zero() -> None:
    judge, _ = make_judge("I cannot grade this.")
    res = judge.judge(Q, "x")
    assert res.failed and res.score is None and res.error and res.raw == "I cannot grade this."


def test_backend_error_is_a_failure() -> None:
    judge, _ = make_judge(fail_when=lambda _r: True)
    res = judge.judge(Q, "x")
    assert res.failed and res.score is None and res.cost is not None and res.cost.failures == 1


def test_schema_default_of_fake_parses() -> None:
    # Without a responder the fake returns a minimal schema-valid object: score 0 (first enum value).
    judge, backend = make_judge()
    res = judge.judge(Q, "x")
    assert not res.failed and res.score == 0.0
    assert isinstance(backend.seen[0], GenerationRequest) and backend.seen[0].json_schema is not None


def test_judge_many_keeps_order() -> None:
    def responder(req: GenerationRequest) -> str:
        return json.dumps({"explanation": "", "score": 1 if "GOOD" in request_text(req) else 0})

    judge = Judge(CachedLLM(FakeBackend(responder=responder), None))
    out = judge.judge_many([(Q, "GOOD"), (Q, "bad"), (Q, "GOOD")])
    assert [r.score for r in out] == [1.0, 0.0, 1.0]


def test_judge_on_a_registry_backend_replays_from_the_cache(tmp_path: Path) -> None:
    from modules.backends import get_backend
    from modules.cache import CallCache

    judge = Judge(CachedLLM(get_backend("fake"), CallCache(str(tmp_path / "calls.sqlite"))))
    first = judge.judge(Q, "x")
    again = judge.judge(Q, "x")
    assert not first.failed and again.cost is not None and again.cost.cache_hits == 1


@pytest.mark.slow
def test_real_small_model_judge_and_answer_run() -> None:
    """SmolLM2-135M through llama.cpp: the plumbing runs for real (its verdict quality is not tested)."""
    from benchmarks.answer import AnswerGenerator
    from modules.backends import get_backend

    try:
        judge = Judge(CachedLLM(get_backend("llamacpp", model="smollm2-135m"), None), max_tokens=48)
    except Exception as exc:  # model package missing on this machine
        pytest.skip(f"smollm2-135m via llama.cpp unavailable: {exc}")
    res = judge.judge(Q, "They went to the Rockies.")
    assert res.raw or res.failed  # a real generation happened (or failed visibly)
    assert res.cost is not None and res.cost.tokens_in > 50 and res.cost.models == ("smollm2-135m",)
    assert (res.score is None) == res.failed
    answer, cost = AnswerGenerator(judge.llm, "locomo", max_tokens=12).answer(
        Q, 'Sam said, "We hiked the Rockies."'
    )
    assert isinstance(answer, str) and cost.tokens_in > 20 and cost.value > 0
