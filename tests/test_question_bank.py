"""Question bank: selection order, on-disk cache, and a real (hashing-encoder) LoCoMo bank."""

from __future__ import annotations

import json

import pytest

from benchmarks.types import History, Question, Sample
from envs.question_bank import QuestionItem, bank_key, build_question_bank, select_questions
from modules.types import Evidence


def _sample(sid: str, n: int) -> Sample:
    qs = tuple(
        Question(question_id=f"{sid}:q{i}", question=f"q{i}?", answer="a", category="1") for i in range(n)
    )
    return Sample(sample_id=sid, history=History(history_id=sid, sessions=()), questions=qs)


def test_select_questions_round_robin_seeded_and_limited():
    samples = [_sample("a", 4), _sample("b", 2), _sample("c", 3)]
    picked = select_questions(samples, limit=None, seed=0)
    assert len(picked) == 9
    assert [s.sample_id for s, _ in picked[:6]] == ["a", "b", "c", "a", "b", "c"]
    assert sorted(q.question_id for _, q in picked) == sorted(
        q.question_id for s in samples for q in s.questions
    )
    assert select_questions(samples, limit=None, seed=0) == picked
    assert [q for _, q in select_questions(samples, limit=None, seed=1)] != [q for _, q in picked]
    assert len(select_questions(samples, limit=4, seed=0)) == 4
    only_a = select_questions(samples, limit=None, seed=0, max_samples=1)
    assert {s.sample_id for s, _ in only_a} == {"a"}
    with pytest.raises(ValueError, match="limit"):
        select_questions(samples, limit=0, seed=0)


def test_item_round_trip():
    q = Question(
        question_id="x",
        question="Who?",
        answer="Bob",
        category="4",
        evidence_ids=("D1:2",),
        question_date="2023",
        extra={"k": "v"},
    )
    item = QuestionItem(q, "s1", "locomo", (Evidence("c1", "text", "t", 0.5, ("D1:2",)),))
    back = QuestionItem.from_dict(json.loads(json.dumps(item.to_dict())))
    assert back == item and back.question.extra == {"k": "v"}


def test_bank_key_depends_on_every_input(tmp_path):
    f = tmp_path / "data.json"
    f.write_text("[]")
    base = dict(
        benchmark="locomo",
        benchmark_opts={},
        split="train",
        data_files=[f],
        memory_config=None,
        encoder_name="minilm",
        k=5,
        limit=None,
        max_samples=None,
        seed=0,
    )
    k0, ident = bank_key(**base)
    assert ident["data_sha256"]["data.json"]
    for field, value in [
        ("k", 3),
        ("split", "val"),
        ("encoder_name", "hashing"),
        ("limit", 10),
        ("seed", 1),
        ("memory_config", {"mode": "lru"}),
        ("benchmark_opts", {"include_adversarial": True}),
    ]:
        assert bank_key(**{**base, field: value})[0] != k0, field
    f.write_text("[1]")  # a changed data file changes the key
    assert bank_key(**base)[0] != k0


@pytest.mark.data
def test_locomo_bank_builds_once_and_caches(tmp_path, monkeypatch):
    from common.datadir import DataFileError, data_file

    try:
        data_file("locomo10.json")
    except DataFileError as exc:
        pytest.skip(f"benchmark data not available: {exc}")
    import benchmarks.memory_builder as mb
    import envs.question_bank as qb
    from memory.encoder import get_encoder

    # mode no_ce: no cross-encoder rerank, so this test does not load MiniLM (the slow test does).
    build = mb.MemoryBuildConfig(mode="no_ce")
    calls = {"n": 0}
    real = mb.build_memory

    def counting(*a, **kw):
        calls["n"] += 1
        return real(*a, **kw)

    monkeypatch.setattr(qb, "build_memory", counting)  # the name the bank builder calls
    kw = dict(
        encoder=get_encoder("hashing"),
        memory_config=build,
        k=4,
        limit=3,
        max_samples=1,
        cache_dir=tmp_path,
        progress=False,
    )
    items = build_question_bank("locomo", "train", **kw)
    assert calls["n"] == 1  # one memory for the one history
    assert len(items) == 3 and len({it.question.question_id for it in items}) == 3
    for it in items:
        assert it.benchmark == "locomo" and it.sample_id == items[0].sample_id
        assert len(it.evidence) == 4 and all(e.text for e in it.evidence)
        assert it.question.category != "5"  # adversarial questions are dropped by default
    again = build_question_bank("locomo", "train", **kw)
    assert calls["n"] == 1 and again == items  # served from the disk cache
    assert len(list(tmp_path.glob("locomo-train-*.json"))) == 1
    with pytest.raises(KeyError, match="unknown benchmark"):
        build_question_bank("nope", "train", **kw)
    with pytest.raises(ValueError, match="split"):
        build_question_bank("locomo", "dev", **kw)
