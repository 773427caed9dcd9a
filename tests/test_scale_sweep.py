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


def _require_ray() -> None:
    """Skip without Ray Tune (the ray extra), unless BUDGET_ROUTER_REQUIRE_RAY=1 (`make test-ray`)."""
    if os.environ.get("BUDGET_ROUTER_REQUIRE_RAY") == "1":
        import ray.tune  # noqa: F401  # a missing Ray fails the run instead of skipping
    else:
        pytest.importorskip("ray.tune", reason="Ray Tune is the optional 'ray' extra")


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
    _require_ray()
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
    # The killed and retried trial resumed exactly (issue 49, item 6): it equals the same run uninterrupted.
    from tests.test_exact_resume import _assert_same_run

    whole = tmp_path / "whole"
    run_trial(overrides, 0.5, 0, whole)
    _assert_same_run(Path(trial_config(overrides, 0.5, 0, whole)["run_dir"]), victim)


def test_secret_overrides_reach_trials_through_the_environment_not_tunes_state(monkeypatch) -> None:
    """Issue 49, item 13: a Redis password in cache.path was written into Ray Tune's state files."""
    from scale.sweep_ray import SECRET_REF, hide_secret_overrides, reveal_secret_overrides, run_sweep

    overrides = ["backend=fake", "cache.path=redis://:PW-LEAK-6@cache:6379/0", "+judge.backend.api_key=sk-7"]
    public, env = hide_secret_overrides(overrides)
    assert public[0] == "backend=fake" and all(p.startswith(SECRET_REF) for p in public[1:])
    assert "PW-LEAK-6" not in repr(public) and "sk-7" not in repr(public)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert reveal_secret_overrides(public) == overrides
    monkeypatch.delenv(next(iter(env)))
    with pytest.raises(KeyError, match=r"on a cluster, give secrets to every node's environment"):
        reveal_secret_overrides(public)
    with pytest.raises(ValueError, match=r"cannot be sent to a Ray cluster") as err:
        run_sweep([0.0], [0], overrides, address="auto")
    assert "PW-LEAK-6" not in str(err.value)


def test_hydra_and_ray_name_a_lambda_0_run_alike(tmp_path: Path) -> None:
    """Issue 48: Ray named λ = 0 runs `lam0.0`, Hydra `lam0`, so neither saw the other's runs."""
    from policies.training.config import load_config

    ray_name = Path(trial_config(_overrides(tmp_path), 0.0, 0, tmp_path / "runs")["run_dir"]).name
    hydra = load_config([*_overrides(tmp_path), "cost.lambda=0", f"runs_dir={tmp_path / 'runs'}"])
    assert ray_name == hydra["run_name"] == "locomo__implementation__lam0__s0"


def _ray_sweep_cli(tmp: Path, *args: str) -> list[str]:
    import sys

    budget = ["train.total_timesteps=100", "train.eval_freq=20", "train.checkpoint_freq=20"]
    overrides = [*_overrides(tmp), *budget]
    return [sys.executable, "-m", "scale.sweep_ray", "--runs-dir", str(tmp / "runs"), *args, "--", *overrides]


def _rows(tmp: Path, name: str) -> list[dict[str, str]]:
    with open(tmp / "runs" / "sweeps" / name / "sweep.csv") as fh:
        return list(csv.DictReader(fh))


@needs_locomo
@pytest.mark.slow
def test_asha_compares_trials_of_one_lambda_only_and_every_lambda_completes(tmp_path: Path) -> None:
    """Issue 48 put every validation in front of ASHA; round 4 found it compared trials of *different* λ.

    The fake stack's F1 is 0, so the validation objective is λ times the cost saving: one ASHA over the grid
    stopped every λ = 0 trial (no quality end of the frontier at all). Now each λ has its own ASHA: two
    seeds per λ compete, a trial may be stopped by a better seed of its own λ, and every λ completes one.
    """
    _require_ray()
    import subprocess

    cmd = _ray_sweep_cli(
        tmp_path, "--lambdas", "3,1,0", "--seeds", "0,1", "--max-concurrent", "2", "--scheduler", "asha",
        "--name", "asha",
    )
    out = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = _rows(tmp_path, "asha")
    assert len(rows) == 6
    for lam in ("3", "1", "0"):
        assert [r for r in rows if r["lambda"] == lam and r["status"] == "completed"], (lam, rows)
    # the validations and their checkpoints reached Tune (its storage keeps the last one per trial)
    assert list((tmp_path / "runs" / "sweeps" / "asha" / "tune").rglob("checkpoint_*/state.json"))


