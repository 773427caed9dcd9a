"""PPO trained on an outcome table: the project's learner on the same footing as kNN and the plug-in.

The live router (``train.py``) runs the pipeline for every decision, so on 2 cores it sees a few hundred
questions in an hour. An outcome table already holds what every covered path scored on every question, so
PPO can train on it with no LLM call (:class:`envs.outcome_env.OutcomeTableEnv`): one step per question, the
action one of the table's paths. This is how RouterBench and LLMRouter compare routers, and it lets PPO run
with five seeds where the live router could afford one.

The observation is not the raw 384-dimensional question embedding: with a few hundred training questions PPO
overfits it and its value loss never settles. The unit embeddings are projected onto their ``n_components``
leading principal directions (fitted on the training rows only) and each component standardised; the
λ-conditioned variant appends the price.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.vec_env import DummyVecEnv
from torch import nn

from envs.outcome_env import OutcomeTableEnv
from memory.encoder import unit_rows
from policies.path_selector import PolicyScorer


@dataclass(frozen=True)
class TablePPOSettings:
    """PPO's budget and shape on an outcome table.

    Attributes:
        timesteps: Questions drawn in training (each one step).
        n_envs: Environments stepped together (each ``n_steps`` per rollout).
        n_steps: Steps per environment per rollout.
        batch_size: PPO minibatch.
        n_epochs: PPO epochs per rollout.
        learning_rate: Adam step size.
        ent_coef: Entropy bonus (keeps paths with close objectives explored).
        hidden: Width of the two hidden layers of the policy and value networks.
        n_components: Principal components of the question embedding in the observation.
    """

    timesteps: int = 20_000
    n_envs: int = 8
    n_steps: int = 64
    batch_size: int = 128
    n_epochs: int = 10
    learning_rate: float = 3e-4
    ent_coef: float = 0.01
    hidden: int = 64
    n_components: int = 16

    def __post_init__(self) -> None:
        for name in ("timesteps", "n_envs", "n_steps", "n_epochs", "hidden", "n_components"):
            if getattr(self, name) < 1:
                raise ValueError(f"table PPO {name} must be >= 1, got {getattr(self, name)}")
        if self.batch_size < 2:
            raise ValueError(f"table PPO batch_size must be > 1, got {self.batch_size}")


class PrincipalFeatures:
    """Unit embeddings projected onto their leading principal directions, each component standardised.

    Args:
        n_components: Components kept (fewer if the training rows span fewer).
    """

    def __init__(self, n_components: int) -> None:
        self.n_components = n_components

    def fit(self, x: np.ndarray) -> PrincipalFeatures:
        """Learn the mean, directions and scales from the training rows ``(n, dim)``."""
        u = unit_rows(x)
        self.mean = u.mean(axis=0, keepdims=True)
        # Thin SVD of the centred rows: the right singular vectors are the principal directions.
        _, s, vt = np.linalg.svd(u - self.mean, full_matrices=False)
        k = max(1, min(self.n_components, int((s > 1e-9 * max(s[0], 1e-30)).sum())))
        self.basis = vt[:k].T
        z = (u - self.mean) @ self.basis
        self.scale = np.where(z.std(axis=0) > 0, z.std(axis=0), 1.0)
        return self

    def transform(self, x: np.ndarray) -> np.ndarray:
        """Standardised components of rows ``(m, dim)``, as float32 ``(m, k)``."""
        return (((unit_rows(x) - self.mean) @ self.basis) / self.scale).astype(np.float32)


class TablePPO:
    """PPO routers trained on an outcome table, one per price or one conditioned on the price.

    Args:
        seed: Seeds PPO, its environments and the question draws.
        conditioned: One router for every price, the price in its observation (the λ-conditioned router);
            otherwise one router per price.
        settings: PPO's budget and shape.
    """

    def __init__(
        self, seed: int = 0, conditioned: bool = False, settings: TablePPOSettings | None = None
    ) -> None:
        self.seed, self.conditioned = seed, conditioned
        self.settings = settings or TablePPOSettings()
        self.name = f"PPO{' λ-conditioned' if conditioned else ''} s{seed}"
        self._models: dict[float, tuple[PPO, OutcomeTableEnv]] = {}

    def fit(
        self, x: np.ndarray, f1: np.ndarray, cost: np.ndarray, prices: Sequence[float], ref_cost: float
    ) -> TablePPO:
        """Train on training embeddings ``x`` and their outcome columns; returns self.

        Args:
            x: ``(n, dim)`` question embeddings.
            f1: ``(n, n_paths)`` quality.
            cost: ``(n, n_paths)`` module cost.
            prices: The prices the router will be asked at.
            ref_cost: The cost a price is quoted against.

        Raises:
            ValueError: No price, or shapes that disagree (from the environment).
        """
        if not prices:
            raise ValueError("table PPO needs at least one price")
        s = self.settings
        self._features = PrincipalFeatures(s.n_components).fit(x)
        feats = self._features.transform(x)
        scale = max(max(prices), 1e-12)
        groups = [list(prices)] if self.conditioned else [[p] for p in prices]
        self._models = {}
        for group in groups:

            def make(g: list[float] = group) -> OutcomeTableEnv:
                return OutcomeTableEnv(feats, f1, cost, g, ref_cost, self.conditioned, scale)

            vec = DummyVecEnv([make] * s.n_envs)
            vec.seed(self.seed)
            model = PPO(
                "MlpPolicy",
                vec,
                n_steps=s.n_steps,
                batch_size=s.batch_size,
                n_epochs=s.n_epochs,
                learning_rate=s.learning_rate,
                ent_coef=s.ent_coef,
                gamma=0.0,  # one step per episode: nothing to discount, no bootstrapped value
                gae_lambda=1.0,
                policy_kwargs={"net_arch": [s.hidden, s.hidden]},
                seed=self.seed,
                device="cpu",
                verbose=0,
            )
            # Nothing to log (verbose 0, no run dir), but without a logger of its own SB3 makes an empty
            # SB3-<time> folder in the temp dir per learn(): hundreds after one `evaluate.py learners`.
            model.set_logger(Logger(folder=None, output_formats=[]))
            model.learn(total_timesteps=s.timesteps)
            for price in group:
                self._models[float(price)] = (model, make())
        return self

    def scorer(self, price: float, ref_cost: float) -> tuple[str, nn.Module]:
        """The router at ``price`` as a router-format scorer: its policy's logits on the same features.

        Raises:
            KeyError: As :meth:`choose`.
        """
        model, env = self._model_at(price)
        policy = model.policy
        # SB3's MlpPolicy on a Box: identity features, the policy MLP, the action head (logits).
        layers = [*copy.deepcopy(list(policy.mlp_extractor.policy_net)), copy.deepcopy(policy.action_net)]
        f = self._features
        price_input = float(price) / env.price_scale if self.conditioned else None
        t = torch.from_numpy
        scorer = PolicyScorer(t(f.mean), t(f.basis), t(f.scale), nn.Sequential(*layers).float(), price_input)
        return "policy", scorer

    def _model_at(self, price: float) -> tuple[PPO, OutcomeTableEnv]:
        if not self._models:
            raise KeyError(f"{self.name} is not fitted")
        # The λ-conditioned router is one model under every trained price and reads the price it is asked at.
        key = next(iter(self._models)) if self.conditioned else float(price)
        if key not in self._models:
            raise KeyError(f"{self.name} was trained at prices {sorted(self._models)}, not {price}")
        return self._models[key]

    def choose(self, x: np.ndarray, price: float) -> np.ndarray:
        """Each row's path: the trained policy's most probable action at ``price``.

        Raises:
            KeyError: Not fitted, or a per-price router asked at a price it was not trained at (the
                λ-conditioned router answers at any price).
        """
        model, env = self._model_at(price)
        obs = env.observe(self._features.transform(x), float(price))
        action, _ = model.predict(obs, deterministic=True)
        return np.asarray(action, dtype=int)
