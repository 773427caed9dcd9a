"""Judge protocols with fixed judge outputs (fake backend): LoCoMo's binary judge, LongMemEval's
per-type yes/no judge, the default 0/0.5/1 judge; unparseable outputs are counted failures, the
protocol's prompt hash is in every verdict and record, and F1 and the judge are reported side by side."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from benchmarks.judge import PROMPT_HASH, PROTOCOLS, Judge, get_protocol
from benchmarks.judge_protocol import hash_templates
from benchmarks.judge_protocols import LONGMEMEVAL_TEMPLATES
from benchmarks.types import Question
from envs.fakes import make_fake_bank, make_fake_components
from envs.rollout import evaluate_policy, summarize_records
from evaluation import cli_frontier
from modules.backends.fake import FakeBackend, request_text
from modules.cache import CachedLLM
from modules.tier import Tier


def judge_with(protocol: str, reply: str | Callable[[str], str]) -> tuple[Judge, FakeBackend]:
    respond = reply if callable(reply) else (lambda _text: reply)
    backend = FakeBackend(responder=lambda r: respond(request_text(r)))
    return Judge(CachedLLM(backend, None), protocol=protocol), backend


def q(category: str = "4", answer: str = "Paris", abstention: bool = False) -> Question:
    return Question("q1", "Where did Ann move?", answer, category, is_abstention=abstention)


def test_protocol_hashes_are_distinct_stable_and_cover_every_template() -> None:
    hashes = {name: p.prompt_hash for name, p in PROTOCOLS.items()}
    assert sorted(hashes) == ["budgetmem", "locomo", "longmemeval"] and len(set(hashes.values())) == 3
    assert hashes["budgetmem"] == PROMPT_HASH  # records written before protocols existed still match
    lme = PROTOCOLS["longmemeval"]
    changed = {**lme.templates(), "abstention": lme.templates()["abstention"] + " "}
    assert hash_templates(lme.version, changed) != lme.prompt_hash
    assert hash_templates("longmemeval-yesno-v2", lme.templates()) != lme.prompt_hash
    with pytest.raises(KeyError, match="unknown judge protocol 'mem0'"):
        get_protocol("mem0")


@pytest.mark.parametrize(
    ("raw", "score"),
    [
        ('{"explanation": "same city", "label": "CORRECT"}', 1.0),
        ('```json\n{"explanation": "other city", "label": "wrong"}\n```', 0.0),
        ("CORRECT", 1.0),
        ("The generated answer names another city. WRONG", 0.0),
    ],
)
def test_locomo_judge_reads_labels(raw: str, score: float) -> None:
    judge, backend = judge_with("locomo", raw)
    res = judge.judge(q(), "She moved to Paris, France")
    assert res.score == score and not res.failed and res.protocol == "locomo"
    assert res.prompt_hash == PROTOCOLS["locomo"].prompt_hash
    text = request_text(backend.seen[0])
    assert "Where did Ann move?" in text and "GOLD answer: Paris" in text and "Paris, France" in text
    assert backend.seen[0].json_schema is not None


@pytest.mark.parametrize(
    "raw",
    ["", "I am not sure.", "CORRECT or WRONG, hard to say", '{"label": "PARTIAL"}', '{"explanation": "x"}'],
)
def test_locomo_unparseable_is_a_counted_failure(raw: str) -> None:
    judge, _ = judge_with("locomo", raw)
    res = judge.judge(q(), "x")
    assert res.failed and res.score is None and res.error and not res.excluded


def test_locomo_excludes_adversarial_without_a_call() -> None:
    judge, backend = judge_with("locomo", "CORRECT")
    results = judge.judge_many([(q("5"), "a"), (q("4"), "b"), (q("adversarial"), "c")])
    assert [r.score for r in results] == [None, 1.0, None]
    assert [r.excluded for r in results] == [True, False, True] and not any(r.failed for r in results)
    assert len(backend.seen) == 1 and "b" in request_text(backend.seen[0])


@pytest.mark.parametrize(
    ("category", "abstention", "key", "marker"),
    [
        ("single-session-user", False, "default", "Correct answer: Paris"),
        ("single-session-assistant", False, "default", "Correct answer: Paris"),
        ("multi-session", False, "default", "only part of the information"),
        ("temporal-reasoning", False, "temporal-reasoning", "off-by-one"),
        ("knowledge-update", False, "knowledge-update", "updated answer"),
        ("single-session-preference", False, "single-session-preference", "Rubric: Paris"),
        ("multi-session", True, "abstention", "Explanation: Paris"),
        ("my-own-category", False, "default", "Correct answer: Paris"),
    ],
)
def test_longmemeval_picks_the_prompt_of_the_question_type(
    category: str, abstention: bool, key: str, marker: str
) -> None:
    question = q(category, abstention=abstention)
    assert PROTOCOLS["longmemeval"].template_key(question) == key
    judge, backend = judge_with("longmemeval", "yes")
    res = judge.judge(question, "Paris")
    text = request_text(backend.seen[0])
    assert res.score == 1.0 and marker in text and "Response: Paris" in text
    assert text == LONGMEMEVAL_TEMPLATES[key].format(
        question=question.question, gold="Paris", prediction="Paris"
    )
    assert backend.seen[0].max_tokens == 16 and backend.seen[0].json_schema is None


@pytest.mark.parametrize(
    ("raw", "score"),
    [
        ("yes", 1.0),
        ("Yes.", 1.0),
        ("No", 0.0),
        ("no, the response names another city", 0.0),
        ("The answer is yes", 1.0),
        ("Yes, although one could say no", 1.0),
    ],
)
def test_longmemeval_reads_yes_no(raw: str, score: float) -> None:
    judge, _ = judge_with("longmemeval", raw)
    assert judge.judge(q("multi-session"), "x").score == score


@pytest.mark.parametrize("raw", ["", "The response is correct.", "maybe", "I would say yes rather than no"])
def test_longmemeval_unparseable_is_a_counted_failure(raw: str) -> None:
    judge, _ = judge_with("longmemeval", raw)
    res = judge.judge(q("temporal-reasoning"), "x")
    assert res.failed and res.score is None and "longmemeval judge" in str(res.error)


def _judged_components(protocol: str, reply: Callable[[str], str]):
    judge, _ = judge_with(protocol, reply)
    return make_fake_components(judge=judge)


def _locomo_reply(text: str) -> str:
    # The fake bank's "what" questions get an output no parser can read.
    return "no idea" if "what" in text.split("Question:")[1].split("\n")[0] else '{"label": "CORRECT"}'


def test_records_carry_protocol_and_hash_and_failures_are_counted() -> None:
    comps = _judged_components("locomo", _locomo_reply)
    recs = evaluate_policy(lambda o, m: Tier.HIGH, make_fake_bank(1), comps, progress=False)
    failed = [r for r in recs if r.judge_failed]
    assert failed and all(r.judge is None for r in failed)
    assert all(
        r.judge_protocol == "locomo" and r.judge_prompt_hash == PROTOCOLS["locomo"].prompt_hash for r in recs
    )
    d = recs[0].to_dict()
    assert d["judge_protocol"] == "locomo" and d["judge_prompt_hash"] == PROTOCOLS["locomo"].prompt_hash
    s = summarize_records(recs)["overall"]
    assert s["judge"] == 1.0 and s["judge_failed"] == len(failed)  # never averaged in as 0


def test_frontier_reports_f1_and_judge_side_by_side(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser()
    cli_frontier.add_arguments(parser)
    args = parser.parse_args(
        [
            "--out",
            str(tmp_path / "out"),
            "--no-progress",
            "--n-boot",
            "50",
            "--baselines",
            "all-low,all-high",
            "--judge-protocol",
            "locomo",
        ]
    )
    comps = _judged_components("locomo", _locomo_reply)
    assert cli_frontier.run_with(args, {}, comps, make_fake_bank(4), [], [], lambda: make_fake_bank(2)) == 0
    out = capsys.readouterr().out
    assert "f1 cat what" in out and "judge cat what" in out and "judge cat when" in out
    assert f"judge protocol locomo (prompt {PROTOCOLS['locomo'].prompt_hash}); failed verdicts" in out
    meta = json.loads((tmp_path / "out" / "metadata.json").read_text())
    assert meta["judge_protocol"] == "locomo" and meta["judge_prompt_hash"] == PROTOCOLS["locomo"].prompt_hash
    systems = json.loads((tmp_path / "out" / "frontier.json").read_text())["systems"]
    for s in systems:
        assert s["metrics"]["judge"]["mean"] == 1.0 and 0 < s["metrics"]["judge_failed"]["mean"] < 1
        assert s["per_category"]["what"]["judge"]["mean"] is None  # all failed: no value, not 0


def test_config_chooses_the_protocol_and_rejects_unknown_ones() -> None:
    from envs.components import ConfigError, make_components

    cfg = {
        "benchmark": {"name": "hotpotqa"},
        "strategy": {"name": "implementation"},
        "encoder": "hashing",
        "backend": {"name": "fake"},
        "cache": {"path": None},
        "judge": {"enabled": True, "protocol": "longmemeval"},
    }
    comps = make_components(cfg)
    try:
        assert comps.judge.protocol.name == "longmemeval"
    finally:
        comps.close()
    with pytest.raises(ConfigError, match=r"judge\.protocol: unknown judge protocol 'j'"):
        make_components({**cfg, "judge": {"enabled": True, "protocol": "j"}})


def test_judge_backend_can_be_any_openai_compatible_endpoint() -> None:
    from envs.components import ConfigError, make_components

    cfg = {
        "benchmark": {"name": "locomo"},
        "strategy": {"name": "implementation"},
        "encoder": "hashing",
        # A base-backend option (latency_s) that the OpenAI backend does not take must not leak into it.
        "backend": {"name": "fake", "latency_s": 0.0},
        "cache": {"path": None},
        "judge": {
            "enabled": True,
            "protocol": "locomo",
            "backend": {"name": "openai", "model": "judge-7b", "base_url": "http://127.0.0.1:9/v1"},
        },
        # a model outside the registry is priced by its declared parameter count (issue 49, item 12)
        "cost": {"params": {"judge-7b": 7_000_000_000}},
    }
    comps = make_components(cfg)
    try:
        backend = comps.judge.llm.backend
        assert type(backend).__name__ == "OpenAIBackend" and backend.base_url == "http://127.0.0.1:9/v1"
        assert backend.model == "judge-7b" and comps.llms["answer"].backend.model_id == "fake-llm"
        # the judge and the answerer price with the configured cost model, not a default one
        assert comps.judge.cost_model is comps.cost_model and comps.answerer.cost_model is comps.cost_model
        assert comps.cost_model.call_value("judge-7b", 10, 0) == pytest.approx(2 * 7e9 * 10 / 1e9)
    finally:
        comps.close()
    undeclared = {**cfg, "cost": {}}
    with pytest.raises(ConfigError, match=r"judge\.backend: no parameter count for model 'judge-7b'.*params"):
        make_components(undeclared)
    prices = {"judge-7b": [0.2, 0.6], "fake-llm": [0.01, 0.01]}
    in_dollars = {**cfg, "cost": {"unit": "usd", "prices": prices}}
    comps = make_components(in_dollars)
    try:
        assert comps.cost_model.call_value("judge-7b", 1_000_000, 1_000_000) == pytest.approx(0.8)
    finally:
        comps.close()
    with pytest.raises(ConfigError, match=r"judge\.backend: no USD price for model 'judge-7b'.*cost\.prices"):
        make_components({**cfg, "cost": {"unit": "usd", "prices": {"fake-llm": [0.01, 0.01]}}})
