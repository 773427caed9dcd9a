"""A fixed tier path in the router format: what ships when the guard finds no learned router worth it.

The network of :class:`policies.network.RouterActor` is set so that its logits depend on the module one-hot
alone: the descriptor row of module ``i`` carries a 1 in unit ``i``, every layer passes units ``0..4`` through
unchanged (the content projection is zero), and the action head gives module ``i``'s path tier a large logit.
It routes exactly like ``FixedTierPolicy(path)`` for any observation, and ``Router.load``, ``Router.route``,
``evaluate.py frontier --routers`` and the call packs treat it like any exported router.

A λ-conditioned run can ship one path per λ (:func:`fixed_paths_actor`): the λ observation scalar is cut into
bands at the midpoints between the trained λ values by saturated ReLU steps, each module's unit is gated by
each step, and the action head's weights telescope so that in band ``j`` only the tier of path ``j`` scores.
"""

from __future__ import annotations

import dataclasses
import itertools
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


def _one_hot_trunk(config: NetworkConfig) -> tuple[RouterActor, torch.nn.Linear, torch.nn.Linear]:
    """A zeroed actor whose trunk carries the module one-hot into units ``0..n-1`` of both MLP layers.

    Returns:
        The actor and the trunk MLP's two linear layers (for the caller to add to, under ``no_grad``).
    """
    n = config.layout.n_modules
    actor = RouterActor(config)
    first, second = actor.trunk.mlp[0], actor.trunk.mlp[2]
    assert isinstance(first, torch.nn.Linear) and isinstance(second, torch.nn.Linear)
    with torch.no_grad():
        for p in actor.parameters():
            p.zero_()
        eye = torch.eye(n)
        actor.trunk.descriptor.weight[:, :n] = eye
        first.weight[:n, config.hidden : config.hidden + n] = eye  # the descriptor half of the input
        second.weight[:n, :n] = eye
    return actor, first, second


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
    actor, _, _ = _one_hot_trunk(config)
    with torch.no_grad():
        eye = torch.eye(n)
        for layer in actor.pi:
            if isinstance(layer, torch.nn.Linear):
                layer.weight[:n, :n] = eye
        for module, tier in enumerate(path):
            actor.action.weight[int(tier), module] = _LOGIT
    return actor


def fixed_paths_actor(
    config: NetworkConfig, paths: Mapping[float, Sequence[Tier]], lambda_index: int
) -> RouterActor:
    """A ReLU :class:`RouterActor` that picks ``paths[λ][i]`` for module ``i`` at (and around) each trained λ.

    Args:
        config: The run's network shape (``activation`` must be ``relu``, with at least one actor layer).
        paths: One path per trained λ (two or more).
        lambda_index: Position of the λ scalar among the observation's scalars.

    Raises:
        ValueError: Another activation, no actor layer, or widths too narrow for the bands.
    """
    lams = sorted(paths)
    n, k = config.layout.n_modules, len(lams)
    if config.activation != "relu" or not config.pi_layers:
        raise ValueError("a per-λ fixed router needs a relu network with an actor layer")
    if min(config.hidden, config.latent) < n + 2 * (k - 1) or min(config.pi_layers) < n * k:
        raise ValueError(f"network widths too narrow for {k} λ bands of {n} modules")
    tiers = [[int(t) for t in paths[lam]] for lam in lams]
    config = dataclasses.replace(config, n_actions=max(config.n_actions, max(max(t) for t in tiers) + 1))
    thresholds = [(a + b) / 2 for a, b in itertools.pairwise(lams)]
    # Steep enough that each trained λ sits on a saturated side of every step.
    steep = 4.0 / min(b - a for a, b in itertools.pairwise(lams))
    lay = config.layout
    lam_col = 2 * lay.embed_dim + lambda_index  # the λ scalar inside the content projection's input
    actor, first, second = _one_hot_trunk(config)
    with torch.no_grad():
        eye = torch.eye(n)
        content = actor.trunk.content
        for j, t in enumerate(thresholds):
            content.weight[j, lam_col], content.bias[j] = steep, -steep * t  # c_j = K (λ - t_j)
            first.weight[n + 2 * j, j] = 1.0  # a_j = relu(c_j)
            first.weight[n + 2 * j + 1, j], first.bias[n + 2 * j + 1] = 1.0, -1.0  # b_j = relu(c_j - 1)
            second.weight[n + j, n + 2 * j], second.weight[n + j, n + 2 * j + 1] = 1.0, -1.0  # s_j in [0, 1]
        pis = [layer for layer in actor.pi if isinstance(layer, torch.nn.Linear)]
        pis[0].weight[:n, :n] = eye
        for m in range(n):
            for j in range(k - 1):
                u = n + m * (k - 1) + j  # u_mj = relu(d_m + s_j - 1): module m, λ past threshold j
                pis[0].weight[u, m], pis[0].weight[u, n + j], pis[0].bias[u] = 1.0, 1.0, -1.0
        for layer in pis[1:]:
            layer.weight[: n * k, : n * k] = torch.eye(n * k)
        head = actor.action.weight
        for m in range(n):
            head[tiers[0][m], m] += _LOGIT
            for j in range(1, k):  # in band j the sum telescopes to the tier of path j
                u = n + m * (k - 1) + (j - 1)
                head[tiers[j][m], u] += _LOGIT
                head[tiers[j - 1][m], u] -= _LOGIT
    return actor


