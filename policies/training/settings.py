"""The typed schema of the whole training config: the env's sections plus ``train``, ``ppo``, ``wandb``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from omegaconf import MISSING

from common.config_error import ConfigError
from envs.config_schema import EnvConfig, parse
from policies.training.guard import GUARD_MODES, guard_paths

VEC_ENVS = ("dummy", "subproc", "batched")
SELECT_METRICS = ("objective", "f1", "em", "judge")
WANDB_MODES = ("disabled", "offline", "online")


def _positive(section: str, **values: int | None) -> None:
    for name, v in values.items():
        if v is not None and int(v) <= 0:
            raise ConfigError(f"config {section}.{name} must be > 0, got {v}")


@dataclass
class TrainSettings:
    """The ``train`` section: budget, data subsets, validation, checkpoints (sizing in configs/train)."""

    #: PPO timesteps; an episode is 5 (one per module).
    total_timesteps: int = 200
    #: Parallel environments (each a copy of the pipeline, or one batched pipeline).
    n_envs: int = 2
    #: dummy | subproc (components per worker) | batched (LLM calls of the n_envs sent as one batch).
    vec_env: str = "dummy"
    #: Training questions (round-robin over the split's histories); null = all.
    train_limit: int | None = 12
    #: The split training questions come from.
    train_split: str = "train"
    #: Held-out validation questions for checkpoint selection; null = all.
    val_limit: int | None = 10
    #: The split validation questions come from.
    val_split: str = "val"
    #: Validate every N timesteps (and always once at the end).
    eval_freq: int = 100
    #: Validation episodes in flight, their LLM calls sent to the engine as one batch (same records as 1).
    eval_concurrency: int = 1
    #: Save a resumable checkpoint every N timesteps (and at the end).
    checkpoint_freq: int = 100
    #: objective (validation r_task + λ·α·r_cost) | f1 | em | judge: picks the best router.
    select_metric: str = "objective"
    #: SB3's progress bar in a terminal; plain progress lines when stdout is a file or pipe.
    progress_bar: bool = True
    #: Torch threads of PPO's tiny MLP (set after the memories are built with all cores).
    torch_threads: int | None = 1
    #: Torch device of the PPO networks (cpu: the router is tiny; the LLMs choose their own).
    device: str = "cpu"
    #: 1 prints SB3's log table after each update.
    verbose: int = 0
    #: Stop (exit 1, no router) when more than this share of a validation's LLM calls, or of a window of
    #: training calls, fail.
    max_failure_rate: float = 0.2
    #: The guard at the end of a run: ship the learned router only if its validation objective beats the best
    #: of these fixed paths with the paired bootstrap interval above 0, else ship that path as the router:
    #: uniform (all-LOW/MID/HIGH) | minimal (those and the 10 single-module changes from all-MID) |
    #: 'L,M,L,L,M;...' | off (ship the learned router regardless).
    guard: str = "uniform"

    def __post_init__(self) -> None:
        if not 0.0 <= float(self.max_failure_rate) <= 1.0:
            raise ConfigError(
                f"config train.max_failure_rate must be in [0, 1], got {self.max_failure_rate!r}"
            )
        _positive(
            "train",
            total_timesteps=self.total_timesteps,
            n_envs=self.n_envs,
            train_limit=self.train_limit,
            val_limit=self.val_limit,
            eval_freq=self.eval_freq,
            eval_concurrency=self.eval_concurrency,
            checkpoint_freq=self.checkpoint_freq,
            torch_threads=self.torch_threads,
        )
        if self.vec_env not in VEC_ENVS:
            raise ConfigError(f"config train.vec_env={self.vec_env!r}; choose one of {VEC_ENVS}")
        if self.select_metric not in SELECT_METRICS:
            raise ConfigError(
                f"config train.select_metric={self.select_metric!r}; choose one of {SELECT_METRICS}"
            )
        if self.guard not in GUARD_MODES:
            try:
                guard_paths(self.guard)
            except ValueError as exc:
                raise ConfigError(f"{exc}; or one of {GUARD_MODES}") from None
        if self.train_split == self.val_split:
            raise ConfigError(
                f"config train.val_split={self.val_split!r} equals train.train_split: checkpoint selection "
                "must use held-out questions"
            )


@dataclass
class PolicySettings:
    """The ``ppo.policy`` section (``policies.sb3_policy.router_policy_kwargs`` arguments)."""

    #: Content projection and learned module-descriptor width.
    hidden: int = 256
    #: Shared trunk output.
    latent: int = 256
    #: Hidden layers of the actor head after the trunk.
    pi_layers: list[int] = field(default_factory=lambda: [128])
    #: Hidden layers of the critic head after the trunk.
    vf_layers: list[int] = field(default_factory=lambda: [128])
    #: relu | tanh | gelu: the activation of every layer.
    activation: str = "relu"

    def __post_init__(self) -> None:
        _positive("ppo.policy", hidden=self.hidden, latent=self.latent)


@dataclass
class PPOSettings:
    """The ``ppo`` section: keyword arguments of ``stable_baselines3.PPO`` plus the network.

    Episodes are 5 steps (one per module), so rollouts are short: SB3's default n_steps of 2048
    would be ~400 episodes per update (SB3#1846).
    """

    #: Adam step size.
    learning_rate: float = 3e-4
    #: Steps per env and update: 10 × n_envs steps = 2 × n_envs episodes.
    n_steps: int = 10
    #: Minibatch size (> 1: advantages are normalised per minibatch).
    batch_size: int = 20
    #: Passes over each rollout.
    n_epochs: int = 4
    #: The only reward is terminal: no discounting within a 5-step episode.
    gamma: float = 1.0
    #: GAE's bias-variance trade-off.
    gae_lambda: float = 0.95
    #: PPO's clipping of the policy ratio.
    clip_range: float = 0.2
    #: Entropy bonus: more keeps the policy exploring dear tiers for longer.
    ent_coef: float = 0.01
    #: Weight of the value loss.
    vf_coef: float = 0.5
    #: Gradient-norm clip.
    max_grad_norm: float = 0.5
    #: Normalise advantages per minibatch.
    normalize_advantage: bool = True
    policy: PolicySettings = field(default_factory=PolicySettings)

    def __post_init__(self) -> None:
        _positive("ppo", n_steps=self.n_steps, batch_size=self.batch_size, n_epochs=self.n_epochs)
        if self.batch_size < 2:
            # SB3 normalises advantages per minibatch; a minibatch of one has no spread (SB3#440).
            raise ConfigError(f"config ppo.batch_size must be > 1, got {self.batch_size}")

    def ppo_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``PPO(...)`` (everything but the network)."""
        # The network is not a PPO argument: it goes in through policy_kwargs.
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "policy"}


