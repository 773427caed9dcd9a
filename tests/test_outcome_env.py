"""The outcome-table environment (envs.outcome_env): a Gymnasium env that passes the checker, rewards the
learners' objective, puts the price in a conditioned observation and replays the same draws under a seed."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from envs.outcome_env import OutcomeTableEnv


def _env(**kw: object) -> OutcomeTableEnv:
    features = np.arange(12, dtype=np.float32).reshape(4, 3)
    f1 = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5], [0.2, 0.9]])
    cost = np.array([[1.0, 4.0]] * 4)
    return OutcomeTableEnv(features, f1, cost, ref_cost=4.0, **kw)  # type: ignore[arg-type]


def test_it_passes_gymnasiums_checker_in_both_settings():
    check_env(_env(), skip_render_check=True)
    check_env(_env(prices=(0.0, 0.2), conditioned=True, price_scale=0.2), skip_render_check=True)


def test_the_reward_is_the_objective_and_the_episode_ends_after_one_step():
    env = _env(prices=(0.1,))
    obs, info = env.reset(seed=3)
    row = info["row"]
    assert np.array_equal(obs, env.features[row])
    _, reward, terminated, truncated, step_info = env.step(1)
    assert terminated and not truncated
    assert reward == pytest.approx(env.f1[row, 1] - 0.1 * 4.0 / 4.0)
    assert step_info["f1"] == env.f1[row, 1]
    with pytest.raises(ValueError, match="action 2 is not a path"):
        env.step(2)


def test_a_conditioned_observation_ends_with_the_scaled_price_and_draws_repeat_under_a_seed():
    env = _env(prices=(0.0, 0.05, 0.2), conditioned=True, price_scale=0.2)
    draws = [env.reset(seed=11)[1]] + [env.reset()[1] for _ in range(20)]
    again = [env.reset(seed=11)[1]] + [env.reset()[1] for _ in range(20)]
    assert draws == again
    assert {d["price"] for d in draws} == {0.0, 0.05, 0.2}  # every price is drawn
    obs = env.observe(env.features[:2], 0.05)
    assert obs.shape == (2, 4) and np.allclose(obs[:, -1], 0.25)


def test_bad_tables_and_prices_are_refused_with_what_is_wrong():
    features, f1 = np.zeros((3, 2)), np.zeros((3, 2))
    with pytest.raises(ValueError, match=r"features \(3, 2\), f1 \(2, 2\)"):
        OutcomeTableEnv(features, f1[:2], f1[:2])
    with pytest.raises(ValueError, match="prices must be"):
        OutcomeTableEnv(features, f1, f1, prices=(-0.1,))
    with pytest.raises(ValueError, match="ref_cost must be positive"):
        OutcomeTableEnv(features, f1, f1, ref_cost=0.0)
