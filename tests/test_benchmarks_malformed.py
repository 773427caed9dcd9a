"""Malformed data files give errors that name the file, the record and the field."""

from __future__ import annotations

import io
import json
import lzma
from pathlib import Path
from typing import Any

import pytest

from benchmarks.jsonstream import iter_json_list
from benchmarks.registry import get_benchmark
from common.datadir import DataFileError


def locomo_record(**overrides: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "A",
            "speaker_b": "B",
            "session_1": [
                {"speaker": "A", "dia_id": "D1:1", "text": "I moved to Paris in 2020."},
                {"speaker": "B", "dia_id": "D1:2", "text": "Nice!", "blip_caption": "a photo of a tower"},
            ],
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_2_date_time": "phantom date with no session",
        },
        "qa": [
            {
                "question": "Where did A move?",
                "answer": "Paris",
                "evidence": ["D1:1; D1:2", "D"],
                "category": 4,
            }
        ],
    }
    rec.update(overrides)
    return rec


def write_locomo(tmp_path: Path, records: Any) -> Path:
    (tmp_path / "locomo10.json").write_text(json.dumps(records))
    return tmp_path


def test_small_valid_locomo_file(tmp_path: Path) -> None:
    samples = get_benchmark("locomo", write_locomo(tmp_path, [locomo_record()] * 10)).load("test")
    q = samples[0].questions[0]
    assert q.evidence_ids == ("D1:1", "D1:2") and q.extra["dropped_evidence"] == "D"
    assert [s.session_id for s in samples[0].history.sessions] == ["session_1"]
    assert samples[0].history.turns()[1].image_caption == "a photo of a tower"


@pytest.mark.parametrize(
    ("record", "field_pattern"),
    [
        (
            locomo_record(qa=[{"question": "q", "answer": "a", "evidence": [], "category": "4"}]),
            r"qa\[0\]\.category",
        ),
        (locomo_record(qa=[{"question": "q", "evidence": [], "category": 4}]), r"qa\[0\]\.answer.*missing"),
        (
            locomo_record(qa=[{"question": "q", "answer": ["x"], "evidence": [], "category": 4}]),
            r"qa\[0\]\.answer",
        ),
        (
            locomo_record(qa=[{"question": "q", "answer": "a", "evidence": [3], "category": 4}]),
            r"evidence\[0\]",
        ),
        ({k: v for k, v in locomo_record().items() if k != "conversation"}, r"'conversation'.*missing"),
        (
            locomo_record(conversation={"session_1": [{"speaker": "A", "text": "hi"}]}),
            r"conversation\.session_1\[0\]\.dia_id.*missing",
        ),
        (locomo_record(conversation={"session_1": "not a list"}), r"conversation\.session_1'.*expected list"),
    ],
)
def test_locomo_bad_field(tmp_path: Path, record: dict[str, Any], field_pattern: str) -> None:
    path = write_locomo(tmp_path, [locomo_record()] * 8 + [record, locomo_record()])
    with pytest.raises(DataFileError, match=field_pattern) as info:
        get_benchmark("locomo", path).load("test")
    msg = str(info.value)
    assert "locomo10.json" in msg and "record conv-x (index 8)" in msg


def test_locomo_missing_sample_id_names_index(tmp_path: Path) -> None:
    bad = {k: v for k, v in locomo_record().items() if k != "sample_id"}
    path = write_locomo(tmp_path, [bad] * 10)
    with pytest.raises(DataFileError, match=r"locomo10.json: record index 0: field 'sample_id': missing"):
        get_benchmark("locomo", path).load("train")


