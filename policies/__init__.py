"""Router policies: the PPO router network, baselines, and checkpoint export/load."""

from policies.baselines import FixedTierPolicy, RandomPolicy, get_baseline, get_policy
from policies.router import Router, RouteResult, RouterLoadError

__all__ = [
    "FixedTierPolicy",
    "RandomPolicy",
    "RouteResult",
    "Router",
    "RouterLoadError",
    "get_baseline",
    "get_policy",
]
