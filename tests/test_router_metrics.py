"""Router metrics (RouteLLM APGR / CPT, RouterBench AIQ), the oracle and their bootstrap, by hand.

Every expected number below is computed by hand in the comments next to it.
"""

import math

import numpy as np
import pytest

from evaluation.aggregate import Run, SystemRuns, summarise
from evaluation.oracle import minimum_paths, oracle_system, path_label
from evaluation.report import analyse, csv_rows, report_dict
from evaluation.router_metrics import (
    Ends,
    aiq,
    apgr,
    cost_share,
    cpt,
    nondecreasing_hull,
    pgr,
    pgr_curve,
)
from evaluation.router_metrics_report import compute_router_metrics, family_rows, format_router_metrics

# all-LOW costs 1 with F1 0.2, all-HIGH costs 5 with F1 0.6: cost range 4, quality gap 0.4.
ENDS = Ends(c_low=1.0, q_low=0.2, c_high=5.0, q_high=0.6)
LOW, HIGH = (1.0, 0.2), (5.0, 0.6)
R1, R2 = (2.0, 0.5), (3.0, 0.55)


def test_cost_share_and_pgr():
    assert cost_share(2.0, ENDS) == pytest.approx(0.25)  # (2 - 1) / 4
    assert pgr(0.5, ENDS) == pytest.approx(0.75)  # (0.5 - 0.2) / 0.4
    flat = Ends(1.0, 0.5, 5.0, 0.4)  # all-HIGH worse than all-LOW: no gap
    assert math.isnan(pgr(0.5, flat)) and pgr_curve([R1], flat) == []
    assert math.isnan(cost_share(2.0, Ends(1.0, 0.2, 1.0, 0.6)))


def test_apgr_and_cpt_hand_computed():
    # curve (0,0) (0.25,0.75) (0.5,0.875) (1,1)
    np.testing.assert_allclose(pgr_curve([R2, R1], ENDS), [(0, 0), (0.25, 0.75), (0.5, 0.875), (1, 1)])
    # trapezoids: 0.25*(0+0.75)/2 = 0.09375; 0.25*(0.75+0.875)/2 = 0.203125; 0.5*(0.875+1)/2 = 0.46875
    assert apgr([R1, R2], ENDS) == pytest.approx(0.765625)
    # PGR 0.5 is crossed on the first segment: 0.5/0.75 of the way to 0.25 -> 1/6
    assert cpt([R1, R2], ENDS, 0.5) == pytest.approx(1 / 6)
    # PGR 0.8 on the second: 0.25 + (0.8-0.75)/(0.875-0.75) * 0.25 = 0.35
    assert cpt([R1, R2], ENDS, 0.8) == pytest.approx(0.35)


def test_dominated_point_lowers_apgr_but_not_aiq():
    r3 = (2.5, 0.45)  # share 0.375, PGR 0.625: a dip in the curve
    # 0.09375 + 0.125*(0.75+0.625)/2 + 0.125*(0.625+0.875)/2 + 0.46875 = 0.7421875
    assert apgr([R1, R2, r3], ENDS) == pytest.approx(0.7421875)
    assert aiq([R1, R2, r3], LOW, 1.0, 5.0) == pytest.approx(aiq([R1, R2], LOW, 1.0, 5.0))


def test_straight_line_and_undefined():
    # the two ends alone: the diagonal, APGR 0.5, CPT(p) = p, AIQ = mean of 0.2..0.6 = 0.4
    assert apgr([LOW, HIGH], ENDS) == pytest.approx(0.5)
    assert cpt([LOW, HIGH], ENDS, 0.8) == pytest.approx(0.8)
    assert aiq([HIGH], LOW, 1.0, 5.0) == pytest.approx(0.4)
    assert apgr([], ENDS) == pytest.approx(0.5)  # the ends are always on the curve
    flat = Ends(1.0, 0.5, 5.0, 0.4)
    assert math.isnan(apgr([R1], flat)) and math.isnan(cpt([R1], flat, 0.5))
    assert math.isnan(aiq([R1], LOW, 1.0, 1.0))
    assert math.isnan(aiq([R1], (1.0, float("nan")), 1.0, 5.0))  # e.g. all-LOW without judge scores
    with pytest.raises(ValueError, match="floor"):
        aiq([R1], (1.5, 0.2), 1.0, 5.0)


