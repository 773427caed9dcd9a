"""``benchmark=custom``: the example file, every input format, the column mapping, splits, and errors
that name file, row and field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.custom import ratio_splits
from benchmarks.metrics import score_answer
from benchmarks.registry import get_benchmark
from common.datadir import DataFileError

EXAMPLE = Path(__file__).parent / "data" / "custom_example.jsonl"


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # datasets' Arrow cache of the loaded files goes under the derived-cache root.
    monkeypatch.setenv("BUDGET_ROUTER_CACHE", str(tmp_path / "cache"))


def example_rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in EXAMPLE.read_text().splitlines() if line.strip()]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def uniform_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every row with every column (Dataset.from_list takes its columns from the first row) and
    answers as text (Parquet needs one column type; the loader turns numbers into text anyway)."""
    keys = sorted({k for r in rows for k in r})
    return [{k: str(r[k]) if k == "answer" and k in r else r.get(k) for k in keys} for r in rows]


def load_all(path: Path, **opts: Any) -> list[Any]:
    return get_benchmark("custom", path=str(path), **opts).load("all")


def test_example_file_loads_with_ratio_splits() -> None:
    bench = get_benchmark("custom", path=str(EXAMPLE))
    splits = {s: [x.sample_id for x in bench.load(s)] for s in ("train", "val", "test")}
    assert splits == {"train": ["ana", "carl", "ivy"], "val": ["eva"], "test": ["gus"]}
    assignment = ratio_splits(["ana", "carl", "eva", "gus", "ivy"], (0.6, 0.2, 0.2), 0)
    assert {h: s for s, hs in splits.items() for h in hs} == assignment
    ana = bench.load("all")[0]
    assert [s.timestamp for s in ana.history.sessions] == ["2024-03-02", "2024-04-10"]
    assert ana.history.turns()[0].turn_id == "s0:t0" and ana.history.kind == "dialogue"
    q = ana.questions
    assert [x.question_id for x in q] == ["ana:q0", "ana:q1", "ana:q2"]
    assert q[0].answer == "Miso" and q[0].evidence_ids == ("s0:t0",) and q[0].question_date == "2024-07-01"
    assert json.loads(q[2].extra["answers"]) == ["two years old", "2 years", "two"]
    carl = bench.load("all")[1].questions
    assert carl[1].answer == "2" and carl[2].is_abstention and carl[2].category == "adversarial"
    # A session id as evidence stands for all its turns.
    gus = bench.load("test")[0].questions[2]
    assert gus.evidence_ids == ("s1:t0", "s1:t1", "s1:t2", "s1:t3")
    info = bench.describe()
    assert info["splits"]["all"]["questions"] == 15 and info["splits"]["all"]["turns"] == 40
    assert list(info["checksums"]) == ["custom_example.jsonl"]


def test_alternative_answers_score_the_best_match() -> None:
    q = get_benchmark("custom", path=str(EXAMPLE)).load("all")[0].questions[2]
    assert score_answer(q, "2 years", "custom") == {"f1": 1.0, "em": 1.0}
    assert score_answer(q, "Miso", "custom")["f1"] == 0.0


def test_every_format_gives_the_same_samples(tmp_path: Path) -> None:
    import datasets

    rows = example_rows()
    want = load_all(EXAMPLE)
    (tmp_path / "list.json").write_text(json.dumps(rows))
    ds = datasets.Dataset.from_list(uniform_rows(rows))
    ds.to_parquet(str(tmp_path / "data.parquet"))
    ds.save_to_disk(str(tmp_path / "saved"))
    # CSV: list columns as JSON text, evidence ';'-separated.
    import csv

    with open(tmp_path / "data.csv", "w", newline="") as fh:
        cols = [
            "history_id",
            "sessions",
            "question",
            "answer",
            "answers",
            "category",
            "evidence_ids",
            "question_date",
            "abstention",
        ]
        w = csv.DictWriter(fh, fieldnames=cols)
        w.writeheader()
        for r in rows:
            w.writerow(
                {
                    **{c: r.get(c, "") for c in cols},
                    "sessions": json.dumps(r["sessions"]) if "sessions" in r else "",
                    "answers": json.dumps(r["answers"]) if "answers" in r else "",
                    "evidence_ids": ";".join(r["evidence_ids"]),
                    "abstention": "true" if r.get("abstention") else "",
                }
            )
    for name in ("list.json", "data.parquet", "saved", "data.csv"):
        got = load_all(tmp_path / name)
        assert got == want, name
        assert [q.extra for s in got for q in s.questions] == [q.extra for s in want for q in s.questions]


def test_saved_dataset_dict_keys_are_the_splits(tmp_path: Path) -> None:
    import datasets

    rows = [r for r in uniform_rows(example_rows()) if r["history_id"] in ("ana", "eva")]
    dd = datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_list([r for r in rows if r["history_id"] == "ana"]),
            "validation": datasets.Dataset.from_list([r for r in rows if r["history_id"] == "eva"]),
        }
    )
    dd.save_to_disk(str(tmp_path / "dd"))
    bench = get_benchmark("custom", path=str(tmp_path / "dd"))
    assert [s.sample_id for s in bench.load("train")] == ["ana"]
    assert [s.sample_id for s in bench.load("val")] == ["eva"]
    assert bench.load("test") == []


