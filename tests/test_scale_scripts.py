"""The scale scripts: the GPU check is import-guarded (never needs vLLM here), the benchmarks run."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import load_script, needs_locomo

ROOT = Path(__file__).resolve().parent.parent


def _load(name: str):
    return load_script(name)


@pytest.mark.vllm
def test_check_vllm_gpu_imports_without_vllm_and_explains_itself() -> None:
    module = _load("check_vllm_gpu")  # importing must not import vLLM or touch a GPU
    assert callable(module.main)
    assert "vllm" not in sys.modules or importlib.util.find_spec("vllm") is not None
    if importlib.util.find_spec("vllm") is None:
        proc = subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "check_vllm_gpu.py")],
            capture_output=True, text=True, timeout=120, cwd=ROOT,
        )
        assert proc.returncode == 2 and "vLLM is not installed" in proc.stdout


@pytest.mark.slow
@pytest.mark.batching
@needs_locomo
def test_bench_rollouts_fake_backend_runs_and_batches(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    rc = _load("bench_rollouts").main([
        "--backend", "fake", "--encoder", "hashing", "--n", "1", "4", "--questions", "4",
        "--max-samples", "1", "--bank-cache", str(tmp_path / "banks"), "--out", str(out), "--repeats", "2",
    ])
    result = json.loads(out.read_text())
    rows = result["rows"]
    assert rc == 0
    # Interleaved repeats, each cold pass on a fresh cache.
    assert [(r["repeat"], r["n"], r["cache"]) for r in rows] == [
        (rep, n, phase) for rep in (0, 1) for n in (1, 4) for phase in ("cold", "warm")
    ]
    assert all(r["same_records_as_n1"] for r in rows)
    assert rows[2]["mean_batch"] > 1 and rows[2]["computed"] == rows[0]["computed"] > 0
    assert rows[1]["computed"] == rows[3]["computed"] == 0
    assert rows[4]["computed"] == rows[0]["computed"]  # repeat 1 started cold again
    summary = {(r["n"], r["cache"]): r for r in result["summary"]}
    assert set(summary) == {(1, "cold"), (1, "warm"), (4, "cold"), (4, "warm")}
    cold4 = summary[(4, "cold")]
    walls = sorted(r["wall_s"] for r in rows if (r["n"], r["cache"]) == (4, "cold"))
    assert cold4["runs"] == 2 and cold4["wall_s"] == pytest.approx(sum(walls) / 2)
    assert cold4["wall_min_s"] == walls[0] and summary[(1, "cold")]["speedup"] == 1.0


@pytest.mark.slow
@pytest.mark.ray
@needs_locomo
def test_bench_sweep_calls_counts_new_calls_per_trial_and_module(tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    rc = _load("bench_sweep_calls").main([
        "--lambdas", "0,0.9", "--single-from-first", "--runs-dir", str(tmp_path / "runs"), "--out", str(out),
        "--", "train.total_timesteps=20", "train.eval_freq=1000",
    ])
    result = json.loads(out.read_text())
    assert rc == 0
    first, second = result["per_trial"]
    assert result["single_llm_calls"] == first["new_llm_calls"] > 0
    assert result["sweep_llm_calls"] == first["new_llm_calls"] + second["new_llm_calls"]
    assert result["ratio"] == pytest.approx(result["sweep_llm_calls"] / result["single_llm_calls"])
    # Every computed call is attributed to a module tag; every episode ends with an answer call.
    for trial in (first, second):
        assert sum(trial["new_by_module"].values()) == trial["new_llm_calls"]
    assert first["new_by_module"]["answer"] > 0
    assert sum(result["sweep_by_module"].values()) == result["sweep_llm_calls"]


@pytest.mark.slow
@pytest.mark.ray
@needs_locomo
def test_bench_sweep_calls_conditioned_run_counts_calls_and_validates_every_lambda(tmp_path: Path) -> None:
    out = tmp_path / "c.json"
    rc = _load("bench_sweep_calls").main([
        "--lambdas", "0,0.9", "--single", "0", "--no-sweep", "--conditioned", "--conditioned-timesteps", "40",
        "--runs-dir", str(tmp_path / "runs"), "--out", str(out), "--", "train.total_timesteps=20",
        "train.eval_freq=1000",
    ])
    result = json.loads(out.read_text())
    cond = result["conditioned"]
    assert rc == 0 and result["per_trial"] == [] and result["single_llm_calls"] > 0
    assert cond["timesteps"] == 40 and sum(cond["by_module"].values()) == cond["llm_calls"] > 0
    assert cond["ratio"] == pytest.approx(cond["llm_calls"] / result["single_llm_calls"])
    assert set(cond["per_lambda"]) == {"0", "0.9"}
    run = tmp_path / "runs" / "conditioned" / "locomo__implementation__lamcond0-0.9__s0"
    assert (run / "router").is_dir()


@pytest.mark.batching
def test_bench_rollouts_llamacpp_config_composes(tmp_path: Path) -> None:
    """The llama.cpp config of every N composes (no model is loaded): slots = N, threads from the CLI."""
    import argparse

    module = _load("bench_rollouts")
    args = argparse.Namespace(backend="llamacpp", benchmark="locomo", encoder="minilm", k=3, max_samples=2,
                              threads=2, bank_cache=str(tmp_path / "banks"))
    cfg = module._config(args, 8, tmp_path / "c.sqlite")
    assert cfg["backend"]["name"] == "llamacpp"
    assert cfg["backend"]["n_parallel"] == 8 and cfg["backend"]["n_threads"] == 2


def test_bench_conditioned_synthetic_evaluates_both_designs_at_every_lambda(tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    rc = _load("bench_conditioned_synthetic").main(
        ["--lambdas", "0,4", "--seeds", "0", "--timesteps", "500", "--out", str(out)]
    )
    rows = json.loads(out.read_text())["rows"]
    assert rc == 0
    assert sorted((r["design"], r["lambda"]) for r in rows) == [
        ("conditioned", 0.0), ("conditioned", 4.0), ("separate", 0.0), ("separate", 4.0)
    ]
    assert all(0.0 <= r["f1"] <= 1.0 and r["module_cost"] > 0 and 0.0 <= r["cheapest"] <= 1.0 for r in rows)
