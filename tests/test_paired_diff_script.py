"""scripts/paired_diff.py: paired differences from record files, and clear errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import paired_diff as pd


def _records(path: Path, f1s: dict[str, float]) -> None:
    path.write_text("".join(json.dumps({"question_id": q, "f1": v}) + "\n" for q, v in f1s.items()))


def test_paired_difference_counts_and_a_difference_without_spread(tmp_path, capsys):
    _records(tmp_path / "low.jsonl", {"a": 0.0, "b": 0.5, "c": 1.0, "d": 0.25})
    # +0.25 on every question: the paired difference has no spread, whatever the resample
    _records(tmp_path / "high.jsonl", {"a": 0.25, "b": 0.75, "c": 1.25, "d": 0.5})
    _records(tmp_path / "mixed.jsonl", {"d": 0.25, "a": 1.0, "b": 0.0, "c": 1.0})
    assert pd.main([str(tmp_path), "low", "high", "mixed", "--n-boot", "200"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("low: f1 0.438 [") and out[0].endswith("(4 questions)")
    assert "− low: +0.250 [+0.250, +0.250]  better / worse 4 / 0" in out[1]
    assert "− low: +0.125 [" in out[2] and out[2].endswith("better / worse 1 / 1")


def test_errors_name_the_file_and_the_problem(tmp_path, capsys):
    _records(tmp_path / "low.jsonl", {"a": 0.0, "b": 0.5})
    _records(tmp_path / "fewer.jsonl", {"a": 0.0})
    (tmp_path / "bad.jsonl").write_text('{"question_id": "a", "f1": 0.1}\n{"question_id": "b"}\n')
    assert pd.main([str(tmp_path), "low", "fewer"]) == 2
    assert "other questions than low (1 missing, 0 extra)" in capsys.readouterr().err
    assert pd.main([str(tmp_path), "low", "bad"]) == 2
    assert "bad.jsonl: question b: no numeric 'f1'" in capsys.readouterr().err
    assert pd.main([str(tmp_path), "low", "absent"]) == 2
    assert "absent.jsonl: no such record file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        pd.main([str(tmp_path)])


def test_several_references_on_the_common_questions_as_a_markdown_table(tmp_path, capsys):
    # A study's files grow one path at a time: fixed-LLLLL already has question "e", the others not yet.
    _records(tmp_path / "fixed-LLLLL.jsonl", {"a": 0.0, "b": 0.5, "c": 1.0, "d": 0.25, "e": 1.0})
    _records(tmp_path / "fixed-MMMMM.jsonl", {"a": 0.5, "b": 0.5, "c": 1.0, "d": 0.25})
    _records(tmp_path / "fixed-MMMMH.jsonl", {"a": 0.5, "b": 1.0, "c": 1.5, "d": 0.75})
    argv = [str(tmp_path), "fixed-LLLLL,fixed-MMMMM", "fixed-MMMMH", "--n-boot", "200"]
    assert pd.main(argv) == 2
    assert "--common compares on the questions all files cover" in capsys.readouterr().err
    assert pd.main([*argv, "--common", "--markdown"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0] == "| path | f1 [95% CI] | − `L,L,L,L,L` | − `M,M,M,M,M` |"
    assert lines[2].startswith("| `L,L,L,L,L` | 0.438 [")
    assert lines[2].endswith(" | — | −0.125 [−0.375, +0.000] |")
    # +0.5 over all-LOW on every question (no spread: bold, the interval excludes 0); +0.375 over all-MID.
    assert "| **+0.500 [+0.500, +0.500]** | **+0.375 [+0.125, +0.500]** |" in lines[4]
    assert "4 questions every file covers; left out: {'fixed-LLLLL': 1}" in err


def test_a_table_bound_comparison_uses_the_tables_questions_and_names_a_file_lacking_one(tmp_path):
    """A study block still running writes records beyond the committed table: the docs' paired table reads
    the table's own questions (its metadata's ``question_ids``), not every question all files cover."""
    from evaluation.paired_table import paired_table, table_questions

    records = tmp_path / "records" / "fp" / "test"
    records.mkdir(parents=True)
    _records(records / "fixed-LLLLL.jsonl", {"a": 0.0, "b": 0.5, "c": 1.0, "e": 1.0})
    _records(records / "fixed-MMMMH.jsonl", {"a": 0.5, "b": 1.0, "c": 1.5, "e": 0.0})  # "e": a running block
    assert table_questions(records) is None  # no metadata: the caller falls back to the common questions
    (tmp_path / "metadata.json").write_text(json.dumps({"question_ids": ["c", "a", "b"]}))
    assert table_questions(records) == ["c", "a", "b"]
    table = paired_table(records, ["fixed-LLLLL"], ["fixed-MMMMH"], n_boot=100, questions=["c", "a", "b"])
    assert table.qids == ["a", "b", "c"]
    assert table.rows[1].diffs["fixed-LLLLL"].mean == pytest.approx(0.5)
    lacking = r"fixed-LLLLL: no record for 1 of the table's 4 questions \(first: \['d'\]\)"
    with pytest.raises(ValueError, match=lacking):
        paired_table(records, ["fixed-LLLLL"], ["fixed-MMMMH"], n_boot=100, questions=["a", "b", "c", "d"])
