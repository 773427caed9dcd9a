"""Validation's shaper is synced from the training env explicitly (SB3's sync_envs_normalization pattern)."""

from __future__ import annotations

import numpy as np
from stable_baselines3.common.vec_env import DummyVecEnv

from common.cost_weight import CostWeight
from envs.fakes import make_fake_bank, make_fake_components
from envs.reward import RewardShaper
from envs.router_env import MemoryRouterEnv
from policies.training.vec_env import TrainingStateWrapper, sync_reward_statistics


def test_sync_copies_worker_zero_statistics_without_touching_training():
    comps = make_fake_components(cost_weight=CostWeight(0.5))
    items = make_fake_bank(2)
    venv = DummyVecEnv(
        [
            lambda i=i: TrainingStateWrapper(MemoryRouterEnv(items, comps, RewardShaper(), seed=i))
            for i in range(2)
        ]
    )
    venv.reset()
    rng = np.random.default_rng(0)
    for _ in range(40):
        venv.step(rng.integers(0, 3, size=2))
    worker0 = venv.envs[0].unwrapped.reward_shaper
    before = worker0.state_dict()
    assert before["normalizer"]["costs"]  # training has filled its window

    validation = RewardShaper()
    assert validation.evaluate(0.5, 1.0, 0.5) == 0.5  # empty window: the task score alone
    sync_reward_statistics(venv, validation)
    assert validation.state_dict() == before
    assert validation.evaluate(0.5, 1.0, 0.5) == worker0.evaluate(0.5, 1.0, 0.5) != 0.5
    validation.shape(0.1, 99.0, 0.5)  # validation's own copy moves; training's does not
    assert worker0.state_dict() == before
