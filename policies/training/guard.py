"""A router that validation vouches for: ship the learned router only where it beats the best fixed path.

At the end of a run the selected router and a set of fixed tier paths are scored on the same validation
questions with the objective PPO optimises (``r_task + λ·α·r_cost``, per question). The learned router ships
only where its mean objective beats the best fixed path's with the paired bootstrap interval's lower bound
above 0, at every λ it was trained for; otherwise the run ships that fixed path, exported in the router
format (:func:`policies.fixed_router.export_fixed_router`), and keeps the learned router beside it. The
routing literature keeps a learned router only where it beats the zero router; at the validation sizes of
this project a learned router rarely can, and a user who exports one should not get something worse than
the fixed path validation could have chosen.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from common.atomic_dir import write_dir_atomically
from modules.tier import MODULE_ORDER, Tier, one_module_changes, parse_tiers, tiers_label
from policies.export import RESERVED_KEYS
from policies.fixed_router import export_fixed_router
from policies.network import NetworkConfig
from policies.router import Router

#: ``train.guard`` values besides an explicit ``;``-separated list of paths.
GUARD_MODES: tuple[str, ...] = ("off", "uniform", "minimal")

TierPath = tuple[Tier, ...]


def guard_paths(spec: str, max_tier: Tier = Tier.HIGH) -> list[TierPath]:
    """The fixed paths the guard compares the router with.

    Args:
        spec: ``uniform`` (all-LOW, all-MID, all-HIGH), ``minimal`` (those and the 10 single-module changes
            from all-MID: the minimum oracle set) or ``"L,M,L,L,M;H,H,H,H,H"``.
        max_tier: The highest tier the run may choose (``actions.max_tier``); dearer paths are left out.

    Raises:
        ValueError: ``off`` (nothing to compare) or a malformed path, naming it.
    """
    if spec == "off":
        raise ValueError("train.guard=off compares nothing")
    if spec in ("uniform", "minimal"):
        paths: list[TierPath] = [(t,) * len(MODULE_ORDER) for t in Tier]
        if spec == "minimal":
            paths += [p for _, _, p in one_module_changes(Tier.MID, (Tier.LOW, Tier.HIGH))]
    else:
        try:
            paths = [parse_tiers(p) for p in spec.split(";") if p.strip()]
        except ValueError as exc:
            raise ValueError(f"config train.guard={spec!r}: {exc}") from None
        if not paths:
            raise ValueError(f"config train.guard={spec!r}: no path; expected {GUARD_MODES} or 'L,M,L,L,M;…'")
    return [p for p in dict.fromkeys(paths) if max(p) <= max_tier]


def paired_interval(diffs: Sequence[float], n_boot: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Mean of per-question differences and its 95% percentile-bootstrap interval (questions resampled).

    Example:
        >>> mean, lo, hi = paired_interval([0.1, 0.0, 0.2, 0.1])
        >>> round(mean, 3), lo <= mean <= hi
        (0.1, True)
    """
    d = np.asarray(diffs, dtype=float)
    if d.size == 0:
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, d.size, size=(n_boot, d.size))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(d.mean()), float(lo), float(hi)


