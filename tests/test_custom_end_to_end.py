"""The "Your own data" guide's example (docs/how-to/own-data.md), end to end with the fake backend: ``train.py
benchmark=custom`` on ``tests/data/custom_example.jsonl``, then ``evaluate.py frontier`` on its
router, then ``evaluate.py export`` of the frontier's per-question records."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "tests" / "data" / "custom_example.jsonl"


def _run(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(
        OMP_NUM_THREADS="1",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        PYTHONHASHSEED="0",
        WANDB_MODE="disabled",
        BUDGET_ROUTER_CACHE=str(tmp_path / "derived"),
    )
    out = subprocess.run(
        [sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out


def _train(tmp_path: Path, runs: str, *extra: str) -> None:
    _run(
        [
            str(ROOT / "train.py"),
            "benchmark=custom",
            f"benchmark.options.path={EXAMPLE}",
            "backend=fake",
            "encoder=hashing",
            "memory=no_ce",
            "train=tiny",
            "ppo=tiny",
            f"runs_dir={tmp_path / runs}",
            f"cache.path={tmp_path / 'calls.sqlite'}",
            f"question_bank.cache_dir={tmp_path / 'banks'}",
            *extra,
        ],
        tmp_path,
    )


def test_readme_custom_example_trains_evaluates_and_exports(tmp_path: Path) -> None:
    _train(tmp_path, "runs")
    run = tmp_path / "runs" / "custom__implementation__lam0__s0"
    assert (run / "router" / "router.pt").is_file()
    assert (run / "config.yaml").read_text().count("custom_example.jsonl") >= 1

    # The run again from the call cache alone (cache.replay): nothing is computed, the result is the same.
    _train(tmp_path, "replayed", "cache.replay=true")
    replayed = tmp_path / "replayed" / "custom__implementation__lam0__s0"
    first, again = (json.loads((r / "result.json").read_text()) for r in (run, replayed))
    assert again["best_score"] == first["best_score"] and again["validation"]["cache_hit_rate"] == 1.0
    cache_keys = {"cache_hits", "cache_hit_rate"}
    assert {k: v for k, v in again["validation"].items() if k not in cache_keys} == {
        k: v for k, v in first["validation"].items() if k not in cache_keys
    }

    out = _run(
        [
            str(ROOT / "evaluate.py"),
            "frontier",
            "--routers",
            str(tmp_path / "runs"),
            "--baselines",
            "all-low,all-high",
            "--n-boot",
            "50",
            "--no-progress",
            "--out",
            str(tmp_path / "frontier"),
        ],
        tmp_path,
    )
    assert "custom / test: 3 questions" in out.stdout
    meta = json.loads((tmp_path / "frontier" / "metadata.json").read_text())
    assert meta["benchmark"] == "custom" and list(meta["data_checksums"]) == ["custom_example.jsonl"]
    records = sorted((tmp_path / "frontier" / "records").rglob("*.jsonl"))
    assert records, "the frontier wrote no per-question records"
    n_records = sum(len(p.read_text().splitlines()) for p in records)

    out = _run(
        [
            str(ROOT / "evaluate.py"),
            "export",
            "records",
            str(tmp_path / "frontier"),
            "--out",
            str(tmp_path / "ds"),
        ],
        tmp_path,
    )
    import datasets

    ds = datasets.load_from_disk(str(tmp_path / "ds"))
    assert len(ds) == n_records and {"question_id", "f1", "module_cost", "source"} <= set(ds.column_names)
