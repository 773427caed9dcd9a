import itertools

import pytest

from evaluation.tier_search import ALL_HIGH, search_fixed_tiers
from modules.tier import Tier, tiers_label

COST = {Tier.LOW: 0.0, Tier.MID: 1.0, Tier.HIGH: 10.0}
# quality gain per module (filter, entity, temporal, topic, summary) at MID and HIGH
GAIN = [(0.1, 0.3), (0.0, 0.05), (0.02, 0.2), (0.0, 0.01), (0.05, 0.26)]


def additive(tiers):
    q = sum(0.0 if t == Tier.LOW else GAIN[i][int(t) - 1] for i, t in enumerate(tiers))
    return q, sum(COST[t] for t in tiers)


def test_greedy_finds_hand_computed_optimum_with_few_evaluations():
    # budget = 0.5 * 50 = 25: two HIGHs at most. Best: filter H, summary H, temporal M (q .58, cost 21);
    # entity/topic MID add nothing and cost 1, so the cheaper tuple wins the tie.
    res = search_fixed_tiers(additive, budget_frac=0.5)
    assert tiers_label(res.best) == "H,L,M,L,H"
    assert res.quality == pytest.approx(0.58) and res.cost == 21.0 and res.budget == 25.0
    assert len(res.trace) < 40
    assert res.trace[0][0] == "H,H,H,H,H" and res.trace[1][0] == "L,L,L,L,L"
    exhaustive = search_fixed_tiers(additive, budget_frac=0.5, method="exhaustive")
    assert exhaustive.best == res.best and len(exhaustive.trace) == 243
    # brute-force check of the optimum, independent of the search code
    feasible = [t for t in itertools.product(list(Tier), repeat=5) if additive(t)[1] <= 25]
    best = max(feasible, key=lambda t: (additive(t)[0], -additive(t)[1]))
    assert best == res.best


def test_budget_one_allows_all_high_and_candidates_method():
    assert search_fixed_tiers(additive, budget_frac=1.0, method="exhaustive").best == ALL_HIGH
    res = search_fixed_tiers(additive, method="candidates", candidates=[("M",) * 5, ("high", 0, 0, 0, 0)])
    assert [t for t, _, _ in res.trace] == ["H,H,H,H,H", "L,L,L,L,L", "M,M,M,M,M", "H,L,L,L,L"]
    assert tiers_label(res.best) == "H,L,L,L,L"  # .3 at cost 10 beats .18 at cost 5


def test_search_errors():
    with pytest.raises(ValueError, match="unknown search method"):
        search_fixed_tiers(additive, method="anneal")
    with pytest.raises(ValueError, match="budget_frac"):
        search_fixed_tiers(additive, budget_frac=0)
    with pytest.raises(ValueError, match="expected 5"):
        search_fixed_tiers(additive, method="candidates", candidates=[("L", "L")])