def test_locomo_truncated_json(tmp_path: Path) -> None:
    text = json.dumps([locomo_record()] * 10)
    (tmp_path / "locomo10.json").write_text(text[: len(text) // 2])
    with pytest.raises(DataFileError, match=r"locomo10.json: record at line 1 column \d+.*truncated"):
        get_benchmark("locomo", tmp_path).load("test")


def test_locomo_not_a_list_and_too_short(tmp_path: Path) -> None:
    write_locomo(tmp_path, {"sample_id": "x"})
    with pytest.raises(DataFileError, match="expected a JSON list"):
        get_benchmark("locomo", tmp_path).load("test")
    write_locomo(tmp_path, [locomo_record()] * 3)
    with pytest.raises(DataFileError, match="has 3 conversations"):
        get_benchmark("locomo", tmp_path).load("test")


# ------------------------------------------------------------------------ LongMemEval


def lme_record(qid: str = "q1", **overrides: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "question_id": qid,
        "question_type": "single-session-user",
        "question": "What did I buy?",
        "answer": 3,
        "question_date": "2023/05/30 (Tue) 23:40",
        "haystack_dates": ["2023/05/02 (Tue) 10:00", "2023/05/01 (Mon) 09:00"],
        "haystack_session_ids": ["s_a", "s_b"],
        "haystack_sessions": [
            [{"role": "user", "content": "I bought 3 apples.", "has_answer": True}],
            [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi!"}],
        ],
        "answer_session_ids": ["s_a"],
    }
    rec.update(overrides)
    return rec


def write_lme(tmp_path: Path, records: list[Any], splits: dict[str, list[str]] | None = None) -> Path:
    (tmp_path / "longmemeval_oracle.json").write_text(json.dumps(records))
    ids = [r.get("question_id", "?") for r in records]
    (tmp_path / "longmemeval_s_splits_qids.json").write_text(
        json.dumps(splits or {"train": ids, "val": [], "test": ids})
    )
    return tmp_path


def test_small_valid_longmemeval(tmp_path: Path) -> None:
    samples = get_benchmark("longmemeval_oracle", write_lme(tmp_path, [lme_record()])).load("test")
    s = samples[0]
    assert [x.session_id for x in s.history.sessions] == ["s_b", "s_a"]  # sorted by date
    q = s.questions[0]
    assert q.answer == "3" and q.evidence_ids == ("s0:t0",) and q.extra["answer_session_ids"] == "s_a"


@pytest.mark.parametrize(
    ("record", "field_pattern"),
    [
        (lme_record(question=None), r"field 'question': expected str, got NoneType"),
        ({k: v for k, v in lme_record().items() if k != "answer"}, r"field 'answer': missing"),
        (lme_record(haystack_dates=["2023/05/02 (Tue) 10:00"]), r"field 'haystack_sessions': lengths differ"),
        (
            lme_record(haystack_sessions=[[{"role": "user"}], []]),
            r"field 'haystack_sessions\[0\]\[0\]\.content': missing",
        ),
        (
            lme_record(haystack_sessions=[[{"role": "user", "content": "x", "has_answer": "yes"}], []]),
            r"has_answer': expected bool",
        ),
    ],
)
def test_longmemeval_bad_field(tmp_path: Path, record: dict[str, Any], field_pattern: str) -> None:
    path = write_lme(tmp_path, [lme_record("ok"), record])
    with pytest.raises(DataFileError, match=field_pattern) as info:
        get_benchmark("longmemeval_oracle", path).load("all")
    assert "longmemeval_oracle.json: record q1 (index 1)" in str(info.value)


def test_longmemeval_bad_splits_file(tmp_path: Path) -> None:
    write_lme(tmp_path, [lme_record()], splits={"train": [], "val": []})
    with pytest.raises(
        DataFileError, match=r"longmemeval_s_splits_qids.json: record <top level>: field 'test'"
    ):
        get_benchmark("longmemeval_oracle", tmp_path).load("test")


def test_longmemeval_s_cache_from_small_xz(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    records = [lme_record(f"q{i}") for i in range(5)]
    write_lme(tmp_path, records, splits={"train": ["q0", "q1"], "val": ["missing_one"], "test": ["q4", "q3"]})
    with lzma.open(tmp_path / "longmemeval_s_cleaned_498.json.xz", "wt") as fh:
        json.dump(records, fh)
    bench = get_benchmark("longmemeval", tmp_path, cache_root=tmp_path / "cache")
    assert [s.sample_id for s in bench.load("test")] == ["q4", "q3"]
    assert bench.load("val") == [] and bench.missing["val"] == ["missing_one"]
    # the cache is keyed by the file's sha256 and holds one file per question plus the index
    (cache_dir,) = [p for p in (tmp_path / "cache" / "longmemeval_s").iterdir() if p.is_dir()]
    assert sorted(p.name for p in cache_dir.iterdir()) == ["index.json"] + [f"q{i}.json.gz" for i in range(5)]


def test_longmemeval_s_truncated_xz_leaves_no_cache(tmp_path: Path) -> None:
    records = [lme_record(f"q{i}") for i in range(5)]
    write_lme(tmp_path, records)
    text = json.dumps(records)
    with lzma.open(tmp_path / "longmemeval_s_cleaned_498.json.xz", "wt") as fh:
        fh.write(text[: int(len(text) * 0.7)])
    with pytest.raises(
        DataFileError, match=r"longmemeval_s_cleaned_498.json.xz: record index 3: .*truncated"
    ):
        get_benchmark("longmemeval", tmp_path, cache_root=tmp_path / "cache").load("test")
    parent = tmp_path / "cache" / "longmemeval_s"
    assert [p for p in parent.iterdir() if p.is_dir()] == []  # nothing half-built left behind


def test_longmemeval_s_bad_record_names_field(tmp_path: Path) -> None:
    records = [lme_record("q0"), lme_record("q1", question_type=7)]
    write_lme(tmp_path, records)
    with lzma.open(tmp_path / "longmemeval_s_cleaned_498.json.xz", "wt") as fh:
        json.dump(records, fh)
    with pytest.raises(
        DataFileError, match=r"record q1 \(index 1\): field 'question_type': expected str, got int"
    ):
        get_benchmark("longmemeval", tmp_path, cache_root=tmp_path / "cache").load("all")


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ('{"a": 1}', "expected a JSON list"),
        ('[{"a": 1}, {"b": ', r"record index 1: .*truncated"),
        ('[{"a": 1} {"b": 2}]', r"record index 1: .*expected ','"),
        ('[{"a": 1}, {"b": nope}]', r"record index 1: .*invalid JSON"),
        ('[{"a": 1}', r"record index 1: .*truncated"),
    ],
)
def test_jsonstream_errors(text: str, pattern: str) -> None:
    with pytest.raises(DataFileError, match=pattern):
        list(iter_json_list(io.StringIO(text), Path("f.json"), block=4))


def test_jsonstream_small_blocks_roundtrip() -> None:
    data = [{"i": i, "s": "x" * (i * 7), "nested": [1, {"k": "v"}]} for i in range(30)]
    assert list(iter_json_list(io.StringIO(json.dumps(data)), Path("f.json"), block=5)) == data
    assert list(iter_json_list(io.StringIO(" [ ] "), Path("f.json"))) == []


# -------------------------------------------------------------------------- HotpotQA


def hotpot_record(qid: str = "h1", **overrides: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "_id": qid,
        "question": "Which is older?",
        "answer": "yes",
        "supporting_facts": [["Alpha", 0], ["Beta", 1]],
        "context": [["Alpha", ["Alpha was founded in 1900."]], ["Beta", ["Beta is a town.", " It is old."]]],
        "type": "comparison",
        "level": "easy",
    }
    rec.update(overrides)
    return rec


def write_hotpot(tmp_path: Path, lines: list[str]) -> Path:
    (tmp_path / "hotpotqa_aflow_validate200.jsonl").write_text("\n".join(lines) + "\n")
    return tmp_path


def test_small_valid_hotpotqa(tmp_path: Path) -> None:
    path = write_hotpot(tmp_path, [json.dumps(hotpot_record(f"h{i}")) for i in range(10)])
    samples = get_benchmark("hotpotqa", path).load("all")
    q = samples[0].questions[0]
    assert q.evidence_ids == ("Alpha#0", "Beta#1")
    assert samples[0].history.sessions[1].turns[1].text == "It is old."
    bench = get_benchmark("hotpotqa", path)
    assert [len(bench.load(s)) for s in ("train", "val", "test")] == [6, 2, 2]
    # the JSON-list form of the same records loads identically
    (tmp_path / "hotpotqa_aflow_validate200.jsonl").write_text(
        json.dumps([hotpot_record(f"h{i}") for i in range(10)])
    )
    assert get_benchmark("hotpotqa", path).load("all") == samples


@pytest.mark.parametrize(
    ("record", "pattern"),
    [
        (hotpot_record(supporting_facts=[["Gamma", 0]]), r"supporting_facts\[0\]'.*names no sentence"),
        (
            hotpot_record(supporting_facts=[["Alpha", "0"]]),
            r"supporting_facts\[0\]'.*expected \[title, sent_idx\]",
        ),
        (
            hotpot_record(context=[["Alpha", "not a list"]]),
            r"context\[0\]'.*expected \[title, \[sentences\]\]",
        ),
        ({k: v for k, v in hotpot_record().items() if k != "type"}, r"field 'type': missing"),
    ],
)
def test_hotpotqa_bad_field(tmp_path: Path, record: dict[str, Any], pattern: str) -> None:
    path = write_hotpot(tmp_path, [json.dumps(hotpot_record("ok")), json.dumps(record)])
    with pytest.raises(DataFileError, match=pattern) as info:
        get_benchmark("hotpotqa", path).load("all")
    assert "hotpotqa_aflow_validate200.jsonl: record h1 (index 1)" in str(info.value)


def test_hotpotqa_truncated_line(tmp_path: Path) -> None:
    good = json.dumps(hotpot_record())
    path = write_hotpot(tmp_path, [good, good[:40]])
    with pytest.raises(
        DataFileError, match=r"hotpotqa_aflow_validate200.jsonl: record at line 2: .*truncated"
    ):
        get_benchmark("hotpotqa", path).load("all")
