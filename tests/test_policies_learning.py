"""PPO with the custom router network learns: a toy task and E1's synthetic routing task."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from common.cost_weight import CostWeight
from envs.config_schema import AlphaConfig, CostConfig
from envs.fakes import OPTIMAL_TIERS, make_fake_bank, make_fake_components, question_type
from envs.reward import RewardShaper
from envs.rollout import evaluate_policy
from envs.router_env import MemoryRouterEnv
from modules.tier import Tier
from policies.sb3_policy import router_policy_kwargs
from tests.toy_env import ToyRouterEnv


def _mean_return(model, env, episodes=60):
    total = 0.0
    for ep in range(episodes):
        obs, _ = env.reset(seed=1000 + ep)
        done = False
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, r, done, _, _ = env.step(int(action))
            total += r
    return total / episodes


def test_router_policy_learns_module_and_query_dependent_toy_task():
    """The optimum needs both the module descriptor and the query content (see ToyRouterEnv)."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    torch.set_num_threads(1)
    venv = DummyVecEnv([lambda i=i: ToyRouterEnv(seed=i) for i in range(2)])
    kwargs = router_policy_kwargs(venv.envs[0].obs_spec, hidden=32, latent=32, pi_layers=[32], vf_layers=[32])
    model = PPO(
        "MlpPolicy",
        venv,
        policy_kwargs=kwargs,
        n_steps=40,
        batch_size=40,
        n_epochs=4,
        learning_rate=3e-3,
        gamma=1.0,
        seed=0,
        device="cpu",
    )
    before = _mean_return(model, ToyRouterEnv(seed=99))
    model.learn(2000)
    after = _mean_return(model, ToyRouterEnv(seed=99))
    print(f"toy return before {before:.2f}, after {after:.2f} (optimum 5, random 1.67)")
    assert after >= 4.5 > before + 0.5


@pytest.mark.slow
def test_router_policy_learns_cost_aware_routing_in_the_real_env():
    """Through MemoryRouterEnv, the reward shaper and the rollout code (fake LLM task, λ = 0.5)."""
    from stable_baselines3 import PPO

    torch.set_num_threads(1)
    lam = 0.5
    items = make_fake_bank(6)
    comps = make_fake_components(cost_weight=CostWeight(lam))
    env = MemoryRouterEnv(items, comps, RewardShaper(CostConfig(alpha=AlphaConfig(warmup=200))), seed=0)
    kwargs = router_policy_kwargs(
        comps.obs_builder.spec, hidden=64, latent=64, pi_layers=[64], vf_layers=[64]
    )
    model = PPO(
        "MlpPolicy",
        env,
        policy_kwargs=kwargs,
        n_steps=250,
        batch_size=50,
        n_epochs=8,
        learning_rate=1e-3,
        gamma=1.0,
        gae_lambda=1.0,
        ent_coef=0.0,
        seed=0,
        device="cpu",
    )
    model.learn(total_timesteps=4000)

    def decide(obs, module):
        return Tier(int(model.predict(obs, deterministic=True)[0]))

    records = evaluate_policy(decide, items, comps, progress=False)
    optimal = [
        chosen == best
        for rec, item in zip(records, items, strict=True)
        for chosen, best in zip(rec.tiers, OPTIMAL_TIERS[question_type(item.question.question)], strict=True)
    ]
    rate = float(np.mean(optimal))
    f1 = float(np.mean([r.f1 for r in records]))
    cost = float(np.mean([r.module_cost for r in records]))
    all_high = evaluate_policy(lambda o, m: Tier.HIGH, items, comps, progress=False)
    high_cost = float(np.mean([r.module_cost for r in all_high]))
    print(f"optimal-action rate {rate:.3f}, F1 {f1:.3f}, cost {cost:.2f} (all-HIGH {high_cost:.2f})")
    assert rate >= 0.85
    assert f1 >= 0.9
    assert cost < 0.6 * high_cost
