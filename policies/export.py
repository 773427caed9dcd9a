"""Export a trained PPO router as a self-contained checkpoint directory.

Layout of ``path/``::

    router.pt       torch state dict of policies.network.RouterActor (loaded with weights_only=True)
    metadata.json   format, network config, observation spec, module order, tiers, weights sha256,
                    plus whatever the caller passes (strategy, encoder, λ, provenance, config)
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from common.atomic import atomic_write_json
from common.atomic_dir import free_space, write_dir_atomically
from modules.tier import MODULE_ORDER, Tier
from policies.network import NetworkConfig, RouterActor
from policies.path_selector import PathSelectorActor
from policies.router import FORMAT, FORMAT_VERSION, METADATA_FILE, WEIGHTS_FILE, Router


class RouterExportError(OSError):
    """The router could not be written (disk full, quota, I/O error); the previous export is intact."""


#: Metadata keys that export_router sets itself; callers may not override them.
RESERVED_KEYS = ("format", "format_version", "network", "module_order", "tiers", "weights_sha256")


def actor_from_policy(policy: Any) -> RouterActor:
    """Copy a PPO policy's actor path (trunk, actor MLP, action head) into a ``RouterActor``.

    Args:
        policy: ``ppo_model.policy`` built with ``policies.sb3_policy.router_policy_kwargs``.

    Returns:
        A CPU ``RouterActor`` in eval mode with the same weights.
    """
    # Imported here: only exporting (training-side code) needs SB3.
    from policies.sb3_policy import network_config

    config = network_config(policy)
    actor = RouterActor(config)
    actor.trunk.load_state_dict(policy.features_extractor.trunk.state_dict())
    actor.pi.load_state_dict(policy.mlp_extractor.policy_net.state_dict())
    actor.action.load_state_dict(policy.action_net.state_dict())
    return actor.to("cpu").eval()


def probe_observations(config: NetworkConfig, n: int = 256, seed: int = 0) -> np.ndarray:
    """Random observations in the router's layout (valid one-hots, unit-norm embeddings)."""
    lay = config.layout
    rng = np.random.default_rng(seed)
    obs = np.zeros((n, lay.dim), dtype=np.float32)
    obs[np.arange(n), lay.module_slice[0] + rng.integers(0, lay.n_modules, n)] = 1.0
    for start, stop in (lay.query_slice, lay.input_slice):
        v = rng.normal(size=(n, stop - start))
        obs[:, start:stop] = v / np.linalg.norm(v, axis=1, keepdims=True)
    start, stop = lay.scalar_slice
    obs[:, start:stop] = rng.uniform(0.0, 1.0, size=(n, stop - start))
    return obs


def ppo_actions(ppo_model: Any, obs: np.ndarray) -> np.ndarray:
    """PPO's deterministic action for each observation, one ``predict`` call per row.

    One row at a time on purpose: that is how the router decides at inference (batch size 1).
    """
    return np.array([int(ppo_model.predict(o, deterministic=True)[0]) for o in obs], dtype=np.int64)


def export_router(
    ppo_model: Any, path: str | os.PathLike[str], metadata: Mapping[str, Any], verify: int = 256
) -> Path:
    """Write ``ppo_model``'s actor as a checkpoint that ``Router.load`` reads without SB3.

    Args:
        ppo_model: A trained ``stable_baselines3.PPO`` with the router policy.
        path: Destination directory (replaced atomically if it exists).
        metadata: JSON-serialisable facts to store: at least ``observation_spec`` (the env's
            ``ObservationSpec.to_dict()``); by convention also ``strategy``, ``encoder``,
            ``cost_lambda``, ``benchmark``, ``provenance`` (``common.provenance.run_metadata``).
        verify: Number of random observations on which the reloaded router must reproduce
            PPO's deterministic actions (0 disables the check).

    Returns:
        The checkpoint directory.

    Raises:
        ValueError: If ``metadata`` lacks ``observation_spec`` or sets a reserved key, or the
            spec disagrees with the network.
        RuntimeError: If the reloaded router's actions differ from PPO's.
        RouterExportError: The files could not be written (the message says how much space is left).
    """
    actor = actor_from_policy(ppo_model.policy)

    def same_as_ppo(router: Router) -> None:
        probes = probe_observations(actor.config, n=verify)
        ours = np.array([router.act(o[None])[0] for o in probes])
        theirs = ppo_actions(ppo_model, probes)
        bad = np.flatnonzero(ours != theirs)
        if bad.size:
            raise RuntimeError(
                f"export_router: exported router disagrees with PPO on {bad.size}/{verify} probe "
                f"observations (first at {int(bad[0])}: {int(ours[bad[0]])} vs {int(theirs[bad[0]])})"
            )

    return write_router(actor, path, metadata, same_as_ppo if verify else None)


def write_router(
    actor: RouterActor | PathSelectorActor,
    path: str | os.PathLike[str],
    metadata: Mapping[str, Any],
    check: Callable[[Router], None] | None = None,
) -> Path:
    """Write ``actor`` and ``metadata`` in the format ``Router.load`` reads, replacing ``path`` atomically.

    Args:
        actor: The inference network.
        path: Destination directory.
        metadata: The caller's facts (``observation_spec`` required; reserved keys are set here).
        check: Called with the router reloaded from the new files before they replace ``path``.

    Raises:
        ValueError: ``metadata`` lacks ``observation_spec`` or sets a reserved key, or the spec disagrees
            with the network.
        RouterExportError: The files could not be written.
    """
    meta = dict(metadata)
    clash = sorted(set(meta) & set(RESERVED_KEYS))
    if clash:
        raise ValueError(f"export_router: metadata may not set reserved keys {clash}")
    if "observation_spec" not in meta:
        raise ValueError(
            "export_router: metadata must include 'observation_spec' (ObservationSpec.to_dict())"
        )
    spec = meta["observation_spec"]
    lay = actor.config.layout
    if int(spec["embed_dim"]) != lay.embed_dim or int(spec["n_scalars"]) != lay.n_scalars:
        raise ValueError(f"export_router: observation_spec {spec} does not match the network layout {lay}")
    state = {k: v.detach().cpu().clone().contiguous() for k, v in actor.state_dict().items()}
    module_order = list(spec.get("module_names", MODULE_ORDER))

    def fill(tmp: Path) -> None:
        try:
            torch.save(state, tmp / WEIGHTS_FILE)
        except RuntimeError as exc:  # torch's zip writer reports a full disk as "unexpected pos ..."
            raise OSError(f"torch.save of {WEIGHTS_FILE} failed ({exc})") from exc
        digest = hashlib.sha256((tmp / WEIGHTS_FILE).read_bytes()).hexdigest()
        full = {
            **meta,
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "network": actor.config.to_dict(),
            "module_order": module_order,
            # the tiers the network's logits stand for (fewer than three under actions.max_tier)
            "tiers": [t.name for t in Tier][: actor.config.n_actions],
            "weights_sha256": digest,
        }
        atomic_write_json(tmp / METADATA_FILE, full)
        if check is not None:
            check(Router.load(tmp))

    dest = Path(path)
    try:
        write_dir_atomically(dest, fill)
    except OSError as exc:
        intact = f"the previous router at {dest} is intact" if dest.exists() else "nothing was exported"
        raise RouterExportError(
            f"{dest}: the router could not be written ({exc}); {free_space(dest.parent)} (disk full?); "
            f"{intact}: free some space and resume the run"
        ) from exc
    return dest