def test_point_beyond_all_high_is_clipped():
    far = (7.0, 0.7)  # share 1.5, PGR 1.25: the part beyond share 1 is not integrated
    assert apgr([far], ENDS) == pytest.approx(0.5)
    # AIQ hull: the line (1,0.2)-(7,0.7); over [1,5] it runs from 0.2 to 0.2+0.5*4/6 -> mean 0.36667
    assert aiq([far], LOW, 1.0, 5.0) == pytest.approx((0.2 + 0.2 + 0.5 * 4 / 6) / 2)


def test_aiq_hand_computed():
    # hull (1,.2) (2,.5) (3,.55), flat at .55 to 5 (r1 lies above the chord (1,.2)-(3,.55): 0.375 < 0.5)
    # area: (0.2+0.5)/2 + (0.5+0.55)/2 + 2*0.55 = 0.35 + 0.525 + 1.1 = 1.975, over 4 -> 0.49375
    assert aiq([R1, R2], LOW, 1.0, 5.0) == pytest.approx(0.49375)


def test_nondecreasing_hull():
    pts = [(0, 0), (1, 1), (2, 2), (3, 2.5), (1.5, 0.5), (4, 1.0), (3, 2.0)]
    # (1,1) lies on the chord (0,0)-(2,2); (1.5,.5), (4,1) and (3,2) are dominated
    assert nondecreasing_hull(pts) == [(0, 0), (2, 2), (3, 2.5)]
    assert nondecreasing_hull([(1, 0.2), (1, 0.3)]) == [(1, 0.3)]
    assert nondecreasing_hull([(1, float("nan")), (2, 0.1)]) == [(2, 0.1)]


# ------------------------------------------------------------------------------------------
# Oracle
# ------------------------------------------------------------------------------------------

QIDS = ["q0", "q1", "q2"]


def _rec(qid, tier, f1, cost):
    return {
        "question_id": qid,
        "category": "1",
        "tiers": [tier] * 5,
        "f1": f1,
        "em": float(f1 == 1.0),
        "module_cost": cost,
        "answer_cost": 1.0,
        "total_cost": cost + 1.0,
    }


def _system(name, kind, tier, f1s, cost, seeds=1):
    runs = [
        Run(f"{name}{s}", [_rec(q, tier, f, cost) for q, f in zip(QIDS, f1s, strict=True)])
        for s in range(seeds)
    ]
    return SystemRuns(name, kind, runs, {"tiers": ",".join(tier[0] * 5)})


def test_oracle_picks_best_path_per_question():
    a = _system("all-low", "baseline", "LOW", [0.2, 0.0, 0.5], 1.0)
    b = _system("all-high", "baseline", "HIGH", [0.6, 0.0, 0.5], 5.0)
    c = _system("router", "router", "MID", [0.1, 0.3, 0.5], 3.0)
    o = oracle_system([a, b, c], QIDS)
    recs = o.runs[0].records
    # q0: 0.6 from all-high; q1: 0.3 from the router; q2: a three-way tie at 0.5 -> cheapest, all-low
    assert [r["oracle_source"] for r in recs] == ["all-high", "router", "all-low"]
    assert [path_label(r) for r in recs] == ["H,H,H,H,H", "M,M,M,M,M", "L,L,L,L,L"]
    assert o.kind == "oracle" and o.params["chosen_from"] == {"all-high": 1, "all-low": 1, "router": 1}
    assert o.params["paths_per_question"] == {"min": 3, "mean": 3.0, "max": 3}
    # the three uniform paths are in; the ten single-module changes from all-MID are not
    assert o.params["minimum_paths_missing"] == minimum_paths()[3:]
    s = summarise(o, QIDS, n_boot=50)
    assert s.metrics["f1"].mean == pytest.approx((0.6 + 0.3 + 0.5) / 3)
    assert s.metrics["module_cost"].mean == pytest.approx((5 + 3 + 1) / 3)
    with pytest.raises(ValueError, match="at least one"):
        oracle_system([], QIDS)


