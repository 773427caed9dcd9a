"""Typed views of the ``train``, ``ppo`` and ``wandb`` config sections, with clear errors.

Hydra hands ``train.py`` a nested dict; these dataclasses check it once, up front, so a typo
(``train.eval_frq=…``) fails before any model loads instead of being silently ignored.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")

VEC_ENVS = ("dummy", "subproc", "batched")
SELECT_METRICS = ("objective", "f1", "em", "judge")
WANDB_MODES = ("disabled", "offline", "online")


class SettingsError(ValueError):
    """A ``train``/``ppo``/``wandb`` config value is invalid; the message names it."""


def _from_mapping(cls: type[T], data: Mapping[str, Any] | None, section: str) -> T:
    data = dict(data or {})
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - names)
    if unknown:
        raise SettingsError(f"config section {section!r}: unknown keys {unknown}; known: {sorted(names)}")
    try:
        return cls(**data)
    except TypeError as exc:
        raise SettingsError(f"config section {section!r}: {exc}") from exc


def _positive(section: str, **values: int | None) -> None:
    for name, v in values.items():
        if v is not None and int(v) <= 0:
            raise SettingsError(f"config {section}.{name} must be > 0, got {v}")


@dataclass(frozen=True)
class TrainSettings:
    """The ``train`` section: budget, data subsets, validation, checkpoints (see configs/train)."""

    total_timesteps: int = 500
    n_envs: int = 2
    vec_env: str = "dummy"
    train_limit: int | None = 24
    train_split: str = "train"
    val_limit: int | None = 16
    val_split: str = "val"
    eval_freq: int = 250
    checkpoint_freq: int = 250
    select_metric: str = "objective"
    progress_bar: bool = True
    torch_threads: int | None = 1
    device: str = "cpu"
    verbose: int = 0
    #: Stop the run when more than this share of a validation's LLM calls fail (failure_budget.py).
    max_failure_rate: float = 0.2

    def __post_init__(self) -> None:
        if not 0.0 <= float(self.max_failure_rate) <= 1.0:
            raise SettingsError(
                f"config train.max_failure_rate must be in [0, 1], got {self.max_failure_rate!r}"
            )
        _positive(
            "train",
            total_timesteps=self.total_timesteps,
            n_envs=self.n_envs,
            train_limit=self.train_limit,
            val_limit=self.val_limit,
            eval_freq=self.eval_freq,
            checkpoint_freq=self.checkpoint_freq,
            torch_threads=self.torch_threads,
        )
        if self.vec_env not in VEC_ENVS:
            raise SettingsError(f"config train.vec_env={self.vec_env!r}; choose one of {VEC_ENVS}")
        if self.select_metric not in SELECT_METRICS:
            raise SettingsError(
                f"config train.select_metric={self.select_metric!r}; choose one of {SELECT_METRICS}"
            )
        if self.train_split == self.val_split:
            raise SettingsError(
                f"config train.val_split={self.val_split!r} equals train.train_split: checkpoint selection "
                "must use held-out questions"
            )

    @classmethod
    def from_config(cls, data: Mapping[str, Any] | None) -> TrainSettings:
        """Parse the ``train`` section."""
        return _from_mapping(cls, data, "train")


@dataclass(frozen=True)
class PolicySettings:
    """The ``ppo.policy`` section (``policies.sb3_policy.router_policy_kwargs`` arguments)."""

    hidden: int = 256
    latent: int = 256
    pi_layers: tuple[int, ...] = (128,)
    vf_layers: tuple[int, ...] = (128,)
    activation: str = "relu"

    def __post_init__(self) -> None:
        object.__setattr__(self, "pi_layers", tuple(int(x) for x in self.pi_layers))
        object.__setattr__(self, "vf_layers", tuple(int(x) for x in self.vf_layers))
        _positive("ppo.policy", hidden=self.hidden, latent=self.latent)


@dataclass(frozen=True)
class PPOSettings:
    """The ``ppo`` section: keyword arguments of ``stable_baselines3.PPO`` plus the network."""

    learning_rate: float = 3e-4
    n_steps: int = 10
    batch_size: int = 20
    n_epochs: int = 4
    gamma: float = 1.0
    gae_lambda: float = 0.95
    clip_range: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    normalize_advantage: bool = True
    policy: PolicySettings = field(default_factory=PolicySettings)

    def __post_init__(self) -> None:
        if isinstance(self.policy, Mapping):
            object.__setattr__(self, "policy", _from_mapping(PolicySettings, self.policy, "ppo.policy"))
        _positive("ppo", n_steps=self.n_steps, batch_size=self.batch_size, n_epochs=self.n_epochs)
        if self.batch_size < 2:
            # SB3 normalises advantages per minibatch; a minibatch of one has no spread (SB3#440).
            raise SettingsError(f"config ppo.batch_size must be > 1, got {self.batch_size}")

    @classmethod
    def from_config(cls, data: Mapping[str, Any] | None) -> PPOSettings:
        """Parse the ``ppo`` section."""
        return _from_mapping(cls, data, "ppo")

    def ppo_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``PPO(...)`` (everything but the network)."""
        # The network is not a PPO argument: it goes in through policy_kwargs.
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "policy"}


@dataclass(frozen=True)
class WandbSettings:
    """The ``wandb`` section. ``mode`` ``disabled`` (default) never imports wandb."""

    mode: str = "disabled"
    project: str = "budget-router"
    entity: str | None = None
    group: str | None = None
    tags: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        mode = {"off": "disabled", "false": "disabled", "none": "disabled"}.get(
            str(self.mode).lower(), self.mode
        )
        object.__setattr__(self, "mode", str(mode).lower())
        object.__setattr__(self, "tags", tuple(str(t) for t in self.tags))
        if self.mode not in WANDB_MODES:
            raise SettingsError(f"config wandb.mode={self.mode!r}; choose one of {WANDB_MODES} (or 'off')")

    @property
    def enabled(self) -> bool:
        """Whether wandb should be imported and started."""
        return self.mode != "disabled"

    @classmethod
    def from_config(cls, data: Mapping[str, Any] | None) -> WandbSettings:
        """Parse the ``wandb`` section."""
        return _from_mapping(cls, data, "wandb")
