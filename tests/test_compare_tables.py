"""``scripts/compare_tables.py``: two record dirs of one table compared question by question, and the calls a
rerun's cache shares with the packs under one key compared text by text."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluation.frontier_runner import RecordStore
from modules.cache import CallCache
from modules.cache_pack import export_pack
from tests.support import load_script


def _records(root: Path, run: str, rows: dict[str, tuple[str, float]]) -> None:
    store = RecordStore(root / f"{run}.jsonl")
    store.add([{"question_id": q, "prediction": p, "f1": f} for q, (p, f) in rows.items()])
    store.save()


def _call(text: str) -> dict:
    return {
        "text": text, "tokens_in": 5, "tokens_out": 2, "latency_s": 0.1, "model_id": "m",
        "finish_reason": "stop", "truncated": False, "tags": {"module": "answer"},
    }  # fmt: skip


def test_runs_are_compared_on_the_questions_both_hold(tmp_path, capsys) -> None:
    ct = load_script("compare_tables")
    a, b = tmp_path / "a", tmp_path / "b"
    _records(a, "fixed-LLLLL", {"q1": ("x", 1.0), "q2": ("y", 0.0), "q3": ("z", 0.5)})
    _records(b, "fixed-LLLLL", {"q1": ("x", 1.0), "q2": ("w", 1.0), "q4": ("v", 1.0)})
    _records(a, "fixed-HHHHH", {"q1": ("x", 1.0)})  # only in A: not compared
    (row,) = ct.compare_runs(a, b)
    assert (row["run"], row["n"], row["same_answer"]) == ("fixed-LLLLL", 2, 1)
    assert (row["a"], row["b"], row["diff"]) == (0.5, 1.0, 0.5)
    assert row["lo"] <= row["diff"] <= row["hi"]
    assert "1 of 2 answers the same (50%)" in ct.format_rows([row], "f1")
    with pytest.raises(SystemExit, match="no record files"):
        ct.compare_runs(a, tmp_path / "empty")


def test_calls_under_one_key_are_compared_by_text(tmp_path, capsys) -> None:
    ct = load_script("compare_tables")
    with CallCache(tmp_path / "a.sqlite") as cache:
        cache.put_many([("k1", _call("Paris")), ("k2", _call("Tokyo")), ("k3", _call("Rome"))])
    pack = export_pack(tmp_path / "a.sqlite", f"{tmp_path}/packs/").path
    with CallCache(tmp_path / "b.sqlite") as cache:
        cache.put_many([("k1", _call("Paris")), ("k2", _call("Kyoto")), ("k9", _call("Oslo"))])
    assert ct.compare_calls(tmp_path / "b.sqlite", [pack]) == {"calls": 3, "shared": 2, "same_text": 1}
    _records(tmp_path / "ra", "fixed-LLLLL", {"q1": ("x", 1.0)})
    _records(tmp_path / "rb", "fixed-LLLLL", {"q1": ("x", 1.0)})
    argv = [str(tmp_path / "ra"), str(tmp_path / "rb"), "--calls", str(tmp_path / "b.sqlite")]
    assert ct.main([*argv, "--packs", str(tmp_path / "packs" / "*.pack.gz")]) == 0
    out = capsys.readouterr().out
    assert "2 of them under a key A's packs hold; 1 of those with the same text (50%)" in out
    with pytest.raises(SystemExit, match="go together"):
        ct.main(argv)
