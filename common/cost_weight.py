"""The cost weight λ of the reward ``r_task + λ·α·r_cost``: its one owner."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from common.config_error import ConfigError


def check_lambda(value: Any, name: str = "cost_lambda") -> float:
    """``value`` as a float λ: the one range check of every λ (config, reset option, reward, router).

    Args:
        value: The λ to check.
        name: What to call it in the error (a config key such as ``config cost.lambda``).

    Raises:
        ValueError: ``"{name} must be a number >= 0"`` for a non-number, ``"{name} must be finite
            and >= 0"`` for a negative, infinite or NaN value.
    """
    try:
        lam = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number >= 0, got {value!r}") from None
    if not math.isfinite(lam) or lam < 0.0:
        raise ValueError(f"{name} must be finite and >= 0, got {value!r}")
    return lam


def _config_lambda(value: Any, key: str) -> float:
    try:
        return check_lambda(value, f"config {key}")
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


@dataclass(frozen=True)
class CostWeight:
    """λ, or the λ set of a λ-conditioned run, with its per-episode draw.

    Attributes:
        default: ``cost.lambda``: the λ of a single-λ run (and of an episode nobody drew a λ for).
        choices: ``cost.lambdas``, sorted: the λ values of a λ-conditioned run (each training
            episode draws one, validation scores every one), or ``()`` for a single-λ run.

    Raises:
        ValueError: If a value is negative, infinite, NaN or not a number.
    """

    default: float = 0.0
    choices: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "default", check_lambda(self.default, "cost_lambda"))
        lams = tuple(check_lambda(v, f"cost_lambdas[{i}]") for i, v in enumerate(self.choices))
        object.__setattr__(self, "choices", tuple(sorted(lams)))

    @classmethod
    def from_config(cls, cost: Mapping[str, Any] | None) -> CostWeight:
        """Read ``lambda`` and ``lambdas`` of the config's ``cost`` section (other keys are ignored).

        Raises:
            ConfigError: Naming the key and value: a λ that is not a finite number >= 0, or a
                ``lambdas`` that is not a list, is empty (it used to become a silent λ = 0 run),
                repeats a value, or holds one value only (that is an ordinary run: set
                ``cost.lambda`` instead).
        """
        cost = cost or {}
        default = _config_lambda(cost.get("lambda", 0.0), "cost.lambda")
        value = cost.get("lambdas")
        if value is None:
            return cls(default)
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
            raise ConfigError(
                f"config cost.lambdas must be a list of numbers, e.g. [0, 0.1, 0.5], got {value!r}"
            )
        lams = [_config_lambda(v, f"cost.lambdas[{i}]") for i, v in enumerate(value)]
        if not lams:
            raise ConfigError(
                "config cost.lambdas=[] is empty: list two or more λ values for a λ-conditioned router, "
                "or leave cost.lambdas null and set cost.lambda for a single-λ run"
            )
        if len(set(lams)) != len(lams):
            raise ConfigError(f"config cost.lambdas has repeated values: {list(value)}")
        if len(lams) == 1:
            raise ConfigError(
                f"config cost.lambdas={list(value)} has one value; "
                f"a single-λ run sets cost.lambda={lams[0]:g}"
            )
        return cls(default, tuple(lams))

    @classmethod
    def from_metadata(cls, meta: Mapping[str, Any]) -> CostWeight:
        """The weight an exported router was trained with (the keys :meth:`to_metadata` writes).

        Routers exported before ``cost_lambdas`` existed lack it (a single-λ router); ones without
        ``cost_lambda`` were trained at λ = 0.
        """
        return cls(float(meta.get("cost_lambda", 0.0)), tuple(meta.get("cost_lambdas") or ()))

    def to_metadata(self) -> dict[str, Any]:
        """``{"cost_lambda": λ, "cost_lambdas": [...]}``, the router metadata and ``result.json`` keys."""
        return {"cost_lambda": self.default, "cost_lambdas": list(self.choices)}

    @property
    def conditioned(self) -> bool:
        """Whether this is a λ-conditioned run (one λ drawn per episode)."""
        return bool(self.choices)

    @property
    def values(self) -> tuple[float, ...]:
        """The λ values to validate and compare at: the choices, or the single λ."""
        return self.choices or (self.default,)

    def sample(self, rng: np.random.Generator) -> float:
        """This episode's λ: one of the choices drawn uniformly from ``rng``, or the single λ.

        A single-λ weight draws nothing from ``rng``, so the env's question order (the same RNG)
        is the one it was before λ-conditioning existed.
        """
        if not self.choices:
            return self.default
        return self.choices[int(rng.integers(len(self.choices)))]

    def for_routing(self, cost_lambda: float | None) -> float:
        """The λ a router trained with this weight puts in its observation.

        A single-λ router defaults to the λ it was trained with. A λ-conditioned router needs
        ``cost_lambda`` and accepts any value between its smallest and largest trained λ (it
        interpolates between them; beyond them it would extrapolate, which nothing validated).

        Raises:
            ValueError: If a λ-conditioned router gets no λ or one outside its trained range, a
                single-λ router another λ than its own, or the value is negative or not finite.
        """
        lams = self.choices
        if cost_lambda is None:
            if lams:
                raise ValueError(
                    f"this router is λ-conditioned over {list(lams)}: "
                    "pass cost_lambda (the cost weight to route at)"
                )
            return self.default
        lam = check_lambda(cost_lambda)
        if not lams and lam != self.default:
            # λ is an observation scalar, but this router only ever saw one value of it.
            raise ValueError(
                f"this router was trained at the single λ={self.default:g}; it cannot route at "
                f"cost_lambda={lam:g} (omit cost_lambda, or train a λ-conditioned router with cost.lambdas)"
            )
        if lams and not min(lams) <= lam <= max(lams):
            raise ValueError(
                f"cost_lambda={lam:g} is outside the range this λ-conditioned router was trained on "
                f"[{min(lams):g}, {max(lams):g}]"
            )
        return lam
