"""Fixed-tier and random baselines share the router's decide(obs, module) -> Tier interface."""

from __future__ import annotations

import numpy as np
import pytest

from envs.fakes import make_fake_bank, make_fake_components
from envs.rollout import evaluate_policy
from modules.tier import MODULE_ORDER, Tier
from policies.baselines import FixedTierPolicy, RandomPolicy, get_baseline, get_policy

OBS = np.zeros(8, np.float32)


@pytest.mark.parametrize(
    ("name", "tier"), [("all-low", Tier.LOW), ("all-mid", Tier.MID), ("all-high", Tier.HIGH)]
)
def test_all_tier_baselines(name, tier):
    policy = get_baseline(name)
    assert [policy.decide(OBS, m) for m in MODULE_ORDER] == [tier] * 5
    assert policy.name == name


def test_fixed_tuple_baseline_per_module():
    policy = get_baseline("fixed:L,M,H,mid,2")
    assert [policy.decide(OBS, m) for m in MODULE_ORDER] == [
        Tier.LOW,
        Tier.MID,
        Tier.HIGH,
        Tier.MID,
        Tier.HIGH,
    ]
    assert policy.name == "fixed:L,M,H,M,H"
    assert get_baseline(policy.name).tiers == policy.tiers


@pytest.mark.parametrize(
    ("name", "match"),
    [
        ("all-best", "unknown baseline"),
        ("fixed:L,M", "needs 5 tiers"),
        ("fixed:L,M,H,M,X", "unknown tier 'X'"),
        ("fixed:", "needs tiers"),
        ("random:abc", "seed must be an integer"),
        ("all-low:3", "takes no argument"),
    ],
)
def test_bad_baseline_names_are_clear(name, match):
    with pytest.raises(ValueError, match=match):
        get_baseline(name)


def test_unknown_module_is_an_error():
    with pytest.raises(ValueError, match="unknown module 'retrieval'"):
        FixedTierPolicy(Tier.LOW).decide(OBS, "retrieval")
    with pytest.raises(ValueError, match="unknown module"):
        RandomPolicy(0).decide(OBS, "retrieval")


def test_random_policy_is_seeded_and_covers_all_tiers():
    def draw(seed):
        policy = RandomPolicy(seed)
        return [policy.decide(OBS, m) for m in MODULE_ORDER * 40]

    draws = [draw(7), draw(7)]
    assert draws[0] == draws[1]
    other = draw(8)
    assert other != draws[0]
    counts = np.bincount([int(t) for t in draws[0]], minlength=3) / len(draws[0])
    assert np.all(np.abs(counts - 1 / 3) < 0.1)
    skewed = RandomPolicy(0, probs=[0.0, 0.0, 1.0])
    assert {skewed.decide(OBS, "filter") for _ in range(20)} == {Tier.HIGH}
    with pytest.raises(ValueError, match="summing to 1"):
        RandomPolicy(0, probs=[0.5, 0.5, 0.5])
    assert get_baseline("random:7").seed == 7


def test_parse_tier_short_forms():
    assert [Tier.parse(x) for x in ("l", "M", " h ", "LOW", 1, Tier.HIGH)] == [
        Tier.LOW,
        Tier.MID,
        Tier.HIGH,
        Tier.LOW,
        Tier.MID,
        Tier.HIGH,
    ]


def test_baselines_run_through_the_evaluation_loop():
    """The baselines plug straight into envs.rollout.evaluate_policy; cost grows with the tier."""
    items = make_fake_bank(2)
    comps = make_fake_components()
    costs = {}
    for name in ("all-low", "all-mid", "all-high", "fixed:L,L,H,L,L", "random:0"):
        records = evaluate_policy(get_baseline(name).decide, items, comps, progress=False)
        assert len(records) == len(items)
        costs[name] = float(np.mean([r.module_cost for r in records]))
        if name.startswith(("all-", "fixed")):
            assert all(r.tiers == get_baseline(name).tiers for r in records)
    assert costs["all-low"] < costs["fixed:L,L,H,L,L"] < costs["all-high"]
    assert costs["all-low"] < costs["all-mid"] < costs["all-high"]


def test_get_policy_names_baselines_and_routers(tmp_path):
    assert get_policy("all-high").tiers == (Tier.HIGH,) * 5
    with pytest.raises(ValueError, match="needs a path"):
        get_policy("router:")
    from policies.router import RouterLoadError

    with pytest.raises(RouterLoadError, match="neither a directory nor a zip"):
        get_policy(f"router:{tmp_path / 'missing'}")