def test_oracle_minimum_paths_counts_a_path_only_where_every_question_has_it():
    assert minimum_paths()[:3] == ["L,L,L,L,L", "M,M,M,M,M", "H,H,H,H,H"]
    assert minimum_paths()[3:5] == ["L,M,M,M,M", "H,M,M,M,M"] and minimum_paths()[-1] == "M,M,M,M,H"
    assert len(set(minimum_paths())) == 13

    def fixed(path: str) -> SystemRuns:
        recs = [{**_rec(q, "MID", 0.1, 1.0), "tiers": path.split(",")} for q in QIDS]
        return SystemRuns(path, "baseline", [Run(path, recs)])

    systems = [fixed(p) for p in minimum_paths()[:-1]]
    # a router that takes the last minimum path on two of the three questions does not complete the set
    tiers = [["M", "M", "M", "M", "H"], ["M", "M", "M", "M", "H"], ["L", "M", "H", "M", "L"]]
    recs = [{**_rec(q, "MID", 0.2, 1.0), "tiers": t} for q, t in zip(QIDS, tiers, strict=True)]
    router = SystemRuns("router", "router", [Run("router", recs)])
    o = oracle_system([*systems, router], QIDS)
    assert o.params["minimum_paths_missing"] == ["M,M,M,M,H"]
    assert oracle_system([*systems, fixed("M,M,M,M,H")], QIDS).params["minimum_paths_missing"] == []


# ------------------------------------------------------------------------------------------
# Bootstrap and report plumbing
# ------------------------------------------------------------------------------------------

N = 30
IDS = [f"q{i}" for i in range(N)]


def _noisy(name, kind, f1, cost, noise_seed, params=None):
    rng = np.random.default_rng(noise_seed)
    f1s = np.clip(f1 + rng.normal(0, 0.1, N), 0, 1)
    costs = cost + rng.normal(0, 0.1, N)
    recs = [
        {**_rec(q, "MID", float(v), float(k)), "tiers": ["MID"] * 5}
        for q, v, k in zip(IDS, f1s, costs, strict=True)
    ]
    return summarise(SystemRuns(name, kind, [Run(name, recs)], params or {}), IDS, n_boot=300)


def test_constant_values_give_degenerate_intervals_at_the_hand_computed_point():
    def flat(name, kind, f1, cost):
        recs = [_rec(q, "MID", f1, cost) for q in IDS]
        return summarise(SystemRuns(name, kind, [Run(name, recs)], {}), IDS, n_boot=100)

    sums = [
        flat("all-low", "baseline", 0.2, 1.0),
        flat("all-high", "baseline", 0.6, 5.0),
        flat("r", "router", 0.5, 2.0),
    ]
    rm = compute_router_metrics(sums, "f1", costs=("module_cost",))
    fam = next(f for f in rm.families if f.family == "routers")
    # curve (0,0) (0.25,0.75) (1,1): 0.09375 + 0.75*(0.75+1)/2 = 0.75; every replicate is the same
    assert (fam.apgr.mean, fam.apgr.lo, fam.apgr.hi) == pytest.approx((0.75, 0.75, 0.75))
    assert fam.apgr.n == 100
    assert fam.cpt[0.5].mean == pytest.approx(1 / 6)
    # AIQ: hull (1,.2) (2,.5) flat .5 to 5 -> (0.35 + 3*0.5)/4 = 0.4625
    assert fam.aiq.mean == pytest.approx(0.4625)


