"""The main job's closing verdict: is the router more than a fixed tier path?"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from modules.tier import MODULE_ORDER, Tier
from policies.training.verdict import fixed_path, fixed_path_verdict

L, M, H = Tier.LOW, Tier.MID, Tier.HIGH


def _shares(path):
    pairs = zip(MODULE_ORDER, path, strict=True)
    return {f"{m}/{t.name.lower()}": float(t == p) for m, p in pairs for t in Tier}


def test_fixed_path_only_when_every_module_always_takes_one_tier():
    assert fixed_path(_shares((L,) * 5)) == (L,) * 5
    assert fixed_path(_shares((L, M, H, M, L))) == (L, M, H, M, L)
    routed = _shares((L,) * 5) | {"summary/low": 0.7, "summary/high": 0.3}
    assert fixed_path(routed) is None


def _records(f1s, cost):
    return [SimpleNamespace(f1=f, module_cost=cost, task_score=lambda metric, f=f: f) for f in f1s]


# Per-question F1 of each uniform path on three validation questions (hand-made).
F1 = {L: [0.5, 0.0, 0.2], M: [0.4, 0.1, 0.2], H: [0.3, 0.6, 0.0]}
COST = {L: 1.0, M: 2.0, H: 10.0}


def _verdict(path, lambdas=(0.0,)):
    ran = []

    def run(p):
        ran.append(p)
        return _records(F1[p[0]], COST[p[0]])

    def objective(recs, lam):  # task minus λ·cost: a stand-in for the shaped validation reward
        return sum(r.f1 - lam * r.module_cost for r in recs) / len(recs)

    return fixed_path_verdict(path, run, objective, lambdas, "f1", 300), ran


def test_verdict_measures_every_uniform_path_and_the_oracle():
    v, ran = _verdict((L,) * 5)
    assert ran == [(t,) * 5 for t in Tier]  # the router's own path is one of them: run once
    rows = {r["path"]: r for r in v["rows"]}
    assert rows["all-high"]["f1"] == pytest.approx(0.3) and rows["all-low"]["module_cost"] == 1.0
    # oracle: per question the best of the three paths -> (0.5 + 0.6 + 0.2) / 3
    assert v["oracle_score"] == pytest.approx(1.3 / 3)
    assert v["questions_improvable"] == 1 and v["n"] == 3
    # at λ = 0 all-HIGH (0.3) beats all-LOW (0.233): the advice is to train longer
    assert "all-high scores a higher objective" in v["lines"][-2] and "300 timesteps" in v["lines"][-2]


def test_verdict_says_the_fixed_path_is_the_best_when_dearer_paths_do_not_pay():
    v, _ = _verdict((L,) * 5, lambdas=(0.1,))
    why = v["lines"][-2]
    assert why.startswith("why: no fixed path scores a higher validation objective at λ = 0.1")
    assert "+0.0667 F1" in why  # all-HIGH's F1 gain over all-LOW, at 10x the module cost


def test_verdict_compares_each_lambda_not_the_mean_over_lambda():
    # all-HIGH beats all-LOW at λ = 0 (0.3 vs 0.233) but loses at λ = 0.1 and on the mean over both
    v, _ = _verdict((L,) * 5, lambdas=(0.0, 0.1))
    why = v["lines"][-2]
    assert why.startswith("why: at λ = 0, all-high scores a higher objective (0.3000 vs 0.2333)")
    assert "λ = 0.1" not in why and "300 timesteps" in why
    assert v["lines"][1].endswith("(mean over λ)")


def test_verdict_adds_a_non_uniform_router_path():
    v, ran = _verdict((L, L, L, L, M))
    assert ran[-1] == (L, L, L, L, M) and v["router_path"] == "fixed:L,L,L,L,M"


def test_final_lines_say_when_no_validation_has_run():
    from policies.training.loop import final_lines

    assert final_lines(None, validated=False)[0].startswith("router: not validated yet")
    assert final_lines(None, validated=True) == ["router: routes by question, not a fixed tier path"]
    assert final_lines({"lines": ["router: a fixed path"]}, validated=True) == ["router: a fixed path"]
