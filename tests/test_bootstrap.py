import numpy as np
import pytest

from evaluation.bootstrap import (
    bootstrap_mean,
    interval,
    make_resampler,
    paired_difference,
    paired_ratio,
    point_mean,
    replicate_means,
)


def test_point_mean_ignores_nan_and_averages_seeds_after_questions():
    assert point_mean([1.0, np.nan, 3.0]) == pytest.approx(2.0)
    # seed 0 mean 1.5, seed 1 mean 4.0 (its NaN drops out) -> 2.75
    assert point_mean([[1.0, 2.0, 2.0, 1.0], [3.0, 5.0, np.nan, 4.0]]) == pytest.approx(2.75)
    assert np.isnan(point_mean([np.nan, np.nan]))


def test_resampler_rows_are_resamples_and_deterministic():
    r1 = make_resampler(7, 3, n_boot=50, seed=4)
    r2 = make_resampler(7, 3, n_boot=50, seed=4)
    np.testing.assert_array_equal(r1.question_weights, r2.question_weights)
    np.testing.assert_allclose(r1.question_weights.sum(axis=1), 1.0)
    np.testing.assert_allclose(r1.seed_weights.sum(axis=1), 1.0)
    # counts are integers: weight * n is whole
    np.testing.assert_allclose(r1.question_weights * 7, np.round(r1.question_weights * 7))
    # question resamples do not depend on the number of seeds: this is what makes the bootstrap paired
    r3 = make_resampler(7, 1, n_boot=50, seed=4)
    np.testing.assert_array_equal(r1.question_weights, r3.question_weights)
    assert not np.array_equal(make_resampler(7, n_boot=50, seed=5).question_weights, r1.question_weights)


def test_replicates_match_explicit_index_resampling():
    rng = np.random.default_rng(0)
    values = rng.random(6)
    values[2] = np.nan
    res = make_resampler(6, n_boot=40, seed=1)
    reps = replicate_means(values, res)
    for b in range(40):
        idx = np.repeat(np.arange(6), np.round(res.question_weights[b] * 6).astype(int))
        drawn = values[idx]
        expect = np.nanmean(drawn) if np.any(~np.isnan(drawn)) else np.nan
        np.testing.assert_allclose(reps[b], expect)


def test_two_point_distribution_hand_computed():
    # values {0, 1}: a replicate mean is 0, 0.5 or 1 with probabilities 1/4, 1/2, 1/4
    res = make_resampler(2, n_boot=4000, seed=0)
    est, reps = bootstrap_mean([0.0, 1.0], res)
    assert est.mean == 0.5 and est.n == 2
    assert set(np.unique(reps)) <= {0.0, 0.5, 1.0}
    assert np.mean(reps == 0.5) == pytest.approx(0.5, abs=0.03)
    assert (est.lo, est.hi) == (0.0, 1.0)


def test_constant_values_give_degenerate_interval():
    est, _ = bootstrap_mean(np.full(30, 0.42), make_resampler(30, n_boot=200))
    assert est.mean == pytest.approx(0.42) and est.lo == pytest.approx(0.42) and est.hi == pytest.approx(0.42)


def test_interval_width_matches_normal_theory():
    x = np.random.default_rng(3).normal(size=400)
    est, _ = bootstrap_mean(x, make_resampler(400, n_boot=3000, seed=2))
    expected = 2 * 1.96 * x.std(ddof=1) / np.sqrt(400)
    assert est.hi - est.lo == pytest.approx(expected, rel=0.1)
    assert est.lo < est.mean < est.hi


def test_paired_difference_and_ratio_are_exact_for_shifted_copies():
    x = np.random.default_rng(5).random(50)
    res = make_resampler(50, n_boot=500)
    a, ra = bootstrap_mean(x + 0.1, res)
    b, rb = bootstrap_mean(x, res)
    d = paired_difference(a.mean, ra, b.mean, rb, res.alpha)
    assert d.mean == pytest.approx(0.1) and d.lo == pytest.approx(0.1) and d.hi == pytest.approx(0.1)
    # the unpaired intervals are far wider than the paired one
    assert (a.hi - a.lo) > 0.05
    c, rc = bootstrap_mean(2 * x, res)
    r = paired_ratio(c.mean, rc, b.mean, rb, res.alpha)
    assert (r.mean, r.lo, r.hi) == pytest.approx((2.0, 2.0, 2.0))


def test_hierarchical_bootstrap_over_seeds():
    # seed 0 always 0, seed 1 always 1: only seed resampling moves the mean -> {0, .5, 1}
    values = np.array([[0.0] * 5, [1.0] * 5])
    est, reps = bootstrap_mean(values, make_resampler(5, 2, n_boot=2000, seed=0))
    assert est.mean == 0.5
    assert set(np.unique(reps)) <= {0.0, 0.5, 1.0}
    assert (est.lo, est.hi) == (0.0, 1.0)


def test_errors_are_clear():
    with pytest.raises(ValueError, match="shape"):
        replicate_means(np.zeros((2, 3)), make_resampler(3, 1, n_boot=5))
    with pytest.raises(ValueError, match="alpha"):
        make_resampler(3, alpha=1.5)
    with pytest.raises(ValueError, match=">= 1"):
        make_resampler(0)
    assert all(np.isnan(interval(np.array([np.nan]), 0.05)))
