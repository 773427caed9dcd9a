"""PPO actor-critic that samples rollout actions with common random numbers (CRN).

SB3 samples a rollout action with ``torch.multinomial`` on the global torch RNG, so two
training runs that differ only in λ consume that RNG differently as soon as their policies
differ, and from then on their actions are independent. In a λ sweep that is wasteful twice
over: the runs explore unrelated (question, tier) paths, so the shared call cache rarely hits,
and the comparison between λ values carries the full sampling noise of both runs.

:class:`CRNActorCriticPolicy` draws the action of environment ``i`` at rollout step ``c`` by
inverse CDF from ``u = U(0, 1)`` that depends only on ``(seed, c, i)``. Every run keeps the
exact action distribution of its own policy (``u`` is uniform and independent across steps),
but two runs with the same seed are *coupled*: they take the same action whenever their CDFs
put the same ``u`` in the same bin, i.e. with probability ``1 - TV/2``-ish for nearby policies
and always for identical ones. This is the classic common-random-numbers variance reduction,
applied to the router's three ordered tiers (LOW < MID < HIGH, so the coupling is monotone).

Measured (RESULTS.md, λ-sweep section): on the real LoCoMo pipeline the coupling decays within a few
PPO updates at different λ, and a 7-λ sweep computed 2.23x the LLM calls of one run with CRN vs 2.07x
without, so ``ppo.common_random_numbers`` is off by default.

The step counter is a registered buffer, so ``PPO.save``/``PPO.load`` (checkpoints and resume)
carry it and a resumed run continues the same stream. Deterministic actions (validation,
``predict(deterministic=True)``) do not touch it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from stable_baselines3.common.policies import ActorCriticPolicy


def crn_uniforms(seed: int, step: int, n: int) -> np.ndarray:
    """The ``n`` uniforms of rollout step ``step`` (one per environment), a pure function.

    Args:
        seed: The run's seed (runs with the same seed share the stream).
        step: Index of the sampling call (rollout step) within the run.
        n: Number of environments sampled in that call.

    Returns:
        ``float64`` array of shape ``(n,)`` in ``[0, 1)``.
    """
    if seed < 0 or step < 0:
        raise ValueError(f"CRN seed and step must be >= 0, got seed={seed}, step={step}")
    return np.random.default_rng((int(seed), int(step))).random(n)


def inverse_cdf(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Categorical actions by inverse CDF: the first index whose cumulative probability exceeds ``u``.

    Args:
        probs: ``(batch, n_actions)`` probabilities (rows sum to 1).
        u: ``(batch,)`` uniforms in ``[0, 1)``.

    Returns:
        ``(batch,)`` int64 actions. The CDF is computed in float64 and divided by its last entry,
        so float32 rounding (a total of 0.99999994) can never select an action of probability 0.
    """
    if probs.ndim != 2 or u.shape != probs.shape[:1]:
        raise ValueError(
            f"inverse_cdf expects probs (B, A) and u (B,), got {tuple(probs.shape)} and {tuple(u.shape)}"
        )
    cdf = probs.double().cumsum(dim=-1)
    cdf = cdf / cdf[:, -1:]
    return (u.double().unsqueeze(-1) >= cdf[:, :-1]).sum(dim=-1).long()


class CRNActorCriticPolicy(ActorCriticPolicy):
    """``ActorCriticPolicy`` whose stochastic rollout actions use common random numbers.

    Args:
        *args: Passed to ``ActorCriticPolicy``.
        crn_seed: Seed of the uniform stream; runs sharing it are coupled. ``None`` falls back
            to SB3's own sampling (the global torch RNG).
        **kwargs: Passed to ``ActorCriticPolicy`` (``policies.sb3_policy.router_policy_kwargs``).
    """

    def __init__(self, *args: Any, crn_seed: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.crn_seed = None if crn_seed is None else int(crn_seed)
        # A buffer, not a Python int: it is saved in the policy's state_dict, hence in every
        # checkpoint, so a resumed run continues the stream where it stopped.
        self.register_buffer("crn_step", torch.zeros((), dtype=torch.int64))

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data["crn_seed"] = self.crn_seed
        return data

    def forward(
        self, obs: torch.Tensor, deterministic: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Actions, values and log-probabilities for a rollout step (see the module docstring)."""
        if deterministic or self.crn_seed is None:
            return super().forward(obs, deterministic)
        if not self.share_features_extractor:
            raise ValueError("CRNActorCriticPolicy expects share_features_extractor=True (router layout)")
        latent_pi, latent_vf = self.mlp_extractor(self.extract_features(obs))
        values = self.value_net(latent_vf)
        distribution = self._get_action_dist_from_latent(latent_pi)
        probs = distribution.distribution.probs  # type: ignore[attr-defined]
        u = torch.from_numpy(crn_uniforms(self.crn_seed, int(self.crn_step), probs.shape[0])).to(probs.device)
        actions = inverse_cdf(probs, u)
        self.crn_step += 1
        log_prob = distribution.log_prob(actions)
        return actions.reshape((-1, *self.action_space.shape)), values, log_prob  # type: ignore[misc]
