"""Loaders on the real benchmark files: counts, splits and every known data quirk.

Skipped (with a message) only when the data directory is absent.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from benchmarks.checksums import ChecksumWarning, read_sums, verify_checksums
from benchmarks.registry import benchmark_names, get_benchmark
from benchmarks.types import Sample
from common.datadir import DataFileError, resolve_data_dir


def _data_dir() -> Path:
    try:
        return resolve_data_dir()
    except DataFileError as exc:
        pytest.skip(f"benchmark data directory absent ({exc}); set BUDGET_ROUTER_DATA to run data tests")


@pytest.fixture(scope="module")
def data_dir() -> Path:
    return _data_dir()


@pytest.fixture(scope="module")
def locomo_all(data_dir: Path) -> list[Sample]:
    return get_benchmark("locomo", data_dir, include_adversarial=True).load("all")


def _question(samples: list[Sample], qid: str):
    return next(q for s in samples for q in s.questions if q.question_id == qid)


def test_registry_names() -> None:
    assert benchmark_names() == ["custom", "hotpotqa", "locomo", "longmemeval", "longmemeval_oracle"]
    with pytest.raises(KeyError, match=r"unknown benchmark .nope.*locomo"):
        get_benchmark("nope")


def test_unknown_split(data_dir: Path) -> None:
    with pytest.raises(ValueError, match="unknown split 'dev'"):
        get_benchmark("locomo", data_dir).load("dev")


# ----------------------------------------------------------------------------- LoCoMo


def test_locomo_counts_and_splits(data_dir: Path, locomo_all: list[Sample]) -> None:
    bench = get_benchmark("locomo", data_dir)
    counts = {s: sum(len(x.questions) for x in bench.load(s)) for s in ("train", "val", "test", "all")}
    assert counts == {"train": 885, "val": 341, "test": 314, "all": 1540}
    assert [s.sample_id for s in bench.load("test")] == ["conv-49", "conv-50"]
    assert [s.sample_id for s in bench.load("val")] == ["conv-47", "conv-48"]
    assert sum(len(s.questions) for s in locomo_all) == 1986
    assert sum(len(s.history.sessions) for s in locomo_all) == 272
    assert sum(len(s.history.turns()) for s in locomo_all) == 5882
    cats: dict[str, int] = {}
    for s in locomo_all:
        for q in s.questions:
            cats[q.category] = cats.get(q.category, 0) + 1
    assert cats == {"1": 282, "2": 321, "3": 96, "4": 841, "5": 446}
    assert bench.checksums["locomo10.json"] == read_sums(data_dir / "SHA256SUMS")["locomo10.json"]


def test_locomo_malformed_evidence(locomo_all: list[Sample]) -> None:
    q = _question(locomo_all, "conv-26:q37")  # "D8:6; D9:17"
    assert q.evidence_ids == ("D8:6", "D9:17")
    q = _question(locomo_all, "conv-42:q88")  # "D" names no turn
    assert q.evidence_ids == ("D1:18", "D1:20") and q.extra["dropped_evidence"] == "D"
    q = _question(locomo_all, "conv-43:q18")  # "D:11:26" -> D11:26
    assert "D11:26" in q.evidence_ids and "dropped_evidence" not in q.extra
    assert _question(locomo_all, "conv-49:q31").evidence_ids == ("D9:1", "D4:4", "D4:6")
    assert _question(locomo_all, "conv-49:q38").evidence_ids == ("D22:1", "D22:2", "D9:10", "D9:11")
    assert _question(locomo_all, "conv-49:q46").evidence_ids == ("D21:18", "D21:22", "D11:15", "D11:19")
    # "D30:05" (leading zero) is D30:5; "D10:19" (conv-42) and "D4:36" (conv-47) name no turn
    assert _question(locomo_all, "conv-50:q69").evidence_ids == ("D30:5",)
    assert "D10:19" in _question(locomo_all, "conv-42:q58").extra["dropped_evidence"]
    assert "D4:36" in _question(locomo_all, "conv-47:q38").extra["dropped_evidence"]
    # every kept evidence id is a real turn of its conversation
    for s in locomo_all:
        ids = {t.turn_id for t in s.history.turns()}
        for q in s.questions:
            assert set(q.evidence_ids) <= ids, q.question_id


def test_locomo_int_answers_and_adversarial(locomo_all: list[Sample]) -> None:
    ints = [q for s in locomo_all for q in s.questions if q.answer.isdigit()]
    assert len(ints) >= 6 and all(isinstance(q.answer, str) for q in ints)
    adv = [q for s in locomo_all for q in s.questions if q.category == "5"]
    assert len(adv) == 446
    assert sum(q.answer == "Not mentioned in the conversation" for q in adv) == 444  # 2 carry an answer
    assert sum("adversarial_answer" in q.extra for q in adv) > 400


def test_locomo_phantom_session_dates_and_rendering(locomo_all: list[Sample]) -> None:
    conv26 = locomo_all[0]
    assert conv26.sample_id == "conv-26"
    assert [s.session_id for s in conv26.history.sessions] == [f"session_{n}" for n in range(1, 20)]
    assert conv26.history.sessions[0].timestamp == "1:56 pm on 8 May, 2023"
    assert all(t.timestamp == s.timestamp for s in conv26.history.sessions for t in s.turns)
    captioned = [t for t in conv26.history.turns() if t.image_caption]
    assert captioned and all("shared" not in t.text[-7:] for t in captioned)
    from benchmarks.chunking import render_turn

    t = captioned[0]
    assert render_turn(t) == f'{t.speaker} said, "{t.text}" and shared {t.image_caption}'


# ------------------------------------------------------------------------ LongMemEval


def test_longmemeval_oracle(data_dir: Path) -> None:
    bench = get_benchmark("longmemeval_oracle", data_dir)
    counts = {s: len(bench.load(s)) for s in ("train", "val", "test", "all")}
    assert counts == {"train": 297, "val": 98, "test": 105, "all": 500}
    everything = bench.load("all")
    assert sum(q.is_abstention for s in everything for q in s.questions) == 30
    assert all(len(s.questions) == 1 and s.history.history_id == s.sample_id for s in everything)
    s = next(x for x in everything if x.sample_id == "gpt4_2655b836")
    q = s.questions[0]
    assert q.category == "temporal-reasoning" and q.question_date == "2023/04/10 (Mon) 23:07"
    dates = [x.timestamp for x in s.history.sessions]
    assert dates == sorted(dates)  # sessions sorted into time order
    ids = {t.turn_id for t in s.history.turns()}
    assert q.evidence_ids and set(q.evidence_ids) <= ids
    assert all(t.speaker in ("user", "assistant") for t in s.history.turns())
    int_answers = [x.questions[0] for x in everything if x.questions[0].answer.isdigit()]
    assert int_answers and all(isinstance(a.answer, str) for a in int_answers)
    assert not any(bench.missing.values())
    test_ids = {s.sample_id for s in bench.load("test")}
    train_ids = {s.sample_id for s in bench.load("train")}
    assert not test_ids & train_ids


@pytest.mark.slow
def test_longmemeval_s_through_cache(data_dir: Path) -> None:
    """Builds the per-question cache on first use (~30 s, <0.5 GB RAM), then reads from it."""
    bench = get_benchmark("longmemeval", data_dir)
    test = bench.load("test")
    assert len(test) == 105 and bench.missing["test"] == []
    val = bench.load("val")
    assert len(val) == 97 and bench.missing["val"] == ["7e00a6cb"]
    from benchmarks.longmemeval_cache import build_question_cache

    cache = build_question_cache(data_dir / "longmemeval_s_cleaned_498.json.xz")  # already built: instant
    assert len(cache.question_ids) == 498
    train_ids = bench.split_ids("train")
    assert train_ids is not None and [q for q in train_ids if q not in cache] == ["gpt4_7a0daae1"]
    s = test[0]
    assert 30 <= len(s.history.sessions) <= 60
    assert s.questions[0].question_id == s.sample_id


# -------------------------------------------------------------------------- HotpotQA


def test_hotpotqa_split_and_evidence(data_dir: Path) -> None:
    bench = get_benchmark("hotpotqa", data_dir)
    splits = {s: bench.load(s) for s in ("train", "val", "test", "all")}
    assert [len(v) for v in splits.values()] == [120, 40, 40, 200]
    ids = [{s.sample_id for s in splits[k]} for k in ("train", "val", "test")]
    assert not (ids[0] & ids[1]) and not (ids[0] & ids[2]) and not (ids[1] & ids[2])
    assert set().union(*ids) == {s.sample_id for s in splits["all"]}
    # deterministic: the sha256-ranked split does not depend on load order
    assert [s.sample_id for s in get_benchmark("hotpotqa", data_dir).load("test")] == [
        s.sample_id for s in splits["test"]
    ]
    for s in splits["all"]:
        q = s.questions[0]
        assert s.history.kind == "document"
        turn_ids = {t.turn_id for t in s.history.turns()}
        assert q.evidence_ids and set(q.evidence_ids) <= turn_ids
    assert sum(q.answer.lower() in ("yes", "no") for s in splits["all"] for q in s.questions) == 20


# ------------------------------------------------------------------------- checksums


def test_checksum_mismatch_warns(tmp_path: Path, data_dir: Path) -> None:
    shutil.copy(data_dir / "locomo10.json", tmp_path / "locomo10.json")
    (tmp_path / "SHA256SUMS").write_text("0" * 64 + "  locomo10.json\n")
    with pytest.warns(ChecksumWarning, match="differs"):
        verify_checksums([tmp_path / "locomo10.json"])
    # without a SHA256SUMS file the digest is recorded, nothing warns
    (tmp_path / "SHA256SUMS").unlink()
    sums = verify_checksums([tmp_path / "locomo10.json"])
    assert sums["locomo10.json"] == read_sums(data_dir / "SHA256SUMS")["locomo10.json"]


def test_missing_file_names_source(tmp_path: Path) -> None:
    with pytest.raises(DataFileError, match=r"locomo10.json.*snap-research"):
        get_benchmark("locomo", tmp_path).load("test")