def test_paired_bootstrap_and_outputs(tmp_path):
    low = _noisy("all-low", "baseline", 0.2, 1.0, 1)
    high = _noisy("all-high", "baseline", 0.6, 5.0, 2)
    # a router whose records equal all-high's: paired, its PGR and cost share are 1 in every replicate
    twin = _noisy("router λ=0", "router", 0.6, 5.0, 2, {"cost_lambda": 0.0})
    cheap = _noisy("router λ=1", "router", 0.5, 2.0, 3, {"cost_lambda": 1.0})
    rep = analyse([low, high, twin, cheap])
    rm = rep.router_metrics
    assert (rm.low, rm.high) == ("all-low", "all-high")
    pg = rm.per_system["router λ=0"]["pgr"]
    assert (pg.mean, pg.lo, pg.hi) == pytest.approx((1.0, 1.0, 1.0))
    cs = rm.per_system["router λ=0"]["cost_share_module_cost"]
    assert (cs.lo, cs.hi) == pytest.approx((1.0, 1.0))
    fam = next(f for f in rm.families if f.family == "routers" and f.cost == "module_cost")
    assert fam.apgr.lo < fam.apgr.mean < fam.apgr.hi
    assert {f.cost for f in rm.families} == {"module_cost", "total_cost"}
    text = "\n".join(format_router_metrics(rm))
    assert "APGR" in text and "CPT(80%)" in text and "routers" in text
    row = next(r for r in csv_rows(rep) if r["system"] == "router λ=1")
    assert row["pgr"] == pytest.approx(rm.per_system["router λ=1"]["pgr"].mean)
    assert family_rows(rm)[0]["apgr"] == rm.families[0].apgr.mean
    assert (
        report_dict(rep)["router_metrics"]["families"][0]["cpt"]["0.8"]["mean"]
        == rm.families[0].cpt[0.8].mean
    )


def test_each_labelled_run_is_its_own_family_so_a_dominated_run_does_not_pull_the_other_down():
    def flat(name, kind, f1, cost, params=None):
        recs = [_rec(q, "MID", f1, cost) for q in IDS]
        return summarise(SystemRuns(name, kind, [Run(name, recs)], params or {}), IDS, n_boot=50)

    sums = [
        flat("all-low", "baseline", 0.2, 1.0),
        flat("all-high", "baseline", 0.6, 5.0),
        flat("run6 λ=0", "router", 0.5, 2.0, {"label": "run6", "cost_lambda": 0.0}),
        # run3 is dearer and worse than run6's point: a dip in the joint curve
        flat("run3 λ=0", "router", 0.3, 3.0, {"label": "run3", "cost_lambda": 0.0}),
    ]
    rm = compute_router_metrics(sums, "f1", costs=("module_cost",))
    fams = {f.family: f for f in rm.families}
    assert set(fams) == {"routers", "baselines", "run6", "run3"}  # no oracle system given
    assert fams["run6"].members == ["run6 λ=0"] and fams["run3"].members == ["run3 λ=0"]
    # run6 alone: curve (0,0) (0.25,0.75) (1,1) -> 0.75 (as in the hand case above)
    assert fams["run6"].apgr.mean == pytest.approx(0.75)
    # run3 alone: (0,0) (0.5,0.25) (1,1): 0.0625 + 0.3125 = 0.375
    assert fams["run3"].apgr.mean == pytest.approx(0.375)
    # both joined: (0,0) (0.25,0.75) (0.5,0.25) (1,1): 0.09375 + 0.125 + 0.3125 = 0.53125
    assert fams["routers"].apgr.mean == pytest.approx(0.53125)
    # one label only (or none): no extra family
    one = compute_router_metrics(sums[:3], "f1", costs=("module_cost",))
    assert {f.family for f in one.families} == {"routers", "baselines"}


def test_missing_end_and_no_gap_are_explained():
    high = _noisy("all-high", "baseline", 0.6, 5.0, 2)
    rm = compute_router_metrics([high], "f1")
    assert rm.families == [] and "need both" in rm.notes[0]
    low = _noisy("all-low", "baseline", 0.7, 1.0, 1)
    rm = compute_router_metrics([low, high], "f1")
    assert any("no performance gap" in n for n in rm.notes)
    assert all(math.isnan(f.apgr.mean) for f in rm.families)
