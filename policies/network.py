"""The router network in plain torch: one shared trunk for all modules plus an actor head.

Layout (observation from ``envs.observation.ObservationSpec``)::

    obs = [ module one-hot (5) | query emb (d) | module-input emb (d) | scalars (s) ]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import nn

#: Activation functions by name; the name is what checkpoints store.
ACTIVATIONS: dict[str, type[nn.Module]] = {"relu": nn.ReLU, "tanh": nn.Tanh, "gelu": nn.GELU}


def activation_name(cls: type[nn.Module]) -> str:
    """Return the registry name of an activation class (the inverse of ``ACTIVATIONS``).

    Raises:
        ValueError: If the class is not registered (a checkpoint could not rebuild it).
    """
    for name, registered in ACTIVATIONS.items():
        if registered is cls:
            return name
    raise ValueError(
        f"activation {cls.__name__} is not in policies.network.ACTIVATIONS {sorted(ACTIVATIONS)}"
    )


_SLICE_KEYS = ("module_slice", "query_slice", "input_slice", "scalar_slice")


@dataclass(frozen=True)
class ObsLayout:
    """Where each part of the flat observation sits (a torch-only mirror of ``ObservationSpec``).

    Attributes:
        n_modules: Width of the module one-hot.
        embed_dim: Width of each text embedding.
        n_scalars: Number of trailing scalar features.
        module_slice: ``(start, stop)`` of the one-hot.
        query_slice: ``(start, stop)`` of the query embedding.
        input_slice: ``(start, stop)`` of the module-input embedding.
        scalar_slice: ``(start, stop)`` of the scalars.
    """

    n_modules: int
    embed_dim: int
    n_scalars: int
    module_slice: tuple[int, int]
    query_slice: tuple[int, int]
    input_slice: tuple[int, int]
    scalar_slice: tuple[int, int]

    @property
    def dim(self) -> int:
        """Total observation width."""
        return max(s[1] for s in (self.module_slice, self.query_slice, self.input_slice, self.scalar_slice))

    @classmethod
    def from_spec(cls, spec: Any) -> ObsLayout:
        """Build from an ``envs.observation.ObservationSpec`` (or anything with the same fields)."""
        return cls(
            n_modules=int(spec.n_modules),
            embed_dim=int(spec.embed_dim),
            n_scalars=int(spec.n_scalars),
            **{k: (int(getattr(spec, k).start), int(getattr(spec, k).stop)) for k in _SLICE_KEYS},
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (slices as 2-lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ObsLayout:
        """Inverse of ``to_dict``."""
        try:
            return cls(
                n_modules=int(d["n_modules"]),
                embed_dim=int(d["embed_dim"]),
                n_scalars=int(d["n_scalars"]),
                **{k: (int(d[k][0]), int(d[k][1])) for k in _SLICE_KEYS},
            )
        except (KeyError, TypeError, IndexError) as exc:
            raise ValueError(f"bad observation layout in checkpoint metadata: {d!r} ({exc})") from exc


@dataclass(frozen=True)
class NetworkConfig:
    """Everything needed to rebuild the actor network; stored in checkpoint metadata.

    Attributes:
        layout: Observation layout.
        hidden: Width of the content projection and of the module descriptor.
        latent: Width of the trunk's output (the shared latent).
        pi_layers: Hidden widths of the actor MLP after the trunk (SB3 ``net_arch["pi"]``).
        vf_layers: Hidden widths of the value MLP (training only; recorded for completeness).
        activation: Name in ``ACTIVATIONS``.
        n_actions: Number of tiers.
    """

    layout: ObsLayout
    hidden: int = 256
    latent: int = 256
    pi_layers: tuple[int, ...] = (128,)
    vf_layers: tuple[int, ...] = (128,)
    activation: str = "relu"
    n_actions: int = 3
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return {
            **asdict(self),
            "layout": self.layout.to_dict(),
            "pi_layers": list(self.pi_layers),
            "vf_layers": list(self.vf_layers),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> NetworkConfig:
        """Inverse of ``to_dict``; raises ``ValueError`` naming the bad field."""
        try:
            cfg = cls(
                layout=ObsLayout.from_dict(d["layout"]),
                hidden=int(d["hidden"]),
                latent=int(d["latent"]),
                pi_layers=tuple(int(x) for x in d["pi_layers"]),
                vf_layers=tuple(int(x) for x in d.get("vf_layers", ())),
                activation=str(d["activation"]),
                n_actions=int(d["n_actions"]),
                extra=dict(d.get("extra", {})),
            )
        except KeyError as exc:
            raise ValueError(f"checkpoint network config lacks field {exc.args[0]!r}: {d!r}") from exc
        if cfg.activation not in ACTIVATIONS:
            raise ValueError(f"checkpoint network activation {cfg.activation!r} not in {sorted(ACTIVATIONS)}")
        return cfg


class RouterTrunk(nn.Module):
    """Shared trunk: content projection + learned module descriptor -> MLP -> latent.

    One network serves all five modules; the module identity enters only through the
    descriptor row that the observation's one-hot selects.

    Args:
        layout: Observation layout.
        hidden: Width of the content projection and of each module descriptor.
        latent: Output width.
        activation: Name in ``ACTIVATIONS``.
    """

    def __init__(
        self, layout: ObsLayout, hidden: int = 256, latent: int = 256, activation: str = "relu"
    ) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}; choose from {sorted(ACTIVATIONS)}")
        self.layout = layout
        self.hidden = hidden
        self.latent = latent
        act = ACTIVATIONS[activation]
        content_in = 2 * layout.embed_dim + layout.n_scalars
        self.content = nn.Linear(content_in, hidden)
        self.descriptor = nn.Embedding(layout.n_modules, hidden)
        self.mlp = nn.Sequential(nn.Linear(2 * hidden, latent), act(), nn.Linear(latent, latent), act())
        # N(0, 1/hidden) gives each descriptor row a norm of ~1, comparable to the content
        # projection of unit-norm embeddings; torch's N(0, 1) default would drown the content.
        nn.init.normal_(self.descriptor.weight, mean=0.0, std=1.0 / math.sqrt(hidden))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Map a batch of observations ``(n, dim)`` to latents ``(n, latent)``."""
        lay = self.layout
        onehot = obs[:, lay.module_slice[0] : lay.module_slice[1]]
        content_in = torch.cat(
            [
                obs[:, lay.query_slice[0] : lay.query_slice[1]],
                obs[:, lay.input_slice[0] : lay.input_slice[1]],
                obs[:, lay.scalar_slice[0] : lay.scalar_slice[1]],
            ],
            dim=1,
        )
        # one-hot @ table selects a descriptor row exactly (1*w + 0*rest) and stays differentiable.
        descriptor = onehot @ self.descriptor.weight
        return self.mlp(torch.cat([self.content(content_in), descriptor], dim=1))