def vouch(
    router_records: Mapping[float, Sequence[Any]],
    path_records: Mapping[TierPath, Sequence[Any]],
    per_question: Callable[[Any, float], float],
    n_boot: int = 2000,
) -> dict[str, Any]:
    """Decide what ships: the learned router, or the best fixed path on validation.

    Args:
        router_records: The router's validation records at each λ it was trained for, in question order.
        path_records: Each fixed path's records on the same questions, same order (λ does not change a path).
        per_question: A record's objective at λ (``r_task + λ·α·r_cost`` under the run's statistics).
        n_boot: Bootstrap resamples.

    Returns:
        ``{"ships": "router"|"fixed", "path": the shipped fixed path (None when the router ships or the
        paths differ by λ), "paths": {λ: shipped path} (None when the router ships), "per_lambda": {λ: {...}},
        "lines": [...]}``; per λ: the best fixed path, both objectives, the paired difference and its
        interval, and whether the router passed.
    """
    per_lambda: dict[str, dict[str, Any]] = {}
    for lam, recs in router_records.items():
        mine = np.array([per_question(r, lam) for r in recs])
        scores = {p: np.array([per_question(r, lam) for r in pr]) for p, pr in path_records.items()}
        for p, s in scores.items():
            if len(s) != len(mine):
                raise ValueError(
                    f"path {tiers_label(p)} has {len(s)} validation records, the router {len(mine)}"
                )
        # The best fixed path validation would choose; among ties the cheaper (earlier in tier order).
        best = max(scores, key=lambda p: (round(float(scores[p].mean()), 12), [-int(t) for t in p]))
        mean, lo, hi = paired_interval(mine - scores[best], n_boot)
        per_lambda[f"{lam:g}"] = {
            "best_path": tiers_label(best), "router_objective": float(mine.mean()),
            "path_objective": float(scores[best].mean()), "difference": [mean, lo, hi], "passed": lo > 0,
            "questions": len(mine),
        }  # fmt: skip
    passed = all(v["passed"] for v in per_lambda.values())
    # What ships otherwise: at each λ the fixed path validation chose there (one path for a single-λ run).
    paths = {lam: v["best_path"] for lam, v in per_lambda.items()}
    shipped = next(iter(paths.values())) if len(set(paths.values())) == 1 else None
    lines = []
    for key, v in per_lambda.items():
        mean, lo, hi = v["difference"]
        lines.append(
            f"guard at λ = {key}: router objective {v['router_objective']:.4f} vs best fixed path "
            f"{v['best_path']} {v['path_objective']:.4f} on {v['questions']} validation questions: "
            f"{mean:+.4f} [{lo:+.4f}, {hi:+.4f}] -> {'passed' if v['passed'] else 'not above the fixed path'}"
        )
    if passed:
        lines.append("shipped: the learned router (its validation objective beats every fixed path compared)")
    else:
        table = ", ".join(f"λ = {lam}: {p}" for lam, p in paths.items())
        what = f"the fixed path {shipped}" if shipped else f"at each λ the fixed path best there ({table})"
        lines.append(
            f"shipped: {what} in the router format (router/), because the "
            "learned router's lead over it is not above 0 with 95% confidence; the learned router is kept in "
            "router_learned/. More validation questions (train.val_limit, +benchmark.options.splits=powered) "
            "narrow the interval; train.guard=off ships the learned router regardless."
        )
    return {
        "ships": "router" if passed else "fixed",
        "path": None if passed else shipped,
        "paths": None if passed else paths,
        "paths_compared": [tiers_label(p) for p in path_records],
        "per_lambda": per_lambda,
        "lines": lines,
    }


def ship_fixed_path(router_dir: Path, learned_dir: Path, guard: Mapping[str, Any]) -> None:
    """Put the guard's fixed path (one per λ for a λ-conditioned run) at ``router_dir`` in the router format.

    The learned router is copied to ``learned_dir`` once: a resumed finished run finds the fixed path already
    shipped and only writes it again.
    """
    learned = Router.load(router_dir)
    shipped_before = "fixed_path" in learned.metadata or "fixed_paths" in learned.metadata
    if not shipped_before:

        def copy(tmp: Path) -> None:
            shutil.copytree(router_dir, tmp, dirs_exist_ok=True)

        write_dir_atomically(learned_dir, copy)
    dropped = {*RESERVED_KEYS, "fixed_path", "fixed_paths"}
    meta = {k: v for k, v in learned.metadata.items() if k not in dropped}
    meta["guard"] = {k: v for k, v in guard.items() if k != "lines"}
    config = NetworkConfig.from_dict(learned.metadata["network"])
    paths = {float(lam): parse_tiers(label) for lam, label in guard["paths"].items()}
    scalars = list((learned.metadata.get("observation_spec") or {}).get("scalar_names", []))
    lambda_index = scalars.index("cost_lambda") if "cost_lambda" in scalars else None
    export_fixed_router(paths, router_dir, config, meta, lambda_index)
