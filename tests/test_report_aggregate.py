import numpy as np
import pytest

from evaluation.aggregate import RecordError, Run, SystemRuns, compare_to, summarise


def rec(qid, cat, tiers, f1, em, mcost, acost=1.0, judge=None, judge_failed=False, failures=0, lat=0.5):
    return {
        "question_id": qid,
        "category": cat,
        "tiers": tiers,
        "f1": f1,
        "em": em,
        "judge": judge,
        "judge_failed": judge_failed,
        "failures": failures,
        "module_cost": mcost,
        "answer_cost": acost,
        "total_cost": mcost + acost,
        "latency_s": lat,
    }


QIDS = ["q1", "q2", "q3", "q4"]


def high_records():
    return [
        rec("q1", 1, ["HIGH"] * 5, 1.0, 1.0, 10.0, judge=1.0),
        rec("q2", 1, ["HIGH"] * 5, 0.5, 0.0, 10.0, judge=0.0),
        rec("q3", 2, ["HIGH"] * 5, 0.0, 0.0, 10.0, judge=None, judge_failed=True, failures=1),
        rec("q4", 2, ["HIGH"] * 5, 0.5, 0.0, 10.0, judge=1.0),
    ]


def test_summary_hand_computed():
    # records deliberately out of order: alignment is by question id
    s = summarise(SystemRuns("all-high", "baseline", [Run("h", high_records()[::-1])]), QIDS, n_boot=300)
    m = s.metrics
    assert m["f1"].mean == pytest.approx(0.5)
    assert m["em"].mean == pytest.approx(0.25)
    assert m["judge"].mean == pytest.approx(2 / 3)  # the failed judgement is missing, not zero
    assert m["judge"].n == 3
    assert m["judge_failed"].mean == pytest.approx(0.25)
    assert m["module_cost"].mean == 10.0 and (m["module_cost"].lo, m["module_cost"].hi) == (10.0, 10.0)
    assert m["total_cost"].mean == 11.0
    assert m["failures"].mean == 0.25 and s.failures_total == 1.0
    assert s.per_category["1"]["f1"].mean == pytest.approx(0.75)
    assert s.per_category["2"]["f1"].mean == pytest.approx(0.25)
    assert s.per_category["2"]["judge"].mean == pytest.approx(1.0)
    assert s.tier_ratios["filter"] == {"LOW": 0.0, "MID": 0.0, "HIGH": 1.0}
    assert m["f1"].lo <= 0.5 <= m["f1"].hi and m["f1"].lo < m["f1"].hi
    d = s.to_dict()
    assert d["metrics"]["f1"]["mean"] == pytest.approx(0.5) and "replicates" not in d


def test_seed_runs_tier_ratios_and_paired_comparison():
    tiers_a = ["LOW", "MID", "HIGH", "LOW", "LOW"]
    tiers_b = [0, 0, 2, 2, 1]  # ints are accepted too
    run0 = [rec(q, 1, tiers_a, f, 0.0, 2.0) for q, f in zip(QIDS, [1.0, 0.5, 0.0, 0.5], strict=True)]
    run1 = [rec(q, 1, tiers_b, f, 0.0, 4.0) for q, f in zip(QIDS, [0.5, 0.5, 0.0, 0.5], strict=True)]
    s = summarise(
        SystemRuns("router λ=0.1", "router", [Run("s0", run0, 0), Run("s1", run1, 1)]), QIDS, n_boot=300
    )
    assert s.n_seeds == 2
    assert s.metrics["f1"].mean == pytest.approx((0.5 + 0.375) / 2)
    assert s.metrics["module_cost"].mean == pytest.approx(3.0)
    assert s.seed_std["module_cost"] == pytest.approx(np.std([2.0, 4.0], ddof=1))
    assert s.tier_ratios["entity"] == {"LOW": 0.5, "MID": 0.5, "HIGH": 0.0}
    assert s.tier_ratios["topic"] == {"LOW": 0.5, "MID": 0.0, "HIGH": 0.5}
    high = summarise(SystemRuns("all-high", "baseline", [Run("h", high_records())]), QIDS, n_boot=300)
    compare_to(s, high)
    assert s.vs_reference["f1_ratio"].mean == pytest.approx(0.4375 / 0.5)
    assert s.vs_reference["module_cost_ratio"].mean == pytest.approx(0.3)
    assert s.vs_reference["f1_diff"].mean == pytest.approx(-0.0625)
    lo, hi = s.vs_reference["module_cost_ratio"].lo, s.vs_reference["module_cost_ratio"].hi
    assert 0.2 <= lo <= hi <= 0.4  # only seed resampling moves the cost (2 or 4 over 10)


def test_record_errors_name_the_problem():
    bad = high_records()[:3]
    with pytest.raises(RecordError, match="no record for 1 of 4 questions"):
        summarise(SystemRuns("x", "baseline", [Run("r", bad)]), QIDS)
    dup = [*high_records(), high_records()[0]]
    with pytest.raises(RecordError, match="duplicate question_id 'q1'"):
        summarise(SystemRuns("x", "baseline", [Run("r", dup)]), QIDS)
    broken = high_records()
    del broken[1]["f1"]
    with pytest.raises(RecordError, match=r"record 1: missing keys \['f1'\]"):
        summarise(SystemRuns("x", "baseline", [Run("r", broken)]), QIDS)
    wrong = high_records()
    wrong[0]["tiers"] = ["LOW"] * 4
    with pytest.raises(RecordError, match="expected 5"):
        summarise(SystemRuns("x", "baseline", [Run("r", wrong)]), QIDS)
