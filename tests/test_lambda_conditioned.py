"""λ-conditioned training (``cost.lambdas``): one router for every λ of a sweep.

Config parsing and run names, the env's per-episode λ draw, the reward at the drawn λ, the
router's λ checks, frontier points, a training run with per-λ validation, and PPO learning
λ-dependent routing on the synthetic task.
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
import torch

from common.config_error import ConfigError
from common.cost_weight import CostWeight
from envs.config_schema import AlphaConfig, CostConfig
from envs.fakes import make_fake_bank, make_fake_components
from envs.reward import RewardShaper
from envs.router_env import MemoryRouterEnv
from modules.tier import Tier
from policies.router import Router
from policies.training.config import lam_tag, load_config
from tests.support import TINY_TRAIN_OVERRIDES, needs_locomo

LAMS = (0.0, 0.5, 0.9)


def _env(lams=LAMS, seed=0, shaper_lam=0.0) -> MemoryRouterEnv:
    comps = make_fake_components(cost_weight=CostWeight(shaper_lam, lams))
    return MemoryRouterEnv(make_fake_bank(3), comps, RewardShaper(), seed=seed)


def _episode(env: MemoryRouterEnv, tier: Tier = Tier.HIGH, **reset_kw):
    obs, info0 = env.reset(**reset_kw)
    observations = [obs]
    done = False
    while not done:
        obs, reward, done, _, info = env.step(int(tier))
        if not done:
            observations.append(obs)
    return observations, info0, reward, info


# ------------------------------------------------------------------ config
def test_parse_cost_lambdas_accepts_lists_and_names_bad_values():
    def parse_cost_lambdas(value):
        return CostWeight.from_config({"lambdas": value}).choices

    assert parse_cost_lambdas(None) == ()
    assert parse_cost_lambdas([0.9, 0, "0.1"]) == (0.0, 0.1, 0.9)
    for bad, match in [
        ("0,0.1", "must be a list"),
        ([0, -0.1], r"cost.lambdas\[1\] must be finite and >= 0"),
        ([0, float("nan")], r"cost.lambdas\[1\]"),
        ([0, "x"], r"cost.lambdas\[1\] must be a number"),
        ([0.1, 0.1], "repeated"),
        ([0.3], "cost.lambda=0.3"),
        ([], "is empty"),  # issue 15: used to become a silent single λ = 0 run
    ]:
        with pytest.raises(ConfigError, match=match):
            parse_cost_lambdas(bad)


def test_run_names_tell_conditioned_runs_apart():
    assert lam_tag(0.0) == lam_tag(0) == lam_tag("0.00") == "lam0" and lam_tag(0.3, None) == "lam0.3"
    assert lam_tag(0.0, [0.9, 0, 0.05]) == "lamcond0-0.05-0.9"
    cfg = load_config(["cost.lambdas=[0,0.5]", "seed=1"])
    assert cfg["run_name"] == "locomo__implementation__lamcond0-0.5__s1"
    assert load_config(["cost.lambda=0.5"])["run_name"] == "locomo__implementation__lam0.5__s0"


# ------------------------------------------------------------------ env
def test_env_draws_a_lambda_per_episode_and_shows_it_to_the_router():
    env = _env()
    lam_col = env.spec_obs.scalar_slice.start + env.spec_obs.scalar_names.index("cost_lambda")
    drawn = []
    for _ in range(60):
        observations, info0, reward, info = _episode(env, Tier.LOW)
        lam = info0["cost_lambda"]
        assert info["cost_lambda"] == lam == info["record"].cost_lambda
        # every observation of the episode carries its λ; the reward used the same λ
        assert all(o[lam_col] == pytest.approx(lam) for o in observations)
        terms = info["reward_terms"]
        assert terms["cost_lambda"] == lam
        assert reward == pytest.approx(terms["r_task"] + lam * terms["alpha"] * terms["r_cost"])
        if lam == 0.0:
            assert reward == terms["r_task"]
        drawn.append(lam)
    counts = {lam: drawn.count(lam) for lam in LAMS}
    assert set(drawn) == set(LAMS) and min(counts.values()) >= 10, counts


def test_lambda_draws_are_seeded_and_resume_from_state_dict():
    def lams(env, n):
        return [_episode(env)[1]["cost_lambda"] for _ in range(n)]

    a, b = _env(seed=3), _env(seed=3)
    assert lams(a, 12) == lams(b, 12)
    assert lams(_env(seed=3), 12) != lams(_env(seed=4), 12)
    state = json.loads(json.dumps(a.state_dict()))
    c = _env(seed=99)
    c.load_state_dict(state)
    assert lams(a, 10) == lams(c, 10)


def test_reset_option_sets_lambda_and_single_lambda_env_is_unchanged():
    env = _env()
    assert _episode(env, options={"cost_lambda": 0.7})[1]["cost_lambda"] == 0.7
    with pytest.raises(ValueError, match="cost_lambda=-1"):
        env.reset(options={"cost_lambda": -1})
    single = _env(lams=(), shaper_lam=0.3)
    _, info0, _, info = _episode(single)
    assert info0["cost_lambda"] == info["reward_terms"]["cost_lambda"] == 0.3
    with pytest.raises(ValueError, match=r"cost_lambdas\[1\] must be finite"):
        _env(lams=(0.0, -0.5))


def test_conditioned_env_passes_the_gymnasium_checker():
    from gymnasium.utils.env_checker import check_env

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(_env(), skip_render_check=True)


def test_shaper_scores_at_the_given_lambda():
    shaper = RewardShaper()
    for c in (1.0, 5.0, 9.0, 2.0):
        shaper.shape(0.5, c, 0.2)
    base = shaper.evaluate(0.5, 3.0, cost_lambda=0.2)
    assert shaper.evaluate(0.5, 3.0, cost_lambda=0.0) == 0.5
    doubled = shaper.evaluate(0.5, 3.0, cost_lambda=0.4)
    assert doubled - 0.5 == pytest.approx(2 * (base - 0.5))
    reward, terms = shaper.shape(0.5, 3.0, cost_lambda=0.0)
    assert reward == 0.5 and terms["cost_lambda"] == 0.0
    with pytest.raises(ValueError, match="cost_lambda must be finite"):
        shaper.shape(0.5, 3.0, cost_lambda=math.inf)


# ------------------------------------------------------------------ router and frontier
def _export_conditioned(tmp_path, lams=LAMS):
    from stable_baselines3 import PPO

    from policies.export import export_router
    from policies.sb3_policy import router_policy_kwargs

    env = _env(lams)
    comps = env.components
    kw = router_policy_kwargs(comps.obs_builder.spec, hidden=8, latent=8, pi_layers=(8,), vf_layers=(8,))
    model = PPO("MlpPolicy", env, policy_kwargs=kw, n_steps=16, batch_size=16, seed=0, device="cpu")
    meta = {
        "observation_spec": comps.obs_builder.spec.to_dict(),
        "encoder": comps.encoder.name,
        "cost_lambda": 0.0,
        "cost_lambdas": list(lams),
        "seed": 0,
        "config": {"seed": 0, "cost": {"lambda": 0.0, "lambdas": list(lams)}},
    }
    export_router(model, tmp_path / "router", meta, verify=8)
    return tmp_path / "router", comps


def test_conditioned_router_needs_a_lambda_inside_its_range(tmp_path):
    path, comps = _export_conditioned(tmp_path)
    router = Router.load(path)
    assert router.cost_weight == CostWeight(0.0, LAMS)
    with pytest.raises(ValueError, match="λ-conditioned over"):
        router.cost_weight.for_routing(None)
    with pytest.raises(ValueError, match="outside the range"):
        router.cost_weight.for_routing(1.5)
    assert router.cost_weight.for_routing(0.25) == 0.25  # between trained values: allowed
    item = make_fake_bank(1)[0]
    result = router.route(item.question.question, item.evidence, comps, cost_lambda=0.5)
    assert len(result.tiers) == 5


def test_frontier_evaluates_a_conditioned_router_at_each_of_its_lambdas(tmp_path):
    from evaluation import frontier_systems

    path, _ = _export_conditioned(tmp_path)
    systems, ckpts, _ = frontier_systems.router_systems([path])
    assert [s.name for s in systems] == [f"λ-cond router λ={lam:g}" for lam in LAMS]
    assert [s.runs[0].cost_lambda for s in systems] == list(LAMS)
    assert all(s.params["conditioned"] for s in systems)
    assert len({s.runs[0].run_id for s in systems}) == 3 and len(ckpts) == 3


def test_two_conditioned_runs_with_the_same_seed_are_named_apart_by_label(tmp_path, monkeypatch):
    import shutil

    from evaluation import frontier_systems

    path, _ = _export_conditioned(tmp_path)
    other = tmp_path / "cost.lambda=0"  # a Hydra-style directory name with '=' in it
    shutil.copytree(path, other)
    with pytest.raises(ValueError, match=r"name the runs apart \(--routers run3=<path> run6=<path>\)"):
        frontier_systems.router_systems([path, other])
    labels = frontier_systems.labelled_checkpoints([f"run3={path}", f"run6={other}"])
    assert labels == {path.resolve(): "run3", other.resolve(): "run6"}
    systems, ckpts, _ = frontier_systems.router_systems(list(labels), labels)
    assert [s.name for s in systems] == [f"run{r} λ={lam:g}" for r in (3, 6) for lam in LAMS]
    assert [s.params["label"] for s in systems] == ["run3"] * 3 + ["run6"] * 3
    assert len(ckpts) == 6
    # a path that exists as given is a path even when it looks like NAME=PATTERN
    monkeypatch.chdir(tmp_path)
    assert frontier_systems.labelled_checkpoints(["cost.lambda=0"]) == {other.resolve(): None}
    with pytest.raises(ValueError, match="labelled both 'a' and 'b'"):
        frontier_systems.labelled_checkpoints([f"a={path}", f"b={path}"])
    with pytest.raises(FileNotFoundError, match="no such file or directory"):
        frontier_systems.labelled_checkpoints([f"run9={tmp_path / 'missing'}"])


# ------------------------------------------------------------------ training
@pytest.mark.slow
@needs_locomo
def test_training_run_validates_and_exports_at_every_lambda(tmp_path):
    from policies.training.loop import train

    cfg = load_config([
        *TINY_TRAIN_OVERRIDES,
        f"runs_dir={tmp_path}",
        f"cache.path={tmp_path / 'calls.sqlite'}",
        f"question_bank.cache_dir={tmp_path / 'banks'}",
        "cost.lambdas=[0,0.9]",
    ])
    result = train(cfg)
    assert result["run_name"].endswith("__lamcond0-0.9__s0") and result["cost_lambdas"] == [0.0, 0.9]
    per_lambda = result["validation"]["per_lambda"]
    assert set(per_lambda) == {"0", "0.9"}
    assert all(0.0 < v["p_high"] < 1.0 for v in per_lambda.values())
    assert result["validation"]["objective"] == pytest.approx(
        np.mean([v["objective"] for v in per_lambda.values()])
    )
    # at λ = 0 the objective is the task metric alone
    assert per_lambda["0"]["objective"] == pytest.approx(per_lambda["0"]["f1"])
    run = tmp_path / result["run_name"]
    records = json.loads((run / "validation_records_best.json").read_text())
    assert sorted({r["cost_lambda"] for r in records}) == [0.0, 0.9]
    assert len(records) == 2 * result["n_val_questions"]
    assert Router.load(run / "router").cost_weight.choices == (0.0, 0.9)
    assert "Best router at each λ" in (run / "validation.md").read_text()
    assert "val/lam0.9/f1" in (run / "progress.csv").read_text().splitlines()[0]


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("seed", [0])
def test_one_conditioned_router_learns_both_ends_of_the_tradeoff(seed):
    """Trained once over λ ∈ {0, 4}: at λ = 0 it answers (pays for HIGH where needed), at λ = 4
    the cost term outweighs a wrong answer and the same weights route everything LOW.

    Measured (F1, module cost) at λ = 0 / λ = 4: seed 0 (1.0, 9.2) / (0.11, 0.6); seed 1
    (1.0, 10.9) / (0.0, 0.5); seed 2 (1.0, 12.2) / (0.33, 0.8).
    """
    from stable_baselines3 import PPO

    from envs.rollout import evaluate_policy, summarize_records

    torch.manual_seed(seed)
    items = make_fake_bank(6)
    comps = make_fake_components(cost_weight=CostWeight(0.0, (0.0, 4.0)))
    env = MemoryRouterEnv(items, comps, RewardShaper(CostConfig(alpha=AlphaConfig(warmup=200))), seed=seed)
    model = PPO("MlpPolicy", env, n_steps=250, batch_size=50, n_epochs=8, learning_rate=3e-3, gamma=1.0,
                gae_lambda=1.0, ent_coef=0.0, seed=seed, device="cpu", policy_kwargs={"net_arch": [64, 64]})
    model.learn(total_timesteps=12000)

    def decide(obs, module):
        return Tier(int(model.predict(obs, deterministic=True)[0]))

    out = {}
    for lam in (0.0, 4.0):
        out[lam] = summarize_records(evaluate_policy(decide, items, comps, progress=False, cost_lambda=lam))[
            "overall"
        ]
    print({lam: (round(s["f1"], 3), round(s["module_cost"], 2)) for lam, s in out.items()})
    assert out[0.0]["f1"] >= 0.9
    assert out[4.0]["module_cost"] < 0.5 * out[0.0]["module_cost"]
    assert out[4.0]["f1"] < out[0.0]["f1"]
