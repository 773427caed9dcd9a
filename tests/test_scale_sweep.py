"""λ sweeps on Ray Tune: finished trials are never rerun, a killed worker is retried and resumes."""

from __future__ import annotations

import csv
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from scale.sweep_ray import PID_FILE, run_trial, trial_config
from tests.support import TINY_TRAIN_OVERRIDES, needs_locomo

# Ray Tune sweeps are an optional extra (scale path): `-m "not ray"` skips these tests.
pytestmark = pytest.mark.ray


def _overrides(tmp: Path) -> list[str]:
    paths = [f"cache.path={tmp / 'calls.sqlite'}", f"question_bank.cache_dir={tmp / 'banks'}"]
    return [*TINY_TRAIN_OVERRIDES, *paths]


def test_trial_config_sets_lambda_seed_and_resume(tmp_path: Path) -> None:
    cfg = trial_config(_overrides(tmp_path), 0.3, 2, tmp_path / "runs")
    assert cfg["cost"]["lambda"] == 0.3 and cfg["seed"] == 2 and cfg["resume"] is None
    assert Path(cfg["run_dir"]) == tmp_path / "runs" / "locomo__implementation__lam0.3__s2"
    (Path(cfg["run_dir"]) / "checkpoints" / "last").mkdir(parents=True)
    assert trial_config(_overrides(tmp_path), 0.3, 2, tmp_path / "runs")["resume"] == cfg["run_dir"]


def _fake_train(cfg):  # module-level: picklable
    result = {"run_name": cfg["run_name"], "run_dir": cfg["run_dir"], "cost_lambda": cfg["cost"]["lambda"],
              "seed": cfg["seed"], "llm_calls": 3}
    Path(cfg["run_dir"], "result.json").write_text(json.dumps(result))
    return result


def test_run_trial_skips_finished_trials(tmp_path: Path) -> None:
    first = run_trial(_overrides(tmp_path), 0.5, 0, tmp_path / "runs", _fake_train)
    run_dir = Path(first["run_dir"])
    assert not first["skipped"] and (run_dir / PID_FILE).read_text().strip() == str(os.getpid())
    again = run_trial(_overrides(tmp_path), 0.5, 0, tmp_path / "runs", _fake_train)
    assert again["skipped"] and again["llm_calls"] == 3


@pytest.mark.slow
@needs_locomo
def test_ray_sweep_survives_a_killed_worker_and_resumes(tmp_path: Path) -> None:
    pytest.importorskip("ray.tune", reason="Ray Tune is the optional 'ray' extra")
    from scale.sweep_ray import run_sweep

    overrides = [*_overrides(tmp_path), "train.total_timesteps=60", "train.checkpoint_freq=10"]
    runs = tmp_path / "runs"
    victim = Path(trial_config(overrides, 0.5, 0, runs)["run_dir"])
    killed: list[int] = []

    def kill_mid_run() -> None:
        # Wait for the λ=0.5 trial's first checkpoint, then SIGKILL its Ray worker process.
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not killed:
            if (victim / "checkpoints" / "last").is_dir() and (victim / PID_FILE).is_file():
                if (victim / "result.json").exists():
                    return  # finished first: nothing left to kill (the assertion below reports it)
                pid = int((victim / PID_FILE).read_text())
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            time.sleep(0.02)

    killer = threading.Thread(target=kill_mid_run, daemon=True)
    killer.start()
    out = run_sweep([0.0, 0.5], [0], overrides, runs_dir=runs, sweep_name="t", max_concurrent=2,
                    max_failures=2, ray_init_kwargs={"object_store_memory": 100 * 1024**2})
    killer.join(5)
    assert killed, "the λ=0.5 trial finished before it could be killed"
    assert out["failed"] == [] and out["skipped"] == 0
    result = json.loads((victim / "result.json").read_text())
    assert result["timesteps"] >= 60
    assert list(victim.glob("progress-from-*.csv")), "the retried trial did not resume from its checkpoint"
    with open(out["summary"]) as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["lambda"], r["status"]) for r in rows] == [("0", "completed"), ("0.5", "completed")]
    # Rerunning the sweep reruns nothing and starts no Ray instance.
    mtime = (victim / "result.json").stat().st_mtime
    again = run_sweep([0.0, 0.5], [0], overrides, runs_dir=runs, sweep_name="t")
    assert again["skipped"] == 2 and (victim / "result.json").stat().st_mtime == mtime
