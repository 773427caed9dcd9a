"""Interrupted + resumed == uninterrupted (issue 49, item 6).

A resumed run used to replay its start: ``PPO.load`` seeds torch, numpy and the environments again, and
``learn`` reset the environments, so the first rollout after a resume drew the first questions with the first
tier choices again. Now a checkpoint is saved after each PPO update and holds every random stream and where
each environment's episode stands; these tests stop a run (at an episode boundary, in the middle of episodes,
and by SIGINT), resume it and compare weights, progress rows and the validation history with the same run
trained without a stop.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.reliability_support import RUN_NAME, config, progress_values, run_cli, signal_once_training_runs
from tests.support import needs_locomo

#: Episodes are 5 steps: n_steps=10 ends every rollout at an episode boundary, n_steps=7 inside one.
ALIGNED = ("ppo.n_steps=10", "ppo.batch_size=10", "train.checkpoint_freq=20", "train.eval_freq=20")
MID_EPISODE = ("ppo.n_steps=7", "ppo.batch_size=7", "train.checkpoint_freq=14", "train.eval_freq=14")


def _train(base: Path, *overrides: str) -> dict[str, Any]:
    from policies.training.loop import train

    return train(config(base, *overrides))


def _weights(run: Path) -> dict[str, torch.Tensor]:
    from stable_baselines3 import PPO

    return PPO.load(run / "checkpoints" / "last" / "model.zip", device="cpu").policy.state_dict()


def _history(run: Path) -> list[dict[str, Any]]:
    history = json.loads((run / "validation.json").read_text())["history"]
    # not wall time, not the cache's warmth (a second piece in one process replays more)
    return [{k: v for k, v in h.items() if k != "seconds" and "cache" not in k} for h in history]


def _assert_same_run(a: Path, b: Path) -> None:
    wa, wb = _weights(a), _weights(b)
    assert wa.keys() == wb.keys()
    for key in wa:
        assert torch.equal(wa[key], wb[key]), f"weights differ at {key}"
    assert progress_values(a) == progress_values(b)
    assert _history(a) == _history(b)
    assert (a / "router" / "router.pt").read_bytes() == (b / "router" / "router.pt").read_bytes()


@needs_locomo
@pytest.mark.parametrize(
    ("ppo", "stop_at", "total"),
    [(ALIGNED, 40, 100), (MID_EPISODE, 28, 70), ((*MID_EPISODE, "train.vec_env=subproc"), 28, 70)],
    ids=["boundary", "mid-episode", "subprocess-workers"],
)
def test_a_stopped_and_resumed_run_equals_the_uninterrupted_one(tmp_path, ppo, stop_at, total):
    whole, pieces = tmp_path / "whole", tmp_path / "pieces"
    _train(whole, *ppo, f"train.total_timesteps={total}")
    _train(pieces, *ppo, f"train.total_timesteps={stop_at}")
    run = pieces / "runs" / RUN_NAME
    _train(pieces, *ppo, f"train.total_timesteps={total}", f"resume={run}")
    _assert_same_run(whole / "runs" / RUN_NAME, run)


@needs_locomo
def test_a_run_stopped_by_sigint_resumes_into_the_uninterrupted_one(tmp_path):
    total = 200
    whole, pieces = tmp_path / "whole", tmp_path / "pieces"
    whole.mkdir()
    pieces.mkdir()
    # every piece through the command line, as a user runs them (same hash seed and threads)
    assert run_cli(whole, *ALIGNED, f"train.total_timesteps={total}").returncode == 0
    budget = f"train.total_timesteps={total}"
    stopped = signal_once_training_runs(pieces, signal.SIGINT, *ALIGNED, budget, episodes=4)
    assert stopped.returncode == 130, stopped.stderr[-3000:]
    run = pieces / "runs" / RUN_NAME
    assert not (run / "result.json").exists(), "the run finished before the signal: raise the total"
    resumed = run_cli(pieces, *ALIGNED, f"train.total_timesteps={total}", f"resume={run}")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    _assert_same_run(whole / "runs" / RUN_NAME, run)
