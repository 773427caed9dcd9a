"""A fixed tier path in the router format: what ships when the guard finds no learned router worth it.

The network of :class:`policies.network.RouterActor` is set so that its logits depend on the module one-hot
alone: the descriptor row of module ``i`` carries a 1 in unit ``i``, every layer passes units ``0..4`` through
unchanged (the content projection is zero), and the action head gives module ``i``'s path tier a large logit.
It routes exactly like ``FixedTierPolicy(path)`` for any observation, and ``Router.load``, ``Router.route``,
``evaluate.py frontier --routers`` and the call packs treat it like any exported router.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from modules.tier import MODULE_ORDER, Tier, tiers_label
from policies.export import probe_observations, write_router
from policies.network import NetworkConfig, RouterActor
from policies.router import Router

#: The winning logit: far above 0 after any activation's squashing of 1.
_LOGIT = 20.0


def fixed_path_actor(config: NetworkConfig, path: Sequence[Tier]) -> RouterActor:
    """A :class:`RouterActor` of ``config``'s shape that always picks ``path[i]`` for module ``i``.

    The network gets more actions than ``config`` has if ``path`` needs them (a HIGH in a MID-capped run).

    Raises:
        ValueError: A path that is not one tier per module, or a network too narrow to carry the one-hot.
    """
    n = config.layout.n_modules
    if len(path) != n:
        raise ValueError(f"fixed path {tiers_label(path)} has {len(path)} tiers for {n} modules")
    widths = [config.hidden, config.latent, *config.pi_layers]
    if min(widths) < n:
        raise ValueError(f"network widths {widths} cannot carry {n} module units")
    config = dataclasses.replace(config, n_actions=max(config.n_actions, int(max(path)) + 1))
    actor = RouterActor(config)
    with torch.no_grad():
        for p in actor.parameters():
            p.zero_()
        eye = torch.eye(n)
        actor.trunk.descriptor.weight[:, :n] = eye
        first, second = actor.trunk.mlp[0], actor.trunk.mlp[2]
        assert isinstance(first, torch.nn.Linear) and isinstance(second, torch.nn.Linear)
        first.weight[:n, config.hidden : config.hidden + n] = eye  # the descriptor half of the input
        second.weight[:n, :n] = eye
        for layer in actor.pi:
            if isinstance(layer, torch.nn.Linear):
                layer.weight[:n, :n] = eye
        for module, tier in enumerate(path):
            actor.action.weight[int(tier), module] = _LOGIT
    return actor


def export_fixed_router(
    path: Sequence[Tier], dest: str | os.PathLike[str], config: NetworkConfig, metadata: Mapping[str, Any]
) -> Path:
    """Export ``path`` as a router at ``dest`` (atomically), checked on random observations before it lands.

    Args:
        path: One tier per module.
        dest: The router directory.
        config: The network shape of the run's router (its observation layout).
        metadata: As for :func:`policies.export.export_router`; ``fixed_path`` is added.

    Raises:
        RuntimeError: The reloaded router does not route as the path (a bug, never a silent wrong router).
    """
    tiers = tuple(Tier(int(t)) for t in path)
    actor = fixed_path_actor(config, tiers)

    def routes_the_path(router: Router) -> None:
        probes = probe_observations(actor.config, n=64)
        lay = actor.config.layout
        for module in range(lay.n_modules):
            obs = probes.copy()
            obs[:, lay.module_slice[0] : lay.module_slice[1]] = 0.0
            obs[:, lay.module_slice[0] + module] = 1.0
            got = set(np.asarray(router.act(obs)).tolist())
            if got != {int(tiers[module])}:
                raise RuntimeError(
                    f"fixed router for {tiers_label(tiers)}: module {MODULE_ORDER[module]} routed to {got}"
                )

    return write_router(actor, dest, {**metadata, "fixed_path": tiers_label(tiers)}, routes_the_path)
