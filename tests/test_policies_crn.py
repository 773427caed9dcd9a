"""Common-random-numbers sampling (policies.crn_policy): exact distribution, coupling, save/load."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import DummyVecEnv

from policies.crn_policy import CRNActorCriticPolicy, crn_uniforms, inverse_cdf
from policies.sb3_policy import router_policy_kwargs
from policies.toy_env import ToyRouterEnv


def test_inverse_cdf_gives_each_action_its_probability_mass():
    probs = torch.tensor([[0.2, 0.5, 0.3]]).repeat(1000, 1)
    u = (torch.arange(1000, dtype=torch.float64) + 0.5) / 1000  # an exact grid over [0, 1)
    counts = torch.bincount(inverse_cdf(probs, u), minlength=3).tolist()
    assert counts == [200, 500, 300]


def test_inverse_cdf_never_leaves_the_action_range():
    # float32 probabilities summing to 0.99999994: u close to 1 must never pick a zero-probability action.
    probs = torch.tensor([[0.3333333, 0.3333333, 0.3333333], [0.9999999, 0.0, 0.0], [0.0, 0.0, 1.0]])
    u = torch.tensor([0.99999999, 0.99999999, 0.0], dtype=torch.float64)
    assert inverse_cdf(probs, u).tolist() == [2, 0, 2]


def test_inverse_cdf_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="probs"):
        inverse_cdf(torch.ones(4, 3) / 3, torch.zeros(3))


def test_crn_uniforms_are_a_pure_function_of_seed_and_step():
    a = crn_uniforms(7, 3, 4)
    assert np.array_equal(a, crn_uniforms(7, 3, 4))
    assert not np.array_equal(a, crn_uniforms(7, 4, 4))
    assert not np.array_equal(a, crn_uniforms(8, 3, 4))
    assert ((a >= 0) & (a < 1)).all()
    with pytest.raises(ValueError, match="seed"):
        crn_uniforms(-1, 0, 2)


def _model(seed: int, crn_seed: int | None, n_envs: int = 2) -> PPO:
    torch.set_num_threads(1)
    venv = DummyVecEnv([lambda i=i: ToyRouterEnv(seed=i) for i in range(n_envs)])
    kwargs = router_policy_kwargs(venv.envs[0].obs_spec, hidden=16, latent=16, pi_layers=[16], vf_layers=[16])
    kwargs["crn_seed"] = crn_seed
    return PPO(CRNActorCriticPolicy, venv, policy_kwargs=kwargs, n_steps=10, batch_size=10, n_epochs=2,
               learning_rate=3e-3, gamma=1.0, seed=seed, device="cpu")


def _rollout_actions(model: PPO, steps: int) -> np.ndarray:
    obs = np.stack([ToyRouterEnv(seed=i).reset(seed=i)[0] for i in range(2)])
    out = []
    with torch.no_grad():
        for _ in range(steps):
            actions, _, _ = model.policy(torch.as_tensor(obs))
            out.append(actions.numpy())
    return np.concatenate(out)


def test_nearby_policies_are_coupled_and_sb3_sampling_is_not():
    """Two policies a small perturbation apart take (almost) the same actions under CRN only."""
    def perturbed(crn_seed: int | None) -> tuple[PPO, PPO]:
        a, b = _model(0, crn_seed), _model(0, crn_seed)
        with torch.no_grad():
            for p in b.policy.action_net.parameters():
                p.add_(0.05 * torch.randn_like(p))
        return a, b

    a, b = perturbed(crn_seed=0)
    agree_crn = float((_rollout_actions(a, 200) == _rollout_actions(b, 200)).mean())
    a, b = perturbed(crn_seed=None)  # SB3's multinomial on the global torch RNG
    torch.manual_seed(1)
    xa = _rollout_actions(a, 200)
    torch.manual_seed(2)  # two runs whose torch RNG streams differ, as after any divergence
    xb = _rollout_actions(b, 200)
    agree_sb3 = float((xa == xb).mean())
    print(f"action agreement: CRN {agree_crn:.2f}, independent sampling {agree_sb3:.2f}")
    assert agree_crn >= 0.9
    assert agree_sb3 < 0.6  # ~1/3 + noise for near-uniform policies


def test_crn_sampling_keeps_the_policy_distribution():
    model = _model(0, crn_seed=3)
    obs = torch.as_tensor(np.stack([ToyRouterEnv(seed=0).reset(seed=0)[0]] * 2))
    with torch.no_grad():
        probs = model.policy.get_distribution(obs).distribution.probs[0].numpy()
        actions = np.concatenate([model.policy(obs)[0].numpy() for _ in range(3000)])
    freq = np.bincount(actions, minlength=3) / len(actions)
    assert np.abs(freq - probs).max() < 0.03, (freq, probs)
    assert int(model.policy.crn_step) == 3000


def test_deterministic_actions_do_not_advance_the_stream():
    model = _model(0, crn_seed=0)
    obs = np.stack([ToyRouterEnv(seed=0).reset(seed=0)[0]] * 2)
    model.predict(obs, deterministic=True)
    assert int(model.policy.crn_step) == 0


def test_save_load_continues_the_stream(tmp_path):
    model = _model(0, crn_seed=5)
    model.learn(40)
    step = int(model.policy.crn_step)
    assert step == 20  # 40 timesteps over 2 envs = 20 sampling calls
    model.save(tmp_path / "m.zip")
    loaded = PPO.load(tmp_path / "m.zip", env=model.get_env(), device="cpu")
    assert isinstance(loaded.policy, CRNActorCriticPolicy)
    assert loaded.policy.crn_seed == 5 and int(loaded.policy.crn_step) == step
    assert np.array_equal(_rollout_actions(model, 30), _rollout_actions(loaded, 30))