def test_the_asha_of_a_lambda_ignores_other_lambdas() -> None:
    _require_ray()
    from types import SimpleNamespace

    from ray.tune.schedulers import TrialScheduler

    from scale.tune_scheduler import PerLambdaASHA

    asha = PerLambdaASHA(metric="score", mode="max", time_attr="training_iteration", grace_period=1,
                         reduction_factor=2)  # fmt: skip
    trials = {name: SimpleNamespace(trial_id=name, config={"lambda": lam})
              for name, lam in (("hi", 3.0), ("lo_a", 0.0), ("lo_b", 0.0))}  # fmt: skip
    for t in trials.values():
        asha.on_trial_add(None, t)

    def report(name: str, score: float) -> str:
        return asha.on_trial_result(None, trials[name], {"training_iteration": 1, "score": score})

    assert report("hi", 0.9) == TrialScheduler.CONTINUE
    assert report("lo_a", 0.2) == TrialScheduler.CONTINUE  # far below λ = 3's score: not its rival
    assert report("lo_b", 0.1) == TrialScheduler.STOP  # below a trial of its own λ
    assert "2 groups" in asha.debug_string()


def test_search_entries_parse_and_bad_ones_are_named() -> None:
    _require_ray()
    from scale.sweep_ray import draw_settings, parse_search, settings_tag

    space = parse_search(["ppo.learning_rate=loguniform(1e-4,3e-3)", "ppo.n_steps=choice(64,128)"])
    draws = draw_settings(space, 3, seed=0)
    assert draws == draw_settings(space, 3, seed=0) and len(draws) == 3
    assert all(1e-4 <= d["ppo.learning_rate"] <= 3e-3 and d["ppo.n_steps"] in (64, 128) for d in draws)
    assert settings_tag({}) == "" and settings_tag(draws[0]).startswith("hp")
    for bad in ("ppo.learning_rate", "ppo.lr=normal(0,1)", "ppo.lr=loguniform(a b)", "x=uniform(1)"):
        with pytest.raises(ValueError, match="--search"):
            parse_search([bad])


@needs_locomo
@pytest.mark.slow
def test_a_search_within_each_lambda_names_its_trials_and_reports_their_settings(tmp_path: Path) -> None:
    _require_ray()
    import subprocess

    cmd = _ray_sweep_cli(
        tmp_path, "--lambdas", "1,0", "--seeds", "0", "--max-concurrent", "2", "--scheduler", "asha",
        "--search", "ppo.ent_coef=choice(0.0,0.05)", "--search", "ppo.learning_rate=loguniform(1e-4,1e-2)",
        "--samples", "2", "--name", "search",
    )
    out = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = _rows(tmp_path, "search")
    assert len(rows) == 4 and all(json.loads(r["settings"]).keys() == {"ppo.ent_coef", "ppo.learning_rate"}
                                  for r in rows)  # fmt: skip
    for lam in ("1", "0"):
        assert [r for r in rows if r["lambda"] == lam and r["status"] == "completed"], (lam, rows)
    done = [r for r in rows if r["status"] == "completed"]
    for r in done:
        cfg = json.loads((tmp_path / "runs" / r["run_name"] / "run_metadata.json").read_text())["config"]
        assert r["run_name"].split("__")[-1].startswith("hp")
        assert cfg["ppo"]["ent_coef"] == json.loads(r["settings"])["ppo.ent_coef"]


@needs_locomo
@pytest.mark.slow
def test_a_killed_sweep_resumes_with_tuner_restore_not_relaunching_finished_trials(tmp_path: Path) -> None:
    _require_ray()
    import subprocess

    cmd = _ray_sweep_cli(tmp_path, "--lambdas", "0,0.5,1", "--max-concurrent", "1", "--name", "r")
    runs = tmp_path / "runs"
    # its own session: SIGKILL of the group takes the driver and the local Ray it started
    log = (tmp_path / "driver.log").open("w")  # a file, not a pipe: a full pipe would block the driver
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 600
    first = None
    while time.monotonic() < deadline:  # kill the driver once one trial finished and another started
        finished = sorted(runs.glob("*/result.json"))
        started = [p for p in runs.glob("*/checkpoints/last") if not (p.parents[1] / "result.json").exists()]
        if finished and started:
            first = finished[0]
            break
        assert proc.poll() is None, (tmp_path / "driver.log").read_text()[-3000:]
        time.sleep(0.2)
    assert first is not None, "the sweep did not get that far"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    log.close()
    mtime = first.stat().st_mtime
    assert (runs / "sweeps" / "r" / "tune" / "r").is_dir()
    again = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert first.stat().st_mtime == mtime, "a finished trial was relaunched"
    assert len(list(runs.glob("*/result.json"))) == 3


