"""Fixed-tier and random baseline policies with the router's ``decide(obs, module) -> Tier`` interface."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from modules.tier import MODULE_ORDER, Tier


class Policy(Protocol):
    """Anything that picks a tier for a module given the observation."""

    def decide(self, obs: np.ndarray, module: str) -> Tier:
        """Return the tier for ``module`` given the flat observation ``obs``."""
        ...


def _module_index(module: str) -> int:
    try:
        return MODULE_ORDER.index(module)
    except ValueError:
        raise ValueError(f"unknown module {module!r}; expected one of {MODULE_ORDER}") from None


class FixedTierPolicy:
    """Always the same tier per module.

    Args:
        tiers: One tier for every module, or one per module in ``MODULE_ORDER``.

    Raises:
        ValueError: If a sequence has the wrong length or holds an unknown tier.
    """

    def __init__(self, tiers: Tier | int | str | Sequence[Tier | int | str]) -> None:
        if isinstance(tiers, (Tier, int, str)):
            self.tiers = (Tier.parse(tiers),) * len(MODULE_ORDER)
        else:
            items = list(tiers)
            if len(items) != len(MODULE_ORDER):
                raise ValueError(
                    f"FixedTierPolicy needs {len(MODULE_ORDER)} tiers (one per module {MODULE_ORDER}), "
                    f"got {len(items)}: {items!r}"
                )
            self.tiers = tuple(Tier.parse(t) for t in items)

    @property
    def name(self) -> str:
        """A short name, e.g. ``all-high`` or ``fixed:L,M,H,M,L``."""
        if len(set(self.tiers)) == 1:
            return f"all-{self.tiers[0].name.lower()}"
        return "fixed:" + ",".join(t.name[0] for t in self.tiers)

    def decide(self, obs: np.ndarray, module: str) -> Tier:
        """Return this module's fixed tier (``obs`` is ignored)."""
        return self.tiers[_module_index(module)]

    def __repr__(self) -> str:
        return f"FixedTierPolicy({self.name})"


class RandomPolicy:
    """Uniformly random tiers from a seeded generator (reproducible sequence of decisions).

    Args:
        seed: Seed of the ``numpy`` generator.
        probs: Optional probabilities of LOW, MID, HIGH (default uniform).
    """

    def __init__(self, seed: int = 0, probs: Sequence[float] | None = None) -> None:
        self.seed = int(seed)
        self.rng = np.random.default_rng(self.seed)
        if probs is not None:
            p = np.asarray(probs, dtype=float)
            if p.shape != (3,) or (p < 0).any() or not np.isclose(p.sum(), 1.0):
                raise ValueError(
                    f"RandomPolicy probs must be 3 non-negative numbers summing to 1, got {probs!r}"
                )
            self.probs: np.ndarray | None = p
        else:
            self.probs = None

    @property
    def name(self) -> str:
        """Short name including the seed."""
        return f"random:{self.seed}"

    def decide(self, obs: np.ndarray, module: str) -> Tier:
        """Draw a tier (``module`` is validated, ``obs`` ignored)."""
        _module_index(module)
        return Tier(int(self.rng.choice(3, p=self.probs)))

    def __repr__(self) -> str:
        return f"RandomPolicy(seed={self.seed})"


def _fixed(arg: str) -> FixedTierPolicy:
    if not arg:
        raise ValueError("fixed baseline needs tiers, e.g. 'fixed:L,M,H,M,L'")
    return FixedTierPolicy([t for t in arg.split(",")])


def _random(arg: str) -> RandomPolicy:
    try:
        return RandomPolicy(int(arg) if arg else 0)
    except ValueError:
        raise ValueError(
            f"random baseline seed must be an integer, got {arg!r} (use 'random:SEED')"
        ) from None


#: Baseline factories by name; the text after ``:`` is passed as the argument.
BASELINES: dict[str, Callable[[str], Policy]] = {
    "all-low": lambda _: FixedTierPolicy(Tier.LOW),
    "all-mid": lambda _: FixedTierPolicy(Tier.MID),
    "all-high": lambda _: FixedTierPolicy(Tier.HIGH),
    "random": _random,
    "fixed": _fixed,
}


def get_baseline(name: str) -> Policy:
    """Build a baseline policy from its name.

    Args:
        name: ``all-low``, ``all-mid``, ``all-high``, ``random`` / ``random:SEED`` or ``fixed:L,M,H,M,L``.

    Returns:
        A policy with ``decide(obs, module) -> Tier``.

    Raises:
        ValueError: For an unknown name, listing the known ones.
    """
    key, _, arg = name.strip().partition(":")
    key = key.lower()
    if key not in BASELINES:
        raise ValueError(
            f"unknown baseline {name!r}; known: {sorted(BASELINES)} (fixed:L,M,H,M,L, random:SEED)"
        )
    if arg and key.startswith("all-"):
        raise ValueError(f"baseline {key!r} takes no argument, got {name!r}")
    return BASELINES[key](arg)


def get_policy(spec: str) -> Policy:
    """A baseline by name, or a trained router with ``router:PATH`` (a checkpoint dir or zip).

    Raises:
        ValueError: For an unknown baseline name.
        policies.router.RouterLoadError: For a missing or corrupt router checkpoint.
    """
    kind, _, arg = spec.strip().partition(":")
    if kind.lower() == "router":
        if not arg:
            raise ValueError("router policy needs a path: 'router:runs/<run_name>/router'")
        from policies.router import Router

        return Router.load(arg)
    return get_baseline(spec)
