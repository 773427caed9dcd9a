"""The per-question task baseline: running means, the shaped reward, state round trips, config."""

from __future__ import annotations

import pytest

from common.config_error import ConfigError
from common.cost_weight import CostWeight
from envs.config_schema import AlphaConfig, CostConfig
from envs.factory import make_env
from envs.fakes import make_fake_bank, make_fake_components
from envs.reward import RewardShaper
from envs.task_baseline import QuestionBaseline, make_task_baseline


def test_question_baseline_running_mean_with_global_fallback():
    b = QuestionBaseline()
    assert b.value("q1") == 0.0  # nothing seen yet
    b.update("q1", 0.8)
    assert b.value("q1") == pytest.approx(0.8)
    assert b.value("q2") == pytest.approx(0.8)  # unseen question: mean over all episodes
    b.update("q1", 0.2)
    b.update("q2", 0.5)
    assert b.value("q1") == pytest.approx(0.5)
    assert b.value("q2") == pytest.approx(0.5)
    assert b.value("q3") == pytest.approx(0.5)  # (0.8 + 0.2 + 0.5) / 3
    assert len(b) == 2


def test_shaped_reward_subtracts_the_baseline_before_the_update():
    cost = CostConfig(alpha=AlphaConfig(mode="fixed", value=1.0))
    plain, centred = RewardShaper(cost), RewardShaper(cost, QuestionBaseline())
    rewards = []
    for r_task, raw_cost, qid in [(0.9, 4.0, "a"), (0.3, 1.0, "a"), (0.6, 9.0, "b")]:
        r0, t0 = plain.shape(r_task, raw_cost, 0.5)
        r1, t1 = centred.shape(r_task, raw_cost, 0.5, qid)
        # The cost term and α are the same: the baseline only shifts the task term.
        assert t1["cost_term"] == pytest.approx(t0["cost_term"])
        assert t1["alpha"] == pytest.approx(t0["alpha"])
        assert r1 == pytest.approx(r0 - t1["task_baseline"])
        rewards.append(t1["task_baseline"])
    # b = 0 on the first episode, 0.9 on question a's second visit, the mean of both on b's first.
    assert rewards == pytest.approx([0.0, 0.9, 0.6])
    assert plain.shape(0.5, 1.0, 0.5)[1]["task_baseline"] == 0.0


def test_alpha_is_estimated_on_the_raw_task_score():
    cost = CostConfig(alpha=AlphaConfig(mode="window", warmup=5))
    plain, centred = RewardShaper(cost), RewardShaper(cost, QuestionBaseline())
    for i in range(6):
        t0 = plain.shape(0.1 * i, float(i), 0.3)[1]
        t1 = centred.shape(0.1 * i, float(i), 0.3, "q")[1]
        assert t1["alpha"] == pytest.approx(t0["alpha"])


def test_baseline_needs_a_question_id():
    with pytest.raises(ValueError, match="question_id"):
        RewardShaper(baseline=QuestionBaseline()).shape(0.5, 1.0, 0.1)


def test_state_round_trip_and_validation_shaper_ignores_it():
    shaper = RewardShaper(baseline=QuestionBaseline())
    for i, qid in enumerate("aabca"):
        shaper.shape(0.2 * i, 1.0 + i, 0.1, qid)
    state = shaper.state_dict()
    restored = RewardShaper(baseline=QuestionBaseline())
    restored.load_state_dict(state)
    assert restored.baseline is not None and shaper.baseline is not None
    for qid in "abcz":
        assert restored.baseline.value(qid) == pytest.approx(shaper.baseline.value(qid))
    # Validation's shaper has no baseline and loads a training worker's state unchanged.
    RewardShaper().load_state_dict(state)
    with pytest.raises(ValueError, match="no task baseline"):
        RewardShaper(baseline=QuestionBaseline()).load_state_dict(RewardShaper().state_dict())
    corrupt = {**state, "task_baseline": {"sum": {"a": 1.0}, "count": {"b": 1}}}
    with pytest.raises(ValueError, match="corrupt"):
        RewardShaper(baseline=QuestionBaseline()).load_state_dict(corrupt)


def test_env_from_config_centres_a_revisited_question():
    comps = make_fake_components(cost_weight=CostWeight(0.0))
    cfg = {"reward": {"task_baseline": "question"}}
    env = make_env(cfg, items=make_fake_bank(1), components=comps, seed=0)
    finals = []
    for _ in range(3):
        env.reset()
        done, info, reward = False, {}, 0.0
        while not done:
            _, reward, done, _, info = env.step(1)
        finals.append((reward, info["f1"], info["reward_terms"]["task_baseline"]))
    # One question: visit k is centred on the mean F1 of visits 0..k-1 (the first on 0).
    seen: list[float] = []
    for r, f, b in finals:
        expected = sum(seen) / len(seen) if seen else 0.0
        assert b == pytest.approx(expected) and r == pytest.approx(f - expected)
        seen.append(f)
    assert len(set(seen)) > 1  # the fake answers differ across visits, so the check is not vacuous


def test_unknown_task_baseline_is_a_config_error():
    comps = make_fake_components()
    with pytest.raises(ConfigError, match=r"reward\.task_baseline='group'"):
        make_env({"reward": {"task_baseline": "group"}}, items=make_fake_bank(1), components=comps)
    assert make_task_baseline("none") is None
    with pytest.raises(ValueError, match="unknown"):
        make_task_baseline("group")


def test_env_from_config_passes_lambda_scale_to_its_shaper():
    comps = make_fake_components(cost_weight=CostWeight(0.5))
    off = make_env({}, items=make_fake_bank(1), components=comps, seed=0)
    on = make_env({"reward": {"lambda_scale": True}}, items=make_fake_bank(1), components=comps, seed=0)
    assert not off.reward_shaper.lambda_scale and on.reward_shaper.lambda_scale
