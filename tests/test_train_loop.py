"""In-process training runs with the fake LLM backend on real LoCoMo questions (tiny budgets).

Determinism (same seed and warm cache -> identical exported weights), resuming from a
checkpoint, settings validation and the run directory's contents.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from common.config_error import ConfigError
from policies.router import WEIGHTS_FILE, Router
from policies.training.checkpoint import CheckpointError
from policies.training.config import load_config
from policies.training.settings import parse_config
from policies.training.verdict import fixed_path
from tests.support import TINY_TRAIN_OVERRIDES, needs_locomo


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One question-bank cache and one call cache for the module (built once, then hits)."""
    return tmp_path_factory.mktemp("train_shared")


def _cfg(shared, runs, *extra):
    return load_config(
        [
            *TINY_TRAIN_OVERRIDES,
            f"runs_dir={runs}",
            f"cache.path={shared / 'calls.sqlite'}",
            f"question_bank.cache_dir={shared / 'banks'}",
            *extra,
        ]
    )


def test_default_config_composes_with_the_documented_defaults():
    cfg = load_config()
    assert cfg["benchmark"]["name"] == "locomo"
    assert cfg["strategy"]["name"] == "implementation"
    assert cfg["backend"] == {"name": "llamacpp", "model": "smollm2-135m", "n_threads": 2, "n_parallel": 1}
    assert cfg["reward"]["task_metric"] == "f1"
    assert cfg["wandb"]["mode"] == "disabled"
    assert cfg["run_name"] == "locomo__implementation__lam0__s0"
    assert cfg["run_dir"] == "runs/locomo__implementation__lam0__s0"
    assert parse_config(cfg).train.total_timesteps == 200
    swept = load_config(["cost.lambda=0.3", "seed=2", "strategy=capacity"])
    assert swept["run_name"] == "locomo__capacity__lam0.3__s2"
    assert swept["llms"]["high"]["model"] == "qwen2.5-1.5b"


@pytest.mark.parametrize(
    ("override", "match"),
    [
        ("train.total_timesteps=0", "total_timesteps must be > 0"),
        ("train.val_split=train", "held-out"),
        ("train.select_metric=reward", "select_metric='reward'"),
        ("train.vec_env=ray", "vec_env='ray'"),
        ("ppo.batch_size=1", "batch_size must be > 1"),
        ("ppo.policy.hidden=0", "ppo.policy.hidden must be > 0"),
        ("wandb.mode=cloud", "wandb.mode='cloud'"),
    ],
)
def test_bad_settings_name_the_field(override, match):
    """Ranges and choices, which no type expresses, are checked when the config is parsed."""
    with pytest.raises(ConfigError, match=match):
        parse_config(load_config([override]))


def test_wandb_off_aliases():
    assert not parse_config(load_config(["wandb.mode=off"])).wandb.enabled
    assert parse_config(load_config(["wandb.mode=offline"])).wandb.enabled


def _weights(run_dir):
    return torch.load(run_dir / "router" / WEIGHTS_FILE, weights_only=True)


@pytest.mark.slow
@needs_locomo
def test_same_seed_and_warm_cache_give_identical_routers(shared, tmp_path):
    from policies.training.loop import train

    # What PPO learned (the guard would ship the same fixed path for every seed on 2 validation questions).
    first = train(_cfg(shared, tmp_path / "a", "train.guard=off"))
    second = train(_cfg(shared, tmp_path / "b", "train.guard=off"))
    assert second["cache_hits"] > 0
    a, b = _weights(tmp_path / "a" / first["run_name"]), _weights(tmp_path / "b" / second["run_name"])
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key

    def scores(result):  # cache statistics differ by design (cold vs warm)
        return {k: v for k, v in result["validation"].items() if not k.startswith("cache")}

    assert scores(first) == scores(second)
    # A different seed gives a different router (so the check above can fail).
    third = train(_cfg(shared, tmp_path / "c", "seed=1", "train.guard=off"))
    c = _weights(tmp_path / "c" / third["run_name"])
    assert any(not torch.equal(a[k], c[k]) for k in a)


@needs_locomo
def test_run_directory_contents_and_provenance(shared, tmp_path):
    from policies.training.loop import train

    result = train(_cfg(shared, tmp_path))
    run = tmp_path / result["run_name"]
    for name in (
        "config.yaml",
        "run_metadata.json",
        "progress.csv",
        "validation.json",
        "validation.md",
        "result.json",
        "router/metadata.json",
        "checkpoints/last/model.zip",
        "checkpoints/last/state.json",
    ):
        assert (run / name).is_file(), name
    meta = json.loads((run / "run_metadata.json").read_text())
    assert set(meta) >= {"config", "git_commit", "packages", "data_checksums"}
    assert "locomo10.json" in meta["data_checksums"]
    router = Router.load(run / "router")
    assert router.metadata["encoder"] == "hashing"
    assert router.metadata["strategy"] == "implementation"
    assert router.metadata["provenance"]["git_commit"] == meta["git_commit"]
    assert router.metadata["validation"]["metric"] == "objective"
    header = (run / "progress.csv").read_text().splitlines()[0].split(",")
    for key in (
        "train/value_loss",
        "train/policy_gradient_loss",
        "train/entropy_loss",
        "train/approx_kl",
        "reward/r_task",
        "reward/r_cost",
        "cost/raw",
        "cost/normalised",
        "tiers/filter/high",
        "tiers/high_share",
        "val/f1",
        "val/module_cost",
        "cache/hit_rate",
    ):
        assert key in header, key
    history = json.loads((run / "validation.json").read_text())["history"]
    assert [h["step"] for h in history] == [20, 40]
    # the policy's mean probability of HIGH over the validation decisions (argmax hides it)
    assert all(0.0 < h["p_high"] < 1.0 for h in history)
    # selection on the validation objective (r_task + λ·α·r_cost on held-out questions)
    assert all(np.isfinite(h["objective"]) and h["score"] == h["objective"] for h in history)
    assert "| p_high |" in (run / "validation.md").read_text()
    assert result["timesteps"] == 40
    # The closing verdict: a fixed-path router is compared with the fixed paths on the same questions.
    saved = json.loads((run / "result.json").read_text())["fixed_path_verdict"]
    path = fixed_path(router.metadata["validation"]["summary"]["tiers"])
    assert (saved is None) == (path is None)
    if saved is not None:
        assert {r["path"] for r in saved["rows"]} >= {"all-low", "all-mid", "all-high"}
        assert saved["n"] == result["n_val_questions"]
        assert saved["lines"][0].startswith("router: a fixed path")


