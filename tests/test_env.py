"""MemoryRouterEnv: API checkers, observation layout, determinism, info contents."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest

import envs
from common.cost_weight import CostWeight
from envs.fakes import OPTIMAL_TIERS, TIER_COSTS, make_fake_bank, make_fake_components, question_type
from envs.observation import DEFAULT_SCALARS, ObservationBuilder, ObservationSpec
from envs.reward import RewardShaper
from envs.router_env import MemoryRouterEnv
from modules.cache import CallCache
from modules.tier import MODULE_ORDER, Tier


def make_env(lam: float = 0.3, seed: int | None = 0, cache=None, **kw) -> MemoryRouterEnv:
    comps = make_fake_components(cost_weight=CostWeight(lam), cache=cache, **kw)
    return MemoryRouterEnv(make_fake_bank(4), comps, RewardShaper(), seed=seed)


def test_gymnasium_env_checker():
    from gymnasium.utils.env_checker import check_env

    env = make_env()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the checker warns about anything dubious: treat as failure
        check_env(env, skip_render_check=True)


def test_sb3_env_checker():
    from stable_baselines3.common.env_checker import check_env

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(make_env(), warn=True)


def test_spaces_and_episode_shape():
    env = make_env()
    assert env.action_space == gym.spaces.Discrete(3)
    spec = env.components.obs_builder.spec
    assert env.observation_space.shape == (spec.dim,)
    obs, info = env.reset(seed=1)
    assert info["module"] == "filter"
    modules, rewards = [], []
    for t in range(len(MODULE_ORDER)):
        assert spec.module_index(obs) == t
        assert env.observation_space.contains(obs)
        obs, r, term, trunc, info = env.step(Tier.LOW)
        modules.append(info["module"])
        rewards.append(r)
        assert not trunc
        assert term == (t == len(MODULE_ORDER) - 1)
    assert tuple(modules) == MODULE_ORDER
    assert rewards[:-1] == [0.0] * 4  # reward only on the last step
    assert not obs.any()  # terminal observation is the zero vector
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)


def test_observation_content():
    env = make_env()
    obs, _ = env.reset(seed=0, options={"index": 0})
    b = env.components.obs_builder
    spec = b.spec
    item = env.items[0]
    np.testing.assert_allclose(
        obs[spec.query_slice], b.encoder.encode([item.question.question])[0], atol=1e-6
    )
    ev_text = "\n".join(e.text for e in item.evidence)
    np.testing.assert_allclose(obs[spec.input_slice], b.encoder.encode([ev_text])[0], atol=1e-6)
    scalars = dict(zip(spec.scalar_names, obs[spec.scalar_slice], strict=True))
    assert scalars["position"] == 0.0 and scalars["cost_so_far"] == 0.0
    assert scalars["cost_lambda"] == pytest.approx(0.3)
    obs2, *_ = env.step(Tier.HIGH)
    s2 = dict(zip(spec.scalar_names, obs2[spec.scalar_slice], strict=True))
    assert s2["position"] == pytest.approx(0.25)
    assert s2["cost_so_far"] == pytest.approx(np.log1p(TIER_COSTS[Tier.HIGH]))
    # the entity module's input is the filter's output, not the evidence
    assert not np.allclose(obs2[spec.input_slice], obs[spec.input_slice])


def test_observation_spec_round_trip_and_errors():
    spec = ObservationSpec(embed_dim=8)
    assert spec.dim == 5 + 16 + len(DEFAULT_SCALARS)
    assert ObservationSpec.from_dict(spec.to_dict()) == spec
    widths = [
        s.stop - s.start for s in (spec.module_slice, spec.query_slice, spec.input_slice, spec.scalar_slice)
    ]
    assert widths == [5, 8, 8, len(DEFAULT_SCALARS)] and spec.scalar_slice.stop == spec.dim
    custom = ObservationSpec(embed_dim=4, scalar_names=("a", "b"))
    assert ObservationSpec.from_dict(custom.to_dict()) == custom
    with pytest.raises(ValueError, match="n_scalars"):
        ObservationSpec(embed_dim=4, scalar_names=("a",), n_scalars=2)
    with pytest.raises(ValueError, match="embed_dim"):
        ObservationSpec.from_dict({"n_modules": 5})
    from memory.encoder import get_encoder

    with pytest.raises(ValueError, match="dim"):
        ObservationBuilder(spec, get_encoder("hashing"))
    b = ObservationBuilder(ObservationSpec(embed_dim=384), get_encoder("hashing"))
    q = np.zeros(384, np.float32)
    with pytest.raises(ValueError, match="scalars"):
        b.build(0, q, "x", {"position": 0.0})
    with pytest.raises(ValueError, match="module_index"):
        b.build(5, q, "x", dict.fromkeys(DEFAULT_SCALARS, 0.0))
    with pytest.raises(ValueError, match="query_emb"):
        b.build(0, q[:3], "x", dict.fromkeys(DEFAULT_SCALARS, 0.0))


def run_fixed(env: MemoryRouterEnv, tiers, seed=None, options=None):
    env.reset(seed=seed, options=options)
    for t in tiers:
        _obs, r, term, _, info = env.step(t)
    assert term
    return r, info


def test_terminal_info_contents(tmp_path):
    env = make_env(lam=0.5, cache=CallCache(tmp_path / "c.sqlite"))
    idx = next(i for i, it in enumerate(env.items) if question_type(it.question.question) == "when")
    tiers = OPTIMAL_TIERS["when"]
    r, info = run_fixed(env, tiers, options={"index": idx})
    assert info["tiers"] == {m: t.name for m, t in zip(MODULE_ORDER, tiers, strict=True)}
    expected_module = sum(TIER_COSTS[t] for t in tiers)
    assert info["cost"]["module"] == pytest.approx(expected_module)
    assert info["cost"]["per_module"]["temporal"] == TIER_COSTS[Tier.HIGH]
    assert info["cost"]["answer"] > 0  # the fake LLM's answer call is priced by the real CostModel
    assert info["cost"]["total"] == pytest.approx(expected_module + info["cost"]["answer"])
    assert info["cost"]["reward_cost"] == pytest.approx(expected_module)  # answer excluded by default
    assert info["f1"] == 1.0 and info["em"] == 1.0
    assert info["judge"] is None
    assert info["cache_hit_rate"] == 0.0  # cold cache
    terms = info["reward_terms"]
    assert r == pytest.approx(terms["r_task"] + terms["cost_lambda"] * terms["alpha"] * terms["r_cost"])
    assert info["record"].question_id == env.items[idx].question.question_id
    assert info["record"].reward == pytest.approx(r)
    _, info2 = run_fixed(env, tiers, options={"index": idx})
    assert info2["cache_hit_rate"] == 1.0  # same answer prompt: replayed
    # the wrong tier for the temporal module fails the question
    _, info3 = run_fixed(env, [Tier.LOW] * 5, options={"index": idx})
    assert info3["f1"] == 0.0


def test_include_answer_cost_option():
    comps = make_fake_components(cost_weight=CostWeight(0.5), include_answer_cost=True)
    env = MemoryRouterEnv(make_fake_bank(2), comps, RewardShaper(), seed=0)
    _, info = run_fixed(env, [Tier.MID] * 5)
    assert info["cost"]["reward_cost"] == pytest.approx(info["cost"]["total"])
    assert info["cost"]["reward_cost"] > info["cost"]["module"]


def test_question_order_is_seeded_and_covers_bank():
    env = make_env(seed=None)

    def order(seed, n):
        ids = [env.reset(seed=seed)[1]["question_id"]]
        for _ in range(n - 1):
            for _ in range(5):
                env.step(0)
            ids.append(env.reset()[1]["question_id"])
        for _ in range(5):
            env.step(0)
        return ids

    n = len(env.items)
    a, b, c = order(3, n), order(3, n), order(4, n)
    assert a == b
    assert a != c
    assert sorted(a) == sorted(it.question.question_id for it in env.items)  # one epoch = a permutation


def trajectory(env: MemoryRouterEnv, seed: int, n_episodes: int):
    rng = np.random.default_rng(123)
    out = []
    obs, _ = env.reset(seed=seed)
    for _ in range(n_episodes):
        while True:
            a = int(rng.integers(3))
            obs2, r, term, _, _ = env.step(a)
            out.append((obs.copy(), a, r))
            obs = obs2
            if term:
                break
        obs, _ = env.reset()
    return out


def test_determinism_same_seed_warm_cache(tmp_path):
    cache_path = tmp_path / "calls.sqlite"
    env1 = make_env(lam=0.4, seed=None, cache=CallCache(cache_path))
    t1 = trajectory(env1, seed=7, n_episodes=12)
    env2 = make_env(lam=0.4, seed=None, cache=CallCache(cache_path))  # warm cache, fresh shaper
    t2 = trajectory(env2, seed=7, n_episodes=12)
    assert len(t1) == len(t2) == 60
    for (o1, a1, r1), (o2, a2, r2) in zip(t1, t2, strict=True):
        np.testing.assert_array_equal(o1, o2)
        assert a1 == a2 and r1 == r2


def test_bad_actions_and_args():
    env = make_env()
    env.reset(seed=0)
    # The action is checked once, at the env boundary, against the action space (as in CartPole).
    for bad in (3, -1, 1.5, 2.0, "HIGH", Tier.HIGH.name, [0, 1], np.array([1]), np.float32(1), None):
        with pytest.raises(ValueError, match=r"action must be an integer in Discrete\(3\)"):
            env.step(bad)
    env.step(np.int64(2))  # numpy scalars are fine
    env.step(np.array(1))
    with pytest.raises(ValueError, match="index"):
        env.reset(options={"index": 999})
    comps = make_fake_components()
    with pytest.raises(ValueError, match="non-empty"):
        MemoryRouterEnv([], comps, RewardShaper())
    with pytest.raises(ValueError, match="task_metric"):
        MemoryRouterEnv(make_fake_bank(1), comps, RewardShaper(), task_metric="bleu")
    with pytest.raises(ValueError, match="judge"):
        MemoryRouterEnv(make_fake_bank(1), comps, RewardShaper(), task_metric="judge")


def test_registered_ids():
    for env_id in ("BudgetRouter-LoCoMo-v0", "BudgetRouter-LongMemEval-v0", "BudgetRouter-HotpotQA-v0"):
        assert env_id in gym.registry
        assert gym.registry[env_id].kwargs["benchmark"] == envs.ENV_IDS[env_id]


def test_gym_make_with_prebuilt_parts():
    comps = make_fake_components()
    env = gym.make(
        "BudgetRouter-LoCoMo-v0",
        config={"cost": {"lambda": 0.0}},
        items=make_fake_bank(1),
        components=comps,
        seed=0,
    )
    obs, _ = env.reset(seed=0)
    assert obs.shape == (comps.obs_builder.spec.dim,)
    with pytest.raises(ValueError, match="benchmark"):
        gym.make(
            "BudgetRouter-LoCoMo-v0",
            config={"benchmark": {"name": "hotpotqa"}},
            items=make_fake_bank(1),
            components=comps,
        )


def test_state_dict_resumes_exactly():
    import json

    env = make_env(lam=0.4, seed=5)
    for _ in range(7):  # part-way through the first epoch of the 12-question bank
        env.reset()
        for _ in range(5):
            env.step(1)
    state = json.loads(json.dumps(env.state_dict()))
    expected = trajectory_from_current(env, 9)
    resumed = make_env(lam=0.4, seed=999)
    resumed.load_state_dict(state)
    got = trajectory_from_current(resumed, 9)
    assert got == expected
    with pytest.raises(ValueError, match="questions"):
        MemoryRouterEnv(make_fake_bank(1), make_fake_components(), RewardShaper()).load_state_dict(state)


def trajectory_from_current(env: MemoryRouterEnv, n: int):
    out = []
    for i in range(n):
        _, info = env.reset()
        for _ in range(5):
            *_, r, _, _, _ = env.step(i % 3)
        out.append((info["question_id"], r))
    return out


def test_max_tier_narrows_the_action_space():
    comps = make_fake_components(cost_weight=CostWeight(0.3))
    env = MemoryRouterEnv(make_fake_bank(4), comps, RewardShaper(), seed=0, max_tier=Tier.MID)
    assert env.action_space == gym.spaces.Discrete(2)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"Discrete\(2\) \(0 LOW, 1 MID\), got 2"):
        env.step(2)
    done, info = False, {}
    while not done:
        _, _, done, _, info = env.step(1)
    assert set(info["tiers"].values()) == {"MID"}
