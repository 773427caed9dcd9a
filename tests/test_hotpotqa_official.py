"""The official HotpotQA dev file (a JSON list, ``supporting_facts``, ``context`` as [title,
sentences]) and the AFlow JSON Lines form load through ``benchmark.options.file`` / ``--option
file=...``; ``describe``, ``retrieval`` and ``frontier`` accept it. The fixture
``tests/data/hotpot_dev_distractor_v1.json`` is a 10-question file in the official format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.hotpotqa import split_of
from benchmarks.registry import get_benchmark
from common.datadir import DataFileError
from evaluate import main

DATA = Path(__file__).parent / "data"
OFFICIAL = "hotpot_dev_distractor_v1.json"


def test_describe_prints_the_counts_of_the_official_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["describe", "--benchmark", "hotpotqa", "--data-dir", str(DATA), "--option", f"file={OFFICIAL}"])
        == 0
    )
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.split()[:1]}
    # 10 questions, 5 paragraphs x 3 sentences each; 60/20/20 by sha256(_id).
    assert rows["train"][:4] == ["6", "6", "30", "90"]
    assert rows["val"][:2] == ["2", "2"] and rows["test"][:2] == ["2", "2"]
    assert rows["all"][:5] == ["10", "10", "50", "150", "10"]
    assert "bridge" in out and "comparison" in out and f"{OFFICIAL}  sha256" in out


def test_official_list_and_jsonl_forms_load_the_same(tmp_path: Path) -> None:
    records = json.loads((DATA / OFFICIAL).read_text())
    (tmp_path / "same.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    official = get_benchmark("hotpotqa", data_dir=DATA, file=OFFICIAL)
    jsonl = get_benchmark("hotpotqa", data_dir=tmp_path, file="same.jsonl")
    for split in ("train", "val", "test", "all"):
        assert official.load(split) == jsonl.load(split)
    sample = official.load("all")[0]
    q = sample.questions[0]
    assert q.question_id == records[0]["_id"] and q.extra["level"] == "hard"
    assert q.evidence_ids == tuple(f"{t}#{i}" for t, i in records[0]["supporting_facts"])
    assert sample.history.kind == "document" and len(sample.history.sessions) == len(records[0]["context"])
    assignment = split_of([r["_id"] for r in records])
    assert [s.sample_id for s in official.load("test")] == [
        r["_id"] for r in records if assignment[r["_id"]] == "test"
    ]


@pytest.mark.parametrize(
    ("change", "pattern"),
    [
        (
            {"supporting_facts": [["Nobody", 0]]},
            r"field 'supporting_facts\[0\]': \['Nobody', 0\] names no sentence",
        ),
        ({"context": [["Title only"]]}, r"field 'context\[0\]': expected \[title, \[sentences\]\]"),
        ({"answer": ["a", "b"]}, r"field 'answer': expected str or int"),
    ],
)
def test_bad_official_records_name_file_record_and_field(tmp_path: Path, change: dict, pattern: str) -> None:
    records = json.loads((DATA / OFFICIAL).read_text())
    records[3] = {**records[3], **change}
    (tmp_path / OFFICIAL).write_text(json.dumps(records))
    qid = records[3]["_id"]
    with pytest.raises(DataFileError, match=rf"{OFFICIAL}: record {qid} \(index 3\): {pattern}"):
        get_benchmark("hotpotqa", data_dir=tmp_path, file=OFFICIAL).load("all")


def test_retrieval_and_frontier_accept_the_file_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--benchmark", "hotpotqa", "--data-dir", str(DATA), "--option", f"file={OFFICIAL}"]
    assert (
        main(
            [
                "retrieval",
                *args,
                "--encoder",
                "hashing",
                "--no-cache",
                "--split",
                "all",
                "--modes",
                "dense",
                "--k",
                "2",
                "--out",
                str(tmp_path / "ret"),
            ]
        )
        == 0
    )
    (summary,) = (tmp_path / "ret").glob("hotpotqa_all_*/summary.json")
    info = json.loads(summary.read_text())
    assert info["questions"] == 10 and list(info["metadata"]["data_checksums"]) == [OFFICIAL]
    capsys.readouterr()
    sets = [
        "backend=fake",
        "encoder=hashing",
        f"data_dir={DATA}",
        "benchmark=hotpotqa",
        f"benchmark.options.file={OFFICIAL}",
        f"cache.path={tmp_path / 'calls.sqlite'}",
        f"question_bank.cache_dir={tmp_path / 'banks'}",
    ]
    argv = [
        "frontier",
        "--baselines",
        "all-low,all-high",
        "--n-boot",
        "20",
        "--no-progress",
        "--val-limit",
        "2",
        "--out",
        str(tmp_path / "fr"),
    ]
    assert main([*argv, *(x for s in sets for x in ("--set", s))]) == 0
    assert "hotpotqa / test: 2 questions" in capsys.readouterr().out
    meta = json.loads((tmp_path / "fr" / "metadata.json").read_text())
    assert list(meta["data_checksums"]) == [OFFICIAL]
