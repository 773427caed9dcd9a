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