def mlp(in_dim: int, layers: Sequence[int], activation: str) -> nn.Sequential:
    """``Linear, act`` per hidden width; the same structure as SB3's ``MlpExtractor`` branches."""
    act = ACTIVATIONS[activation]
    mods: list[nn.Module] = []
    for width in layers:
        mods += [nn.Linear(in_dim, width), act()]
        in_dim = width
    return nn.Sequential(*mods)


class RouterActor(nn.Module):
    """Trunk + actor MLP + action head: observation -> tier logits (inference network).

    Submodule names mirror SB3's policy (``trunk`` = ``features_extractor.trunk``,
    ``pi`` = ``mlp_extractor.policy_net``, ``action`` = ``action_net``) so export is a plain copy.

    Args:
        config: Network configuration.
    """

    def __init__(self, config: NetworkConfig) -> None:
        super().__init__()
        self.config = config
        self.trunk = RouterTrunk(config.layout, config.hidden, config.latent, config.activation)
        self.pi = mlp(config.latent, config.pi_layers, config.activation)
        head_in = config.pi_layers[-1] if config.pi_layers else config.latent
        self.action = nn.Linear(head_in, config.n_actions)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Return action logits ``(n, n_actions)``."""
        return self.action(self.pi(self.trunk(obs)))

    @torch.no_grad()
    def act(self, obs: torch.Tensor) -> torch.Tensor:
        """Deterministic actions, computed exactly as SB3's ``Categorical(...).mode()``.

        Going through ``Categorical`` (log-softmax, then softmax, then argmax) instead of a raw
        ``logits.argmax`` keeps near-ties resolved identically to ``PPO.predict(deterministic=True)``.
        """
        dist = torch.distributions.Categorical(logits=self.forward(obs))
        return torch.argmax(dist.probs, dim=1)
