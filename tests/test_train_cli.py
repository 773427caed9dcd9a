"""Subprocess smoke runs of ``train.py`` (cleanrl style): a single run with offline wandb, and a
two-value λ multirun that shares one call cache and writes a sweep summary."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import TINY_TRAIN_OVERRIDES, needs_locomo

ROOT = Path(__file__).resolve().parent.parent


pytestmark = [
    pytest.mark.slow,
    needs_locomo,
]


def _run(args, tmp_path, **env_extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(
        OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONHASHSEED="0", **env_extra
    )
    paths = [
        f"runs_dir={tmp_path / 'runs'}",
        f"cache.path={tmp_path / 'cache' / 'calls.sqlite'}",
        f"question_bank.cache_dir={tmp_path / 'banks'}",
    ]
    # cwd is the tmp dir: nothing may be written relative to the working directory.
    out = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), *args, *TINY_TRAIN_OVERRIDES, *paths],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out


def test_single_run_with_offline_wandb(tmp_path):
    wandb_dir = tmp_path / "wandb_files"
    wandb_dir.mkdir()
    out = _run(["wandb.mode=offline"], tmp_path, WANDB_DIR=str(wandb_dir), WANDB_SILENT="true")
    run = tmp_path / "runs" / "locomo__implementation__lam0__s0"
    assert "router:" in out.stdout and "validation report:" in out.stdout
    for name in (
        "router/metadata.json",
        "router/router.pt",
        "checkpoints/last/model.zip",
        "validation.md",
        "config.yaml",
        "run_metadata.json",
        ".hydra/config.yaml",
        ".hydra/overrides.yaml",
    ):
        assert (run / name).is_file(), name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["banks", "cache", "runs", "wandb_files"]
    offline = list(wandb_dir.rglob("offline-run-*"))
    assert offline, f"no offline wandb run under {wandb_dir}"
    assert list(offline[0].rglob("*.wandb")), "the offline run holds no .wandb log"


def test_lambda_multirun_shares_the_call_cache(tmp_path):
    out = _run(["-m", "cost.lambda=0,0.5"], tmp_path)
    runs = tmp_path / "runs"
    assert (runs / "locomo__implementation__lam0__s0" / "router" / "router.pt").is_file()
    assert (runs / "locomo__implementation__lam0.5__s0" / "router" / "router.pt").is_file()
    assert [p.name for p in (tmp_path / "cache").iterdir() if p.suffix == ".sqlite"] == ["calls.sqlite"]
    sweeps = list((runs / "sweeps").glob("sweep-*.csv"))
    assert len(sweeps) == 1 and str(sweeps[0]) in out.stdout
    rows = list(csv.DictReader(sweeps[0].open()))
    assert [(r["lambda"], r["seed"], r["status"]) for r in rows] == [
        ("0", "0", "completed"),
        ("0.5", "0", "completed"),
    ]
    for row in rows:
        for col in ("high_share", "val_f1", "val_module_cost", "llm_calls", "cache_hits"):
            assert row[col] != "", col
    # The second run reuses the first run's calls (same questions, same initial policy).
    assert int(rows[1]["cache_hits"]) > 0
    first = json.loads((runs / "locomo__implementation__lam0__s0" / "result.json").read_text())
    assert first["cost_lambda"] == 0.0
    meta = json.loads((runs / "locomo__implementation__lam0.5__s0" / "router" / "metadata.json").read_text())
    assert meta["cost_lambda"] == 0.5


def test_lambda_conditioned_multirun_writes_one_row_per_lambda(tmp_path):
    """`-m 'cost.lambdas=[0,0.5]'` is one job (a list value, not a sweep): one router for both λ."""
    out = _run(["-m", "cost.lambdas=[0,0.5]"], tmp_path)
    run = tmp_path / "runs" / "locomo__implementation__lamcond0-0.5__s0"
    assert (run / "router" / "router.pt").is_file() and (run / ".hydra" / "config.yaml").is_file()
    meta = json.loads((run / "router" / "metadata.json").read_text())
    assert meta["cost_lambdas"] == [0.0, 0.5]
    sweeps = list((tmp_path / "runs" / "sweeps").glob("sweep-*.csv"))
    assert len(sweeps) == 1 and str(sweeps[0]) in out.stdout
    rows = list(csv.DictReader(sweeps[0].open()))
    assert [(r["lambda"], r["run_name"]) for r in rows] == [
        ("0", run.name),
        ("0.5", run.name),
    ]
    per_lambda = json.loads((run / "result.json").read_text())["validation"]["per_lambda"]
    expected = [per_lambda["0"]["f1"], per_lambda["0.5"]["f1"]]
    assert [float(r["val_f1"]) for r in rows] == pytest.approx(expected)