def test_column_mapping_documents_and_split_column(tmp_path: Path) -> None:
    rows = [
        {
            "doc_set": "d1",
            "passages": [
                {"title": "Paris", "text": "Paris is the capital of France."},
                ["Lyon", ["Lyon is a city.", "It lies on the Rhone."]],
            ],
            "query": "Which river is Lyon on?",
            "gold": "the Rhone",
            "part": "test",
            "evidence_ids": ["Lyon#1"],
        },
        {
            "doc_set": "d2",
            "passages": [{"title": "Oslo", "text": "Oslo is in Norway."}],
            "query": "Where is Oslo?",
            "gold": "Norway",
            "part": "train",
            "evidence_ids": ["Oslo"],
        },
    ]
    cols = {
        "history_id": "doc_set",
        "documents": "passages",
        "question": "query",
        "answer": "gold",
        "split": "part",
    }
    bench = get_benchmark("custom", path=str(write_jsonl(tmp_path / "d.jsonl", rows)), columns=cols)
    (d1,) = bench.load("test")
    assert d1.history.kind == "document" and [s.session_id for s in d1.history.sessions] == ["Paris", "Lyon"]
    assert d1.questions[0].evidence_ids == ("Lyon#1",) and d1.questions[0].category == "default"
    assert [s.sample_id for s in bench.load("train")] == ["d2"]
    assert bench.load("train")[0].questions[0].evidence_ids == ("Oslo#0",)


def test_split_seed_changes_the_ratio_split() -> None:
    ids = [f"h{i}" for i in range(50)]
    a, b = ratio_splits(ids, (0.6, 0.2, 0.2), 0), ratio_splits(ids, (0.6, 0.2, 0.2), 1)
    assert a != b and sorted(a.values()).count("train") == 30 and sorted(a.values()).count("val") == 10
    assert a == ratio_splits(list(reversed(ids)), (0.6, 0.2, 0.2), 0)  # independent of row order


def _first(**changes: Any) -> list[dict[str, Any]]:
    rows = example_rows()[:3]
    rows[0] = {k: v for k, v in {**rows[0], **changes}.items() if v is not None}
    return rows


@pytest.mark.parametrize(
    ("rows", "field_pattern"),
    [
        (_first(question=None), r"row 1 \(history ana\): field 'question': missing"),
        (_first(question=" \t "), r"row 1 \(history ana\): field 'question': is only whitespace"),
        (_first(answer=None), r"row 1 \(history ana\): field 'answer': missing"),
        (
            _first(evidence_ids=["s9:t9"]),
            r"row 1 \(history ana\): field 'evidence_ids\[0\]': 's9:t9' names no",
        ),
        (
            _first(sessions=[{"date": "x", "turns": [{"speaker": "A"}]}]),
            r"row 1 \(history ana\): field 'sessions\[0\].turns\[0\].text': missing",
        ),
        (_first(sessions=[{"turns": "hello"}]), r"field 'sessions\[0\].turns': expected a list"),
        (_first(split="holdout"), r"row 1 \(history ana\): field 'split': unknown split 'holdout'"),
        (_first(abstention="maybe"), r"field 'abstention': expected true/false"),
        (
            [*_first(question_id="dup"), {**example_rows()[1], "question_id": "dup"}],
            r"field 'question_id': question id 'dup' repeats",
        ),
    ],
)
def test_bad_rows_name_file_row_and_field(
    tmp_path: Path, rows: list[dict[str, Any]], field_pattern: str
) -> None:
    path = write_jsonl(tmp_path / "bad.jsonl", rows)
    with pytest.raises(
        DataFileError,
        match=rf"bad\.jsonl: record {field_pattern}" if "row" in field_pattern else field_pattern,
    ):
        load_all(path)


def test_history_conflicts_and_missing_history(tmp_path: Path) -> None:
    rows = example_rows()[:2]
    rows[1]["sessions"] = [{"turns": [{"speaker": "X", "text": "other"}]}]
    with pytest.raises(DataFileError, match=r"row 2 \(history ana\): field 'sessions': differs from row 1"):
        load_all(write_jsonl(tmp_path / "a.jsonl", rows))
    orphan = [{"history_id": "z", "question": "q?", "answer": "a"}]
    with pytest.raises(DataFileError, match=r"no row of history 'z' gives sessions or documents"):
        load_all(write_jsonl(tmp_path / "b.jsonl", orphan))
    split_mix = [{**r, "split": s} for r, s in zip(example_rows()[:2], ("train", "test"), strict=True)]
    with pytest.raises(DataFileError, match=r"row 2 \(history ana\): field 'split': is 'test' but earlier"):
        load_all(write_jsonl(tmp_path / "c.jsonl", split_mix))


