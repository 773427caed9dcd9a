"""Router policies: the PPO router network, baselines, and checkpoint export/load.

Importing this package (or ``policies.router``) never imports stable-baselines3; only
``policies.sb3_policy``, ``policies.export`` (lazily) and ``policies.training`` do.
"""

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