@pytest.mark.slow
@needs_locomo
def test_resume_continues_from_the_checkpoint(shared, tmp_path):
    from policies.training.loop import train

    first = train(_cfg(shared, tmp_path))
    run = tmp_path / first["run_name"]
    state = json.loads((run / "checkpoints/last/state.json").read_text())
    assert state["num_timesteps"] == 40
    assert len(state["envs"]) == 2 and state["envs"][0]["reward_shaper"]["normalizer"]["costs"]
    resumed = train(_cfg(shared, tmp_path, f"resume={run}", "train.total_timesteps=60"))
    assert resumed["timesteps"] == 60
    history = json.loads((run / "validation.json").read_text())["history"]
    assert [h["step"] for h in history] == [20, 40, 60]
    assert (run / "progress.csv").is_file() and (run / "progress-from-40.csv").is_file()
    # One line per training episode, per piece: 8 episodes before the resume, 4 after.
    first_eps = [json.loads(x) for x in (run / "episodes.jsonl").read_text().splitlines()]
    later_eps = [json.loads(x) for x in (run / "episodes-from-40.jsonl").read_text().splitlines()]
    assert (len(first_eps), len(later_eps)) == (8, 4)
    assert all(40 < e["step"] <= 60 for e in later_eps) and all(e["step"] <= 40 for e in first_eps)
    assert all(len(e["tiers"].split(",")) == 5 and 0.0 <= e["f1"] <= 1.0 for e in first_eps + later_eps)
    state = json.loads((run / "checkpoints/last/state.json").read_text())
    assert state["num_timesteps"] == 60
    # The reward normaliser kept its window: 8 episodes before + 4 after.
    assert sum(len(e["reward_shaper"]["normalizer"]["costs"]) for e in state["envs"]) == 12
    with pytest.raises(ValueError, match="different config"):
        train(
            _cfg(
                shared,
                tmp_path,
                f"resume={run}",
                "train.total_timesteps=80",
                "cost.lambda=0.5",
                f"run_dir={run}",
            )
        )
    with pytest.raises(CheckpointError, match="no such directory"):
        train(_cfg(shared, tmp_path, f"resume={tmp_path / 'nowhere'}"))


@pytest.mark.slow
@needs_locomo
def test_question_baseline_is_checkpointed_and_resumed(shared, tmp_path):
    from policies.training.loop import train

    first = train(_cfg(shared, tmp_path, "reward.task_baseline=question"))
    run = tmp_path / first["run_name"]

    def counts() -> int:
        state = json.loads((run / "checkpoints/last/state.json").read_text())
        return sum(sum(e["reward_shaper"]["task_baseline"]["count"].values()) for e in state["envs"])

    assert counts() == 8  # 40 steps = 8 episodes over the two workers
    more = ("reward.task_baseline=question", f"resume={run}", "train.total_timesteps=60")
    train(_cfg(shared, tmp_path, *more))
    assert counts() == 12  # the per-question means continued, not restarted
    with pytest.raises(ValueError, match="different config"):
        train(_cfg(shared, tmp_path, f"resume={run}", "train.total_timesteps=80", f"run_dir={run}"))


def test_validation_state_from_another_metric_forgets_the_best(tmp_path, capsys):
    from policies.training.callbacks import ValidationCallback

    def make(metric):
        return ValidationCallback(
            [], None, lambda *a, **k: [], tmp_path, dict, eval_freq=10, select_metric=metric
        )

    old = make("f1")
    old.best_score, old.best_step, old.last_eval_step = 0.4, 20, 20
    old.history = [{"step": 20, "score": 0.4}]
    same = make("f1")
    same.load_state_dict(old.state_dict())
    assert (same.best_score, same.best_step) == (0.4, 20)
    other = make("objective")
    legacy = {k: v for k, v in old.state_dict().items() if k != "select_metric"}  # older checkpoints
    other.load_state_dict(legacy)
    assert other.best_score is None and other.best_step is None
    assert other.history == old.history and other.last_eval_step == 20
    assert "selected on 'f1'" in capsys.readouterr().out


def test_max_tier_mid_trains_and_exports_a_two_tier_router(shared, tmp_path):
    from policies.training.loop import train

    out = train(_cfg(shared, tmp_path, "actions.max_tier=MID"))
    run = tmp_path / out["run_name"]
    router = Router.load(run / "router")
    assert router.metadata["tiers"] == ["LOW", "MID"]
    # every decision of the exported router is LOW or MID, whatever it sees
    probes = np.random.default_rng(0).normal(size=(64, router.layout.dim)).astype(np.float32)
    assert set(router.act(probes).tolist()) <= {0, 1}
    steps = [json.loads(line) for line in (run / "episodes.jsonl").read_text().splitlines()]
    assert steps and all("H" not in s["tiers"] for s in steps)
    state = json.loads((run / "checkpoints/last/state.json").read_text())
    assert state["validation"]["history"][-1]["p_high"] == 0.0