def test_file_level_errors(tmp_path: Path) -> None:
    bad = tmp_path / "broken.jsonl"
    bad.write_text(EXAMPLE.read_text().splitlines()[0] + "\n{not json\n")
    with pytest.raises(DataFileError, match=r"broken\.jsonl: record at line 2: field <json>"):
        load_all(bad)
    with pytest.raises(DataFileError, match=r"custom benchmark data not found: 'nope\.jsonl'"):
        get_benchmark("custom", path="nope.jsonl")
    with pytest.raises(ValueError, match=r"needs benchmark\.options\.path"):
        get_benchmark("custom")
    with pytest.raises(ValueError, match="split_ratio must be"):
        get_benchmark("custom", path=str(EXAMPLE), split_ratio=[0.5, 0.5, 0.5])
    with pytest.raises(ValueError, match="columns: unknown field 'questions'"):
        get_benchmark("custom", path=str(EXAMPLE), columns={"questions": "q"})
    (tmp_path / "x.txt").write_text("hi")
    with pytest.raises(DataFileError, match="unknown data format"):
        load_all(tmp_path / "x.txt")


def test_describe_command_takes_loader_options(capsys: pytest.CaptureFixture[str]) -> None:
    from evaluate import main

    argv = ["describe", "--benchmark", "custom", "--option", f"path={EXAMPLE}", "--option", "split_seed=3"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    all_row = next(line.split() for line in out.splitlines() if line.startswith("all "))
    assert all_row[1:6] == ["5", "15", "10", "40", "14"] and "custom_example.jsonl  sha256" in out
    with pytest.raises(SystemExit, match="expected KEY=VALUE"):
        main(["describe", "--benchmark", "custom", "--option", "path"])


def test_a_same_mtime_replacement_is_read_by_content(tmp_path: Path) -> None:
    """`cp -p`, `rsync -a`, `tar x` keep the mtime: datasets' cache (path + mtime) served the old rows."""
    import os

    rows = example_rows()
    path = write_jsonl(tmp_path / "data.jsonl", rows[:12])
    stamp = (1_700_000_000, 1_700_000_000)
    os.utime(path, stamp)
    bench = get_benchmark("custom", path=str(path))
    first = sum(len(s.questions) for s in bench.load("all"))
    old_sum = bench.checksums
    write_jsonl(path, rows)  # 15 rows now
    os.utime(path, stamp)
    again = get_benchmark("custom", path=str(path))
    n = sum(len(s.questions) for s in again.load("all"))
    assert (first, n) == (12, 15)
    assert again.checksums != old_sum  # the run records the new file's sha256 next to the new rows


def test_a_verbatim_duplicate_row_is_warned_about(tmp_path: Path) -> None:
    """Issue 49, item 10: a duplicated row was silently another question."""
    rows = example_rows()
    path = write_jsonl(tmp_path / "dup.jsonl", [*rows, rows[1]])
    with pytest.warns(UserWarning, match=r"dup\.jsonl: row 16 repeats row 2 verbatim"):
        assert sum(len(s.questions) for s in load_all(path)) == 16


def test_a_row_larger_than_the_datasets_block_loads(tmp_path: Path) -> None:
    """Issue 49, item 10: a valid 50 MB row was refused ("An error occurred while generating the dataset")."""
    rows = example_rows()
    big = json.loads(json.dumps(rows[0]))
    big["sessions"][0]["turns"][0]["text"] = "x" * (50 * 2**20)
    path = write_jsonl(tmp_path / "big.jsonl", [big, *rows[1:]])
    samples = load_all(path)
    assert sum(len(s.questions) for s in samples) == 15
    assert len(samples[0].history.turns()[0].text) == 50 * 2**20


def test_a_non_utf8_byte_is_named_with_its_line(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "latin.jsonl", example_rows())
    lines = path.read_bytes().split(b"\n")
    lines[3] = lines[3].replace(b"Miso", b"Mis\xf6", 1) if b"Miso" in lines[3] else lines[3][:-2] + b'\xf6"}'
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(DataFileError, match=r"latin\.jsonl: record at line 4: field <encoding>: byte 0xf6"):
        load_all(path)


def test_an_empty_file_says_so(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("")
    with pytest.raises(DataFileError, match=r"empty\.jsonl: the file is empty"):
        load_all(path)


def test_a_history_without_turns_is_warned_about(tmp_path: Path) -> None:
    rows = [{k: v for k, v in r.items() if k != "evidence_ids"} for r in example_rows()]
    rows[0]["sessions"] = []
    path = write_jsonl(tmp_path / "nosessions.jsonl", rows)
    with pytest.warns(UserWarning, match=r"history 'ana' has no turns or sentences"):
        load_all(path)


def test_an_empty_hotpotqa_file_is_warned_about(tmp_path: Path) -> None:
    (tmp_path / "hotpotqa_aflow_validate200.jsonl").write_text("")
    with pytest.warns(UserWarning, match="holds no questions"):
        assert get_benchmark("hotpotqa", str(tmp_path)).load("all") == []
