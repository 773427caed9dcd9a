"""Shapes and wiring of the router network, in plain torch and inside SB3's PPO policy."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from envs.observation import ObservationSpec
from policies.network import ACTIVATIONS, NetworkConfig, ObsLayout, RouterActor, RouterTrunk, activation_name
from tests.toy_env import ToyRouterEnv

SPEC = ObservationSpec(embed_dim=16)
LAYOUT = ObsLayout.from_spec(SPEC)


def _obs(n: int, module: int, seed: int = 0) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    x = np.zeros((n, SPEC.dim), np.float32)
    x[:, module] = 1.0
    x[:, SPEC.module_slice.stop :] = rng.normal(size=(n, SPEC.dim - SPEC.n_modules))
    return torch.from_numpy(x)


def test_layout_mirrors_observation_spec():
    assert LAYOUT.dim == SPEC.dim
    assert LAYOUT.query_slice == (SPEC.query_slice.start, SPEC.query_slice.stop)
    assert ObsLayout.from_dict(LAYOUT.to_dict()) == LAYOUT
    with pytest.raises(ValueError, match="bad observation layout"):
        ObsLayout.from_dict({"n_modules": 5})


def test_trunk_and_actor_shapes():
    trunk = RouterTrunk(LAYOUT, hidden=32, latent=24)
    assert trunk(_obs(7, 0)).shape == (7, 24)
    assert trunk.content.in_features == 2 * 16 + SPEC.n_scalars
    assert tuple(trunk.descriptor.weight.shape) == (5, 32)
    actor = RouterActor(NetworkConfig(LAYOUT, hidden=32, latent=24, pi_layers=(16,)))
    assert actor(_obs(3, 2)).shape == (3, 3)
    assert actor.act(_obs(3, 2)).shape == (3,)


def test_descriptor_is_selected_by_the_module_one_hot():
    """Same content, different module: the latents differ exactly by the descriptor rows."""
    trunk = RouterTrunk(LAYOUT, hidden=8, latent=8)
    a, b = _obs(4, 0), _obs(4, 3)  # same seed -> identical content, different one-hot
    content = torch.cat(
        [
            a[:, LAYOUT.query_slice[0] : LAYOUT.query_slice[1]],
            a[:, LAYOUT.input_slice[0] : LAYOUT.input_slice[1]],
            a[:, LAYOUT.scalar_slice[0] : LAYOUT.scalar_slice[1]],
        ],
        dim=1,
    )
    for obs, m in ((a, 0), (b, 3)):
        expected = trunk.mlp(torch.cat([trunk.content(content), trunk.descriptor.weight[m].expand(4, -1)], 1))
        torch.testing.assert_close(trunk(obs), expected, rtol=0, atol=0)
    assert not torch.allclose(trunk(a), trunk(b))
    # Descriptor rows start with norm ~1 (not torch's default N(0,1) of norm ~sqrt(hidden)).
    norms = RouterTrunk(LAYOUT, hidden=256).descriptor.weight.norm(dim=1)
    assert torch.all((norms > 0.7) & (norms < 1.3))


def test_gradients_reach_the_selected_descriptor_only():
    trunk = RouterTrunk(LAYOUT, hidden=8, latent=8)
    trunk(_obs(5, 1)).sum().backward()
    grad = trunk.descriptor.weight.grad
    assert grad is not None and grad[1].abs().sum() > 0
    assert torch.all(grad[[0, 2, 3, 4]] == 0)


def test_network_config_round_trip_and_errors():
    cfg = NetworkConfig(LAYOUT, hidden=32, latent=16, pi_layers=(8, 4), vf_layers=(8,), activation="tanh")
    assert NetworkConfig.from_dict(cfg.to_dict()) == cfg
    bad = cfg.to_dict() | {"activation": "swish"}
    with pytest.raises(ValueError, match="swish"):
        NetworkConfig.from_dict(bad)
    missing = {k: v for k, v in cfg.to_dict().items() if k != "hidden"}
    with pytest.raises(ValueError, match="hidden"):
        NetworkConfig.from_dict(missing)
    assert activation_name(ACTIVATIONS["gelu"]) == "gelu"
    with pytest.raises(ValueError, match="ACTIVATIONS"):
        activation_name(torch.nn.SiLU)


def test_sb3_policy_uses_the_router_network():
    from stable_baselines3 import PPO

    from policies.sb3_policy import RouterFeaturesExtractor, network_config, router_policy_kwargs

    env = ToyRouterEnv(embed_dim=16, seed=0)
    kwargs = router_policy_kwargs(env.obs_spec, hidden=32, latent=24, pi_layers=[16], vf_layers=[12])
    model = PPO("MlpPolicy", env, policy_kwargs=kwargs, n_steps=16, batch_size=8, seed=0, device="cpu")
    policy = model.policy
    assert isinstance(policy.features_extractor, RouterFeaturesExtractor)
    # One shared trunk for actor and critic (and for all modules).
    assert policy.pi_features_extractor is policy.vf_features_extractor is policy.features_extractor
    assert policy.action_net.out_features == 3
    assert policy.mlp_extractor.value_net[0].out_features == 12
    cfg = network_config(policy)
    assert (cfg.hidden, cfg.latent, cfg.pi_layers, cfg.vf_layers, cfg.activation) == (
        32,
        24,
        (16,),
        (12,),
        "relu",
    )
    assert cfg.layout == ObsLayout.from_spec(env.obs_spec)


def test_extractor_rejects_a_mismatched_observation_space():
    from policies.sb3_policy import RouterFeaturesExtractor

    other = ObservationSpec(embed_dim=8).space()
    with pytest.raises(ValueError, match="does not match the router layout"):
        RouterFeaturesExtractor(other, LAYOUT.to_dict())
    with pytest.raises(ValueError, match="unknown activation"):
        from policies.sb3_policy import router_policy_kwargs

        router_policy_kwargs(SPEC, activation="swish")
