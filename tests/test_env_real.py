"""A tiny real env: MiniLM, the real LoCoMo question bank, the real implementation pipeline.

The LLM (HIGH tiers and answers) is the fake backend so the test stays within seconds once
the models are loaded; everything else (memory, retrieval, spaCy LOW tiers, encoder MID
tiers, answer prompts, F1 scoring, cost metering) is the production code path.
"""

from __future__ import annotations

import warnings

import pytest

from envs.components import make_components
from envs.factory import make_env
from envs.question_bank import question_bank_from
from envs.rollout import evaluate_policy, summarize_records
from modules.tier import MODULE_ORDER, Tier

CFG = {
    "benchmark": {"name": "locomo"},
    "strategy": {"name": "implementation"},
    "encoder": "minilm",
    "backend": {"name": "fake", "model_id": "fake-llm"},
    "question_bank": {"k": 5, "limit": 3, "max_samples": 1, "seed": 0},
    "cost": {"unit": "gflops", "lambda": 0.1},
    "cache": {"path": ":memory:"},
}


@pytest.mark.slow
@pytest.mark.data
def test_tiny_real_env_passes_checkers(tmp_path):
    from common.datadir import DataFileError, data_file

    try:
        data_file("locomo10.json")
    except DataFileError as exc:
        pytest.skip(f"benchmark data not available: {exc}")
    from gymnasium.utils.env_checker import check_env as gym_check
    from stable_baselines3.common.env_checker import check_env as sb3_check

    cfg = {**CFG, "question_bank": {**CFG["question_bank"], "cache_dir": str(tmp_path)}}
    comps = make_components(cfg)
    items = question_bank_from(cfg, "train", comps.encoder, progress=False)
    assert len(items) == 3 and all(len(it.evidence) == 5 for it in items)
    env = make_env(cfg, items=items, components=comps, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # checker advice (e.g. about float bounds) is not a failure here
        gym_check(env, skip_render_check=True)
        sb3_check(env, warn=True)
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    for _ in MODULE_ORDER:
        obs, _reward, term, _, info = env.step(Tier.MID)
    assert term and set(info["tiers"]) == set(MODULE_ORDER)
    assert info["cost"]["module"] > 0 and 0.0 <= info["f1"] <= 1.0
    # Tiers are genuinely different computations: LOW vs MID vs HIGH cost differ on real inputs.
    costs = {}
    for tier in Tier:
        recs = evaluate_policy(lambda o, m, t=tier: t, items, comps, progress=False)
        costs[tier] = summarize_records(recs)["overall"]["module_cost"]
    assert len(set(costs.values())) == 3, costs
    comps.close()