@dataclass
class WandbSettings:
    """The ``wandb`` section. ``mode`` ``disabled`` (default) never imports wandb."""

    #: disabled | offline | online (``off`` = disabled).
    mode: str = "disabled"
    #: The wandb project runs are logged to.
    project: str = "budget-router"
    #: The wandb team or user (null: your default entity).
    entity: str | None = None
    #: Default: the benchmark/strategy pair.
    group: str | None = None
    #: Tags on every run, e.g. ``[sweep, cpu]``.
    tags: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        # YAML 1.1 reads a bare `off` as false, which reaches a str field as "False".
        mode = str(self.mode).lower()
        self.mode = "disabled" if mode in ("off", "false", "none") else mode
        if self.mode not in WANDB_MODES:
            raise ConfigError(f"config wandb.mode={self.mode!r}; choose one of {WANDB_MODES} (or 'off')")

    @property
    def enabled(self) -> bool:
        """Whether wandb should be imported and started."""
        return self.mode != "disabled"


@dataclass
class Config(EnvConfig):
    """The training config: ``configs/config.yaml`` composed on this schema."""

    #: Seeds PPO, the environments and the λ draws (question selection has its own ``question_bank.seed``).
    seed: int = 0
    #: ``{benchmark}__{strategy}__lam{λ}__s{seed}`` (configs/config.yaml); every run writes runs_dir/run_name.
    run_name: str = MISSING
    #: Where run directories are created.
    runs_dir: str = "runs"
    #: ``runs_dir/run_name`` (configs/config.yaml); set it to write a run somewhere else.
    run_dir: str = MISSING
    #: A run dir or a checkpoint dir (…/checkpoints/last) to continue.
    resume: str | None = None
    #: Replace an existing run in run_dir (otherwise such a launch is refused).
    overwrite: bool = False
    train: TrainSettings = field(default_factory=TrainSettings)
    ppo: PPOSettings = field(default_factory=PPOSettings)
    wandb: WandbSettings = field(default_factory=WandbSettings)

    def __post_init__(self) -> None:
        # numpy's and Gymnasium's seeding refuse a negative seed, but only once the environments
        # exist; checked here, the launch fails before anything is written.
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ConfigError(f"config seed must be an integer >= 0, got {self.seed!r}")


def parse_config(cfg: Mapping[str, Any]) -> Config:
    """The resolved training config as :class:`Config`, every value checked.

    Raises:
        ConfigError: Naming the key and the bad value.
    """
    return parse(Config, cfg)
