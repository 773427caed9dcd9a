"""Plugging the router network into stable-baselines3 PPO."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor

from policies.network import ACTIVATIONS, NetworkConfig, ObsLayout, RouterTrunk, activation_name


class RouterFeaturesExtractor(BaseFeaturesExtractor):
    """SB3 features extractor wrapping ``RouterTrunk`` (shared by actor and critic).

    Args:
        observation_space: The env's flat ``Box`` observation space.
        layout: ``ObsLayout.to_dict()`` of the env's observation spec (a dict, so that
            ``PPO.save`` stores plain data in ``policy_kwargs``).
        hidden: Width of the content projection and of the module descriptor.
        latent: Width of the shared latent (the extractor's ``features_dim``).
        activation: Name in ``policies.network.ACTIVATIONS``.
    """

    def __init__(
        self,
        observation_space: gym.spaces.Box,
        layout: dict[str, Any],
        hidden: int = 256,
        latent: int = 256,
        activation: str = "relu",
    ) -> None:
        lay = ObsLayout.from_dict(layout)
        shape = observation_space.shape
        if shape is None or len(shape) != 1 or shape[0] != lay.dim:
            raise ValueError(
                f"observation space shape {shape} does not match the router layout (dim {lay.dim}); "
                "build the policy from the env's own ObservationSpec"
            )
        super().__init__(observation_space, features_dim=latent)
        self.trunk = RouterTrunk(lay, hidden=hidden, latent=latent, activation=activation)

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        """Return the shared latent for a batch of observations."""
        return self.trunk(observations)


def router_policy_kwargs(
    spec: Any,
    hidden: int = 256,
    latent: int = 256,
    pi_layers: tuple[int, ...] | list[int] = (128,),
    vf_layers: tuple[int, ...] | list[int] = (128,),
    activation: str = "relu",
) -> dict[str, Any]:
    """``policy_kwargs`` for ``PPO("MlpPolicy", ...)`` that install the router network.

    Args:
        spec: The env's ``envs.observation.ObservationSpec``.
        hidden: Content-projection / descriptor width.
        latent: Shared latent width.
        pi_layers: Actor MLP widths after the trunk.
        vf_layers: Critic MLP widths after the trunk.
        activation: Activation name (used in the trunk and the heads).

    Returns:
        A dict to pass as ``policy_kwargs``.
    """
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; choose from {sorted(ACTIVATIONS)}")
    return {
        "features_extractor_class": RouterFeaturesExtractor,
        "features_extractor_kwargs": {
            "layout": ObsLayout.from_spec(spec).to_dict(),
            "hidden": int(hidden),
            "latent": int(latent),
            "activation": activation,
        },
        "share_features_extractor": True,
        "net_arch": {"pi": [int(x) for x in pi_layers], "vf": [int(x) for x in vf_layers]},
        "activation_fn": ACTIVATIONS[activation],
    }


def network_config(policy: ActorCriticPolicy) -> NetworkConfig:
    """Read the ``NetworkConfig`` of a PPO policy built with ``router_policy_kwargs``.

    Raises:
        TypeError: If the policy does not use ``RouterFeaturesExtractor``.
        ValueError: If actor and trunk use different activations (the export could not mirror it).
    """
    extractor = policy.features_extractor
    if not isinstance(extractor, RouterFeaturesExtractor):
        raise TypeError(
            f"policy uses {type(extractor).__name__}, not RouterFeaturesExtractor; "
            "build PPO with policy_kwargs=router_policy_kwargs(spec)"
        )
    if not policy.share_features_extractor:
        raise ValueError("router export expects share_features_extractor=True")
    trunk = extractor.trunk
    act = activation_name(policy.activation_fn)
    trunk_act = activation_name(type(trunk.mlp[1]))
    if act != trunk_act:
        raise ValueError(f"actor activation {act!r} differs from trunk activation {trunk_act!r}")
    net_arch = policy.net_arch
    if not isinstance(net_arch, dict):
        net_arch = {"pi": list(net_arch), "vf": list(net_arch)}
    return NetworkConfig(
        layout=trunk.layout,
        hidden=trunk.hidden,
        latent=trunk.latent,
        pi_layers=tuple(int(x) for x in net_arch.get("pi", [])),
        vf_layers=tuple(int(x) for x in net_arch.get("vf", [])),
        activation=act,
        n_actions=int(policy.action_space.n),  # type: ignore[attr-defined]
    )
