"""Reward shaping on hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from common.config_error import ConfigError
from envs.config_schema import AlphaConfig, CostConfig, parse
from envs.reward import CostAlignment, CostNormalizer, RewardShaper, percentile_linear


def test_percentile_linear_matches_hand_and_numpy():
    x = np.array([4.0, 1.0, 3.0, 2.0])
    # sorted 1,2,3,4; P5 -> h = 3*0.05 = 0.15 -> 1 + 0.15*(2-1) = 1.15
    assert percentile_linear(x, 5) == pytest.approx(1.15)
    # P95 -> h = 2.85 -> 3 + 0.85*(4-3) = 3.85
    assert percentile_linear(x, 95) == pytest.approx(3.85)
    rng = np.random.default_rng(0)
    y = rng.random(17)
    for q in (0, 5, 50, 95, 100):
        assert percentile_linear(y, q) == pytest.approx(np.percentile(y, q))
    with pytest.raises(ValueError):
        percentile_linear(np.array([]), 5)


def test_normaliser_hand_case():
    norm = CostNormalizer(window=10)
    for c in (1.0, 4.0, 9.0):
        norm.normalise(c)
    # window sqrt = [1, 2, 3, 4] after adding 16; P5 = 1.15, P95 = 3.85
    c_hat, b = norm.normalise(16.0)
    assert b["p_low"] == pytest.approx(1.15)
    assert b["p_high"] == pytest.approx(3.85)
    assert c_hat == 1.0  # sqrt(16)=4 > P95: clipped
    c_hat, _ = norm.normalise(4.0, update=False)
    assert c_hat == pytest.approx((2.0 - 1.15) / (3.85 - 1.15))
    assert len(norm) == 4


def test_normaliser_window_evicts_oldest():
    norm = CostNormalizer(window=3)
    for c in (100.0, 1.0, 4.0, 9.0):
        norm.normalise(c)
    assert norm.costs == [1.0, 4.0, 9.0]  # 100 evicted
    # sqrt window [1,2,3]: P5 = 1 + 0.1*1 = 1.1, P95 = 2 + 0.9 = 2.9
    p_lo, p_hi = norm.bounds()
    assert (p_lo, p_hi) == (pytest.approx(1.1), pytest.approx(2.9))
    # Without eviction the huge cost would set P95 near 10 and 4.0 would look cheap.
    c_hat, _ = norm.normalise(4.0, update=False)
    assert c_hat == pytest.approx((2 - 1.1) / 1.8)


def test_normaliser_all_zero_costs():
    norm = CostNormalizer(window=5)
    for _ in range(5):
        c_hat, b = norm.normalise(0.0)
        assert c_hat == 0.0
        assert (b["p_low"], b["p_high"]) == (0.0, 1.0)  # P95 = 0 -> set to 1
    # A non-zero cost against an all-zero window: c_hat = min(sqrt(c), 1) (window now has it too)
    c_hat, _ = norm.normalise(0.25, update=False)
    assert c_hat == pytest.approx(0.5)


def test_normaliser_single_sample_window():
    norm = CostNormalizer(window=1)
    c_hat, b = norm.normalise(4.0)
    # P5 = P95 = 2 > 0 -> P5 = 0.9 * 2 = 1.8 -> (2 - 1.8) / 0.2 = 1
    assert b["p_low"] == pytest.approx(1.8)
    assert c_hat == pytest.approx(1.0)
    c_hat, _ = norm.normalise(0.0)
    assert c_hat == 0.0
    assert norm.costs == [0.0]


def test_normaliser_rejects_bad_input():
    with pytest.raises(ValueError, match="window"):
        CostNormalizer(window=0)
    with pytest.raises(ValueError, match="low_pct"):
        CostNormalizer(low_pct=95, high_pct=5)
    with pytest.raises(ValueError, match="raw cost"):
        CostNormalizer().normalise(-1.0)
    with pytest.raises(ValueError, match="raw cost"):
        CostNormalizer().normalise(float("nan"))


def test_alpha_window_hand_case():
    al = CostAlignment(AlphaConfig(mode="window", window=3))
    assert al.update(1.0, 0.5) == 1.0  # fewer than min_history=2 pairs -> alpha0
    # tasks [1, 0], costs [0.5, 0.0]: std 0.5 / 0.25 = 2
    assert al.update(0.0, 0.0) == pytest.approx(2.0)
    al.update(1.0, 0.5)
    # window 3: tasks [1,0,1] std = sqrt(2/9); costs [.5,0,.5] std = sqrt(2/9)/2 -> 2
    assert al.alpha == pytest.approx(2.0)
    al.update(1.0, 1.0)  # evicts the first pair: tasks [0,1,1], costs [0,.5,1]
    expected = np.std([0, 1, 1]) / np.std([0, 0.5, 1.0])
    assert al.alpha == pytest.approx(expected)


def test_alpha_frozen_after_warmup_and_floors_and_clip():
    al = CostAlignment(AlphaConfig(mode="frozen", warmup=3, min=0.01, max=100))
    al.update(0.0, 0.0)
    al.update(1.0, 0.5)
    a3 = al.update(0.0, 0.0)
    assert al.frozen_alpha == pytest.approx(a3)
    assert al.update(1.0, 1.0) == pytest.approx(a3)  # frozen: new pairs no longer move it
    # zero task spread: 1e-5 / std_cost, clipped to alpha_min
    al2 = CostAlignment(AlphaConfig(mode="window"))
    al2.update(0.0, 0.0)
    assert al2.update(0.0, 1.0) == pytest.approx(0.01)
    # zero cost spread: std_task / 1e-5, clipped to alpha_max
    al3 = CostAlignment(AlphaConfig(mode="window"))
    al3.update(0.0, 0.3)
    assert al3.update(1.0, 0.3) == pytest.approx(100.0)
    # both zero: 1e-5 / 1e-5 = 1
    al4 = CostAlignment(AlphaConfig(mode="window"))
    al4.update(0.5, 0.5)
    assert al4.update(0.5, 0.5) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="alpha mode"):
        CostAlignment(AlphaConfig(mode="ema"))


def test_shaper_lambda_zero_is_task_reward():
    sh = RewardShaper()
    for rt, c in [(0.3, 1.0), (1.0, 50.0), (0.0, 0.0)]:
        reward, terms = sh.shape(rt, c, 0.0)
        assert reward == rt
        assert terms["cost_term"] == 0.0


def test_shaper_hand_case_and_fixed_alpha():
    sh = RewardShaper(CostConfig(window=10, alpha=AlphaConfig(mode="fixed", value=2.0)))
    sh.shape(1.0, 1.0, 0.5)
    sh.shape(0.0, 9.0, 0.5)
    # window sqrt [1,3,2] after adding 4 -> sorted [1,2,3]: P5 = 1.1, P95 = 2.9
    reward, terms = sh.shape(0.5, 4.0, 0.5)
    c_hat = (2.0 - 1.1) / 1.8
    assert terms["cost_norm"] == pytest.approx(c_hat)
    assert terms["r_cost"] == pytest.approx(1 - c_hat)
    assert reward == pytest.approx(0.5 + 0.5 * 2.0 * (1 - c_hat))
    assert set(terms) >= {"r_task", "raw_cost", "r_cost", "alpha", "cost_lambda", "cost_term", "reward"}


def test_shaper_prefers_cheaper_at_equal_task_score():
    sh = RewardShaper(CostConfig(alpha=AlphaConfig(mode="window")))
    rng = np.random.default_rng(0)
    for _ in range(50):
        sh.shape(float(rng.random()), float(rng.random() * 10), 0.3)
    r_cheap, _ = sh.shape(0.5, 0.5, 0.3)
    r_dear, _ = sh.shape(0.5, 9.0, 0.3)
    assert r_cheap > r_dear


def test_shaper_config_and_state_round_trip():
    cost = {"lambda": 0.2, "window": 5, "unit": "gflops", "alpha": {"mode": "window", "window": 4}}
    cfg = parse(CostConfig, cost)
    sh = RewardShaper(cfg)
    for c in (1.0, 2.0, 3.0):
        sh.shape(0.5, c, 0.2)
    other = RewardShaper(cfg)
    other.load_state_dict(sh.state_dict())
    assert other.shape(0.7, 2.5, 0.2) == sh.shape(0.7, 2.5, 0.2)
    with pytest.raises(ConfigError, match=r"Key 'mod' not in 'AlphaConfig'"):
        parse(CostConfig, {"alpha": {"mod": "window"}})
    with pytest.raises(ValueError, match="cost_lambda must be finite"):
        RewardShaper().shape(0.5, 1.0, -1)
    with pytest.raises(ValueError, match="r_task"):
        RewardShaper().shape(math.nan, 1.0, 0.2)


def test_shaper_evaluate_scores_without_updating():
    """Validation scoring: the current window and α, nothing appended (hand-computed)."""
    shaper = RewardShaper(CostConfig(alpha=AlphaConfig(mode="fixed", value=2.0)))
    assert shaper.evaluate(0.3, 50.0, 0.5) == 0.3  # empty window: no cost term yet
    shaper.shape(0.5, 0.0, 0.5)
    shaper.shape(0.5, 100.0, 0.5)  # window [0, 100] -> sqrt [0, 10]: P5 = 0.5, P95 = 9.5
    state = shaper.state_dict()
    # sqrt(25) = 5 -> c_hat = (5 - 0.5) / 9 = 0.5 -> 0.2 + 0.5 * 2 * 0.5
    assert shaper.evaluate(0.2, 25.0, 0.5) == pytest.approx(0.7)
    assert shaper.evaluate(0.2, 1e6, 0.5) == pytest.approx(0.2)  # clipped at the dear end: r_cost = 0
    assert shaper.state_dict() == state
    assert RewardShaper().evaluate(0.4, 10.0, 0.0) == 0.4
    with pytest.raises(ValueError, match="raw cost"):
        shaper.evaluate(0.2, -1.0, 0.5)


def test_shaper_loads_state_saved_when_it_still_held_lambda():
    """Checkpoints from before λ moved to common.cost_weight carry ``cost_lambda``: it is ignored."""
    sh = RewardShaper(CostConfig(window=5))
    for c in (1.0, 4.0, 9.0):
        sh.shape(0.5, c, 0.2)
    old_state = {"cost_lambda": 0.2, **sh.state_dict()}
    other = RewardShaper(CostConfig(window=5))
    other.load_state_dict(old_state)
    assert other.state_dict() == sh.state_dict()
    assert other.evaluate(0.5, 2.0, 0.2) == sh.evaluate(0.5, 2.0, 0.2)


def test_lambda_scale_divides_by_one_plus_lambda_alpha_and_keeps_each_lambdas_ranking():
    fixed = AlphaConfig(mode="fixed", value=2.0)
    plain = RewardShaper(CostConfig(window=10, alpha=fixed))
    scaled = RewardShaper(CostConfig(window=10, alpha=fixed), lambda_scale=True)
    history = [(1.0, 1.0, 0.5), (0.0, 9.0, 3.0), (0.5, 4.0, 0.0)]
    for rt, c, lam in history:
        r_plain, t_plain = plain.shape(rt, c, lam)
        r_scaled, t_scaled = scaled.shape(rt, c, lam)
        # same window, same α: only the divisor differs, 1 + λ·α (1 at λ = 0)
        assert t_scaled["reward_scale"] == pytest.approx(1.0 + lam * 2.0) and t_plain["reward_scale"] == 1.0
        assert r_scaled == pytest.approx(r_plain / (1.0 + lam * 2.0))
    # hand case at λ = 3 after the history: window sqrt [1, 3, 2, 2] -> P5 1.15, P95 2.85
    r, _ = scaled.shape(0.5, 4.0, 3.0)
    c_hat = (2.0 - 1.15) / 1.7
    assert r == pytest.approx((0.5 + 3.0 * 2.0 * (1 - c_hat)) / 7.0)
    plain.shape(0.5, 4.0, 3.0)  # keep both windows equal
    # within one λ the order of two episodes never changes (each λ's best policy is the same) ...
    a, _ = scaled.shape(0.9, 8.0, 3.0)
    b, _ = scaled.shape(0.2, 0.5, 3.0)
    a0, _ = plain.shape(0.9, 8.0, 3.0)
    b0, _ = plain.shape(0.2, 0.5, 3.0)
    assert (a > b) == (a0 > b0)
    # ... while across λ the rewards now share one range: |reward| <= 1 for r_task, r_cost in [0, 1]
    assert abs(scaled.shape(0.0, 0.0, 10.0)[0]) <= 1.0 < abs(plain.shape(0.0, 0.0, 10.0)[0])
    # validation scores the objective as written
    assert scaled.evaluate(0.5, 4.0, 3.0) == pytest.approx(plain.evaluate(0.5, 4.0, 3.0))