def export_fixed_router(
    paths: Mapping[float, Sequence[Tier]],
    dest: str | os.PathLike[str],
    config: NetworkConfig,
    metadata: Mapping[str, Any],
    lambda_index: int | None = None,
) -> Path:
    """Export fixed paths as a router at ``dest`` (atomically), checked on random observations first.

    Args:
        paths: The path at each trained λ (one entry, or equal paths: one fixed path for every observation).
        dest: The router directory.
        config: The network shape of the run's router (its observation layout).
        metadata: As for :func:`policies.export.export_router`; ``fixed_path`` (one path) or ``fixed_paths``
            (``{λ: path}``) is added.
        lambda_index: Position of the λ scalar among the observation's scalars (needed for several paths).

    Raises:
        ValueError: Several paths without ``lambda_index``, or a network that cannot carry them.
        RuntimeError: The reloaded router does not route as the paths (a bug, never a silent wrong router).
    """
    table = {float(lam): tuple(Tier(int(t)) for t in p) for lam, p in paths.items()}
    distinct = set(table.values())
    if len(distinct) == 1:
        (one,) = distinct
        actor = fixed_path_actor(config, one)
        extra: dict[str, Any] = {"fixed_path": tiers_label(one)}
    else:
        if lambda_index is None:
            raise ValueError("several fixed paths need the position of the λ scalar")
        actor = fixed_paths_actor(config, table, lambda_index)
        extra = {"fixed_paths": {f"{lam:g}": tiers_label(p) for lam, p in sorted(table.items())}}

    def routes_the_paths(router: Router) -> None:
        lay = actor.config.layout
        for lam, path in table.items():
            probes = probe_observations(actor.config, n=64)
            if lambda_index is not None:
                probes[:, lay.scalar_slice[0] + lambda_index] = lam
            for module in range(lay.n_modules):
                obs = probes.copy()
                obs[:, lay.module_slice[0] : lay.module_slice[1]] = 0.0
                obs[:, lay.module_slice[0] + module] = 1.0
                got = set(np.asarray(router.act(obs)).tolist())
                if got != {int(path[module])}:
                    raise RuntimeError(
                        f"fixed router for {tiers_label(path)} at λ = {lam:g}: module {MODULE_ORDER[module]} "
                        f"routed to {got}"
                    )

    return write_router(actor, dest, {**metadata, **extra}, routes_the_paths)
