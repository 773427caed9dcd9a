"""Records, question banks and frontier systems export to a ``datasets`` Dataset that reads back
with the same values (``load_from_disk`` for Arrow, ``load_dataset("parquet")`` for Parquet)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from benchmarks.types import Question
from envs.question_bank import QuestionItem
from evaluate import main
from evaluation.export_dataset import export, flatten
from modules.types import Evidence


def record(qid: str, f1: float, judge: float | None, failed: bool = False) -> dict[str, Any]:
    cost = {"value": 1.5, "calls": 1, "cache_hits": 0, "failures": 0, "latency_s": 0.25, "models": ["m"]}
    return {
        "question_id": qid,
        "category": "single-hop",
        "tiers": ["LOW", "HIGH", "MID", "LOW", "LOW"],
        "module_costs": {"filter": cost, "summary": {**cost, "value": 3.0}},
        "module_cost": 4.5,
        "f1": f1,
        "em": float(f1 == 1.0),
        "judge": judge,
        "judge_failed": failed,
        "judge_protocol": "locomo" if judge is not None or failed else "",
        "prediction": f"answer {qid}",
        "reward": None,
        "cost_lambda": 0.1,
    }


def read_back(out: Path, fmt: str) -> list[dict[str, Any]]:
    import datasets

    if fmt == "arrow":
        return datasets.load_from_disk(str(out)).to_list()
    return datasets.load_dataset("parquet", data_files=str(out), split="train").to_list()


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf"))


@pytest.mark.parametrize("fmt", ["arrow", "parquet"])
def test_episode_records_read_back_with_the_same_values(tmp_path: Path, fmt: str) -> None:
    recs = [record("q1", 0.5, 1.0), record("q2", 1.0, None, failed=True), record("q3", 0.0, None)]
    run_dir = tmp_path / "frontier" / "records" / "fp" / "test"
    run_dir.mkdir(parents=True)
    (run_dir / "router-lam0.1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs[:2]))
    (run_dir / "fixed-HHHHH.jsonl").write_text(json.dumps(recs[2]) + "\n")
    out = tmp_path / ("ds" if fmt == "arrow" else "ds.parquet")
    export("records", [tmp_path / "frontier"], out, fmt)
    got = read_back(out, fmt)
    # Files in sorted order: fixed-HHHHH first.
    want = [
        {"source": "records/fp/test/fixed-HHHHH.jsonl", **flatten(recs[2])},
        *({"source": "records/fp/test/router-lam0.1.jsonl", **flatten(r)} for r in recs[:2]),
    ]
    assert got == want
    assert got[1]["module_costs.summary.value"] == 3.0 and got[1]["tiers"][1] == "HIGH"
    assert got[2]["judge"] is None and got[2]["judge_failed"] is True


def test_question_bank_and_frontier_export(tmp_path: Path) -> None:
    q = Question(
        "c:q0", "Where?", "Paris", "4", ("D1:1",), "2023-05-01", False, {"category_name": "single-hop"}
    )
    ev = (Evidence("c:0", "A said, hi", "2023", 0.75, ("D1:1", "D1:2")),)
    item = QuestionItem(q, "c", "locomo", ev)
    (tmp_path / "banks").mkdir()
    bank = tmp_path / "banks" / "locomo-test-abc.json"
    bank.write_text(json.dumps({"ident": {"k": 5}, "items": [item.to_dict()]}))
    ds = export("bank", [tmp_path / "banks"], tmp_path / "bank_ds")
    (row,) = read_back(tmp_path / "bank_ds", "arrow")
    assert row["question.question_id"] == "c:q0" and row["question.evidence_ids"] == ["D1:1"]
    assert row["question.extra.category_name"] == "single-hop" and row["bank"] == bank.name
    assert row["evidence"] == [json.loads(json.dumps(e)) for e in item.to_dict()["evidence"]]
    assert len(ds) == 1

    systems = [
        {
            "name": "router λ=0",
            "kind": "router",
            "metrics": {"f1": {"mean": 0.4, "lo": 0.3, "hi": 0.5, "n": 3}},
            "params": {"seed": 1},
            "seed_std": {},
        },
        {
            "name": "all-low",
            "kind": "fixed",
            "metrics": {"f1": {"mean": 0.2, "lo": None, "hi": None, "n": 3}},
            "params": {"seed": "n/a"},
            "seed_std": {},
        },
    ]
    (tmp_path / "fr").mkdir()
    (tmp_path / "fr" / "frontier.json").write_text(json.dumps({"systems": systems}))
    ds = export("frontier", [tmp_path / "fr" / "frontier.json"], tmp_path / "fr.parquet", "parquet")
    rows = read_back(tmp_path / "fr.parquet", "parquet")
    assert [r["metrics.f1.mean"] for r in rows] == [0.4, 0.2] and rows[1]["metrics.f1.lo"] is None
    assert rows[0]["seed_std"] is None  # an empty mapping has no columns
    # Text in one row and a number in another: kept as JSON text, and said so.
    assert [json.loads(r["params.seed"]) for r in rows] == [1, "n/a"]
    assert "params.seed" in ds.info.description
    assert not any(isinstance(v, float) and math.isnan(v) for r in rows for v in r.values())


def test_export_cli_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "validation_records_best.json").write_text(json.dumps([record("q1", 1.0, None)]))
    assert main(["export", "records", str(tmp_path / "v"), "--out", str(tmp_path / "o.parquet")]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["rows"] == 1
    assert read_back(tmp_path / "o.parquet", "parquet")[0]["question_id"] == "q1"
    # Re-exporting replaces the old dataset in one step.
    assert main(["export", "records", str(tmp_path / "v"), "--out", str(tmp_path / "o")]) == 0
    assert main(["export", "records", str(tmp_path / "v"), "--out", str(tmp_path / "o")]) == 0
    assert len(read_back(tmp_path / "o", "arrow")) == 1
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "x.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="not a question-bank cache file"):
        export("bank", [tmp_path / "bad"], tmp_path / "b")
    with pytest.raises(ValueError, match=r"no \*\.jsonl or \*\.jsonl\.gz or validation_records\*"):
        export("records", [tmp_path / "bad"], tmp_path / "b")
    with pytest.raises(FileNotFoundError, match="export input not found"):
        export("records", [tmp_path / "missing"], tmp_path / "b")