@needs_locomo
@pytest.mark.slow
def test_the_sweep_runs_on_a_local_ray_start_head_cluster(tmp_path: Path) -> None:
    """Issue 48: connecting to an existing cluster failed with Ray 2.60's default authentication."""
    _require_ray()
    import shutil
    import subprocess

    ray_cli = shutil.which("ray") or str(Path(__import__("sys").executable).parent / "ray")
    port = "6391"
    import tempfile

    # Ray's socket paths must stay under 108 bytes: a short temp dir, not pytest's
    env = {**os.environ, "RAY_TMPDIR": tempfile.mkdtemp(prefix="ray", dir="/tmp")}
    started = subprocess.run(
        [ray_cli, "start", "--head", f"--port={port}", "--num-cpus=2", "--include-dashboard=false",
         "--disable-usage-stats"],
        capture_output=True, text=True, timeout=300, env=env,
    )
    assert started.returncode == 0, started.stderr[-3000:]
    try:
        cmd = _ray_sweep_cli(tmp_path, "--lambdas", "0", "--seeds", "0", "--address", f"127.0.0.1:{port}",
                             "--name", "cluster")
        out = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=900, env=env)
        assert out.returncode == 0, out.stderr[-3000:]
        assert (tmp_path / "runs" / "locomo__implementation__lam0__s0" / "result.json").is_file()
    finally:
        subprocess.run([ray_cli, "stop", "--force"], capture_output=True, timeout=120, env=env)


def test_the_sweep_table_says_why_a_trial_has_no_result(tmp_path: Path) -> None:
    """Issue 48: a failed trial's error and a trial stopped by the scheduler reach sweep.csv."""
    from types import SimpleNamespace

    from scale.sweep_ray import _trial_notes, _write_summary

    class Grid(list):  # what Tune's ResultGrid offers: len() and indexing
        pass

    def result(lam: float, error: Exception | None, metrics: dict) -> SimpleNamespace:
        return SimpleNamespace(config={"lambda": lam, "seed": 0}, error=error, metrics=metrics)

    results = Grid([
        result(0.0, None, {"run_dir": "x", "score": 1.0}),
        result(0.5, RuntimeError("boom\nValueError: bad λ"), {}),
        result(1.0, None, {"step": 40.0, "score": 0.1}),
    ])
    notes = _trial_notes(results)
    stopped = "stopped early by the scheduler at step 40"
    assert notes == {(0.5, 0, ""): "error: ValueError: bad λ", (1.0, 0, ""): stopped}
    grid = [(0.0, 0, {}), (0.5, 0, {}), (1.0, 0, {})]
    rows = _write_summary(tmp_path / "sweep.csv", grid, _overrides(tmp_path), tmp_path / "runs", notes)
    assert [r["status"] for r in rows] == ["unfinished", notes[(0.5, 0, "")], notes[(1.0, 0, "")]]


@needs_locomo
@pytest.mark.slow
def test_a_sweep_writes_no_secret_into_tunes_state_or_rays_temp_dir(tmp_path: Path) -> None:
    """Issue 49, item 13: a secret given as a sweep override must reach no file Tune or Ray writes."""
    _require_ray()
    import subprocess
    import tempfile

    secret = "sk-LEAK-RAY-8"
    ray_tmp = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))  # short: Ray's socket paths
    cmd = _ray_sweep_cli(tmp_path, "--lambdas", "0", "--name", "leak")
    cmd.append(f"+judge.backend.api_key={secret}")  # the judge is off: the run needs no such server
    env = {**os.environ, "RAY_TMPDIR": str(ray_tmp)}
    out = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=900, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert secret not in out.stdout + out.stderr
    roots = (tmp_path, ray_tmp)
    written = [p for root in roots for p in root.rglob("*") if p.is_file() and not p.is_symlink()]
    assert any("tune" in str(p) for p in written) and any("session" in str(p) for p in written)
    leaked = [p for p in written if secret.encode() in p.read_bytes()]
    assert not leaked, leaked[:5]
