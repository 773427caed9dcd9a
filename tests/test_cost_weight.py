"""The cost weight λ (common.cost_weight.CostWeight): range checks, config parsing, seeded draws, metadata."""

from __future__ import annotations

import math

import numpy as np
import pytest

from common.config_error import ConfigError
from common.cost_weight import CostWeight, check_lambda


def test_range_check_names_the_value():
    assert check_lambda("0.25") == 0.25 and check_lambda(0) == 0.0
    for bad, match in [(-0.1, "must be finite and >= 0"), (math.inf, "must be finite"),
                       (math.nan, "must be finite"), ("abc", "must be a number"), (None, "must be a number")]:
        with pytest.raises(ValueError, match=f"my λ {match}"):
            check_lambda(bad, "my λ")
    with pytest.raises(ValueError, match=r"cost_lambdas\[1\] must be finite and >= 0, got -1"):
        CostWeight(0.0, (0.5, -1))
    with pytest.raises(ValueError, match="cost_lambda must be a number >= 0, got 'x'"):
        CostWeight("x")  # type: ignore[arg-type]


def test_from_config_names_the_config_key_and_value():
    assert CostWeight.from_config(None) == CostWeight(0.0)
    assert CostWeight.from_config({"lambda": 0.3, "unit": "usd"}) == CostWeight(0.3)
    conditioned = CostWeight.from_config({"lambda": 0.1, "lambdas": [0.9, 0, "0.5"]})
    assert conditioned == CostWeight(0.1, (0.0, 0.5, 0.9))
    for cost, match in [
        ({"lambda": -1}, r"config cost.lambda must be finite and >= 0, got -1"),
        ({"lambda": "abc"}, r"config cost.lambda must be a number >= 0, got 'abc'"),
        ({"lambdas": [0, math.nan]}, r"config cost.lambdas\[1\] must be finite"),
        ({"lambdas": "0,1"}, "must be a list of numbers"),
        ({"lambdas": []}, "is empty"),
        ({"lambdas": [0.2, 0.2]}, "repeated"),
        ({"lambdas": [0.4]}, "a single-λ run sets cost.lambda=0.4"),
    ]:
        with pytest.raises(ConfigError, match=match):
            CostWeight.from_config(cost)


def test_seeded_draws_are_deterministic_and_single_lambda_draws_nothing():
    weight = CostWeight(0.0, (0.0, 0.5, 0.9))

    def draws(seed: int) -> list[float]:
        rng = np.random.default_rng(seed)
        return [weight.sample(rng) for _ in range(200)]

    a = draws(3)
    assert a == draws(3) and a != draws(4)
    assert set(a) == set(weight.choices) and weight.conditioned and weight.values == (0.0, 0.5, 0.9)
    # A single-λ weight leaves the RNG untouched (the env's question order shares it).
    single, rng = CostWeight(0.3), np.random.default_rng(0)
    state = rng.bit_generator.state
    assert single.sample(rng) == 0.3 and rng.bit_generator.state == state
    assert not single.conditioned and single.values == (0.3,)


def test_metadata_round_trip_and_old_exports():
    weight = CostWeight(0.1, (0.0, 0.9))
    meta = weight.to_metadata()
    assert meta == {"cost_lambda": 0.1, "cost_lambdas": [0.0, 0.9]}
    assert CostWeight.from_metadata(meta) == weight
    # Routers exported before λ-conditioning have no cost_lambdas; the oldest no cost_lambda either.
    assert CostWeight.from_metadata({"cost_lambda": 0.5}) == CostWeight(0.5)
    assert CostWeight.from_metadata({}) == CostWeight(0.0)


def test_routing_lambda_checks():
    single = CostWeight(0.5)
    assert single.for_routing(None) == 0.5 == single.for_routing(0.5)
    with pytest.raises(ValueError, match=r"single λ=0\.5; it cannot route at cost_lambda=0\.2"):
        single.for_routing(0.2)
    cond = CostWeight(0.0, (0.0, 1.0))
    assert cond.for_routing(0.3) == 0.3
    with pytest.raises(ValueError, match="pass cost_lambda"):
        cond.for_routing(None)
    with pytest.raises(ValueError, match="outside the range"):
        cond.for_routing(2.0)
    with pytest.raises(ValueError, match="cost_lambda must be finite"):
        cond.for_routing(-0.5)
