import numpy as np
import pytest

from evaluation.bootstrap import Estimate
from evaluation.frontier import (
    Point,
    dominance,
    dominates,
    frontier_score,
    pareto_frontier,
    reference_pair,
    step_curve_mean,
    target_check,
)

LOW = Point("all-low", 1.0, 0.2)
MID = Point("all-mid", 3.0, 0.4)
HIGH = Point("all-high", 5.0, 0.6)


def test_dominates():
    assert dominates(Point("a", 1, 0.5), Point("b", 2, 0.5))
    assert dominates(Point("a", 2, 0.6), Point("b", 2, 0.5))
    assert not dominates(Point("a", 2, 0.5), Point("b", 2, 0.5))  # equal: neither dominates
    assert not dominates(Point("a", 1, 0.4), Point("b", 2, 0.5))


def test_pareto_frontier_hand_computed():
    pts = [
        Point("e", 4, 0.6),
        Point("c", 3, 0.4),
        Point("b", 2, 0.5),
        Point("a", 1, 0.2),
        Point("b2", 2, 0.5),  # duplicate of b: the first by name is kept
        Point("f", 4, 0.55),
    ]
    assert [p.name for p in pareto_frontier(pts)] == ["a", "b", "e"]
    with pytest.raises(ValueError, match="non-finite"):
        pareto_frontier([Point("x", float("nan"), 0.1)])


def test_step_curve_and_scores_hand_computed():
    routers = [
        Point("r1", 2.0, 0.5, "router"),
        Point("r2", 3.0, 0.55, "router"),
        Point("r3", 9.0, 0.9, "router"),
    ]
    # Q = 0.2 on [1,2), 0.5 on [2,3), 0.55 on [3,5]; r3 is beyond the range -> area 0.2+0.5+1.1 = 1.8 over 4
    assert step_curve_mean(routers, LOW, 1.0, 5.0) == pytest.approx(0.45)
    s = frontier_score(routers, LOW, HIGH)
    assert s.auc == pytest.approx(0.45 / 0.6)
    assert s.step_pgr == pytest.approx((0.45 - 0.2) / 0.4)
    assert s.gain_over_line == pytest.approx(0.125)
    assert (s.low, s.high, s.c_lo, s.c_hi) == ("all-low", "all-high", 1.0, 5.0)


def test_pair_alone_scores_zero_and_line_scores_half():
    pair = frontier_score([LOW, HIGH], LOW, HIGH)
    assert pair.step_pgr == pytest.approx(0.0)
    assert pair.auc == pytest.approx(0.2 / 0.6)
    # many points on the straight low-high line: the step curve approaches the line from below
    cs = np.linspace(1.0, 5.0, 2001)
    line = [Point(f"p{i}", c, 0.2 + 0.1 * (c - 1.0)) for i, c in enumerate(cs)]
    s = frontier_score(line, LOW, HIGH)
    assert s.step_pgr < 0.5 and s.step_pgr == pytest.approx(0.5, abs=1e-3)


def test_cheap_strong_router_recovers_whole_gap():
    s = frontier_score([Point("r", 0.5, 0.6)], LOW, HIGH)
    assert s.step_pgr == pytest.approx(1.0) and s.auc == pytest.approx(1.0)


def test_undefined_gap_and_range():
    s = frontier_score([], Point("lo", 1, 0.5), Point("hi", 2, 0.4))
    assert np.isnan(s.step_pgr)
    with pytest.raises(ValueError, match="empty cost range"):
        step_curve_mean([], LOW, 1.0, 1.0)


def test_reference_pair():
    assert reference_pair([MID, HIGH, LOW]) == (LOW, HIGH)
    with pytest.raises(ValueError, match="at least two"):
        reference_pair([LOW])


def test_target_check():
    ok = target_check("r", Estimate(0.97, 0.96, 0.99, 10), Estimate(0.4, 0.35, 0.45, 10))
    assert ok.passed and ok.robust
    shaky = target_check("r", Estimate(0.96, 0.90, 1.0, 10), Estimate(0.4, 0.35, 0.55, 10))
    assert shaky.passed and not shaky.robust
    assert not target_check("r", Estimate(0.94, 0.9, 1.0, 10), Estimate(0.1, 0.1, 0.1, 10)).passed
    assert not target_check("r", Estimate(1.0, 1.0, 1.0, 10), Estimate(0.51, 0.5, 0.52, 10)).passed
    # the bounds are inclusive
    assert target_check("r", Estimate(0.95, 0.95, 0.95, 1), Estimate(0.5, 0.5, 0.5, 1)).robust


def test_dominance_partly_then_yes():
    r1, r2 = Point("r1", 2.0, 0.45, "router"), Point("r2", 4.0, 0.6, "router")
    d = dominance([r1, r2], [LOW, MID, HIGH])
    assert d.dominated_by == {"all-low": None, "all-mid": "r1", "all-high": "r2"}
    assert d.verdict == "partly"
    assert d.undominated_routers == ["r1", "r2"]
    d2 = dominance([Point("r0", 1.0, 0.25, "router"), r1, r2], [LOW, MID, HIGH])
    assert d2.verdict == "yes" and d2.dominated_by["all-low"] == "r0"
    d3 = dominance([Point("bad", 4.0, 0.3, "router")], [LOW, MID, HIGH])
    assert d3.verdict == "no" and d3.undominated_routers == []


def test_a_router_on_a_baselines_exact_point_ties_it_and_nothing_lies_above():
    r1, r2 = Point("r1", 2.0, 0.45, "router"), Point("r2", 4.0, 0.6, "router")
    at_low = Point("r λ=10", LOW.cost, LOW.quality, "router")
    d = dominance([at_low, r1, r2], [LOW, MID, HIGH])
    assert d.verdict == "partly"  # a tie is not dominance
    assert d.dominated_by == {"all-low": None, "all-mid": "r1", "all-high": "r2"}
    assert d.tied_by == {"all-low": "r λ=10"}
    assert d.above_routers == []
    # a hair off the point is no tie: the baseline then lies above the routers
    near = Point("r near", LOW.cost, LOW.quality - 1e-12, "router")
    d2 = dominance([near, r1, r2], [LOW, MID, HIGH])
    assert d2.tied_by == {"all-low": None} and d2.above_routers == ["all-low"]
