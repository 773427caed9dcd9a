"""Is the trained router more than a fixed tier path? The main job's closing verdict."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from modules.tier import MODULE_ORDER, Tier
from policies.baselines import FixedTierPolicy

#: Share above which a tier counts as "always" chosen for a module (float round-off only).
ALWAYS = 1.0 - 1e-9


def fixed_path(tiers: Mapping[str, float]) -> tuple[Tier, ...] | None:
    """The tier path a router always took, or None if it routed any module by question.

    Args:
        tiers: Per-module tier shares as in validation summaries (``"filter/low": 1.0``, ...).
    """
    path: list[Tier] = []
    for module in MODULE_ORDER:
        always = [t for t in Tier if tiers.get(f"{module}/{t.name.lower()}", 0.0) >= ALWAYS]
        if len(always) != 1:
            return None
        path.append(always[0])
    return tuple(path)


def path_name(path: Sequence[Tier]) -> str:
    """``all-low`` for a uniform path, else ``fixed:L,M,H,M,L`` (the baselines' names)."""
    return FixedTierPolicy(list(path)).name


def fixed_path_verdict(
    path: tuple[Tier, ...],
    evaluate_path: Callable[[tuple[Tier, ...]], Sequence[Any]],
    objective: Callable[[Sequence[Any], float], float],
    lambdas: Sequence[float],
    task_metric: str,
    timesteps: int,
) -> dict[str, Any]:
    """Compare a fixed-path router with the other fixed paths on its validation questions.

    Args:
        path: The router's path (from :func:`fixed_path`).
        evaluate_path: Runs one fixed path over the validation questions; returns episode records
            (tier choices do not depend on λ, so each path runs once for every λ).
        objective: The validation objective of records at a λ (``ValidationCallback._objective``).
        lambdas: The λ values the router was validated at.
        task_metric: The records' task score (``f1``, ``em``, ``judge``).
        timesteps: PPO timesteps the router was trained for (named in the advice).

    Returns:
        ``{"router_path", "rows": [{"path", "f1", "module_cost", "objective": {λ: value}}],
        "oracle_score", "questions_improvable", "n", "lines"}``; ``lines`` is the printed text.
    """
    paths = [(t,) * len(MODULE_ORDER) for t in Tier]
    if path not in paths:
        paths.append(path)
    records = {p: list(evaluate_path(p)) for p in paths}
    rows: list[dict[str, Any]] = [
        {
            "path": path_name(p),
            "f1": float(np.mean([r.f1 for r in recs])),
            "module_cost": float(np.mean([r.module_cost for r in recs])),
            "objective": {f"{lam:g}": objective(recs, lam) for lam in lambdas},
        }
        for p, recs in records.items()
    ]
    scores = np.array([[r.task_score(task_metric) for r in recs] for recs in records.values()])
    own = scores[paths.index(path)]
    oracle = scores.max(axis=0)
    improvable = int(np.sum(oracle > own + 1e-12))
    mine = next(r for r in rows if r["path"] == path_name(path))

    def mean_obj(row: Mapping[str, Any]) -> float:
        return float(np.mean(list(row["objective"].values())))

    # Per λ, not on the mean over λ: a λ-conditioned router is one router per λ, and a path that
    # beats it at one λ (e.g. all-MID at λ = 0) is what PPO missed there, whatever the other λ say.
    beaten: list[str] = []
    for key in mine["objective"]:
        best = max(rows, key=lambda r: float(r["objective"][key]))
        if best["objective"][key] > mine["objective"][key] + 1e-9:
            beaten.append(
                f"at λ = {key}, {best['path']} scores a higher objective "
                f"({best['objective'][key]:.4f} vs {mine['objective'][key]:.4f})"
            )
    lam_text = ", ".join(f"{lam:g}" for lam in lambdas)
    n = len(own)
    lines = [
        f"router: a fixed path, {path_name(path)} on every one of the {n} validation questions "
        f"(λ = {lam_text}). The same questions on fixed paths:",
        *(
            f"  {r['path']:<18} F1 {r['f1']:.4f}  module cost {r['module_cost']:.4g}  "
            f"objective {mean_obj(r):.4f}" + (" (mean over λ)" if len(lambdas) > 1 else "")
            for r in rows
        ),
    ]
    if not beaten:
        dearer = [r for r in rows if r["module_cost"] > mine["module_cost"]]
        gain = max((r["f1"] - mine["f1"] for r in dearer), default=0.0)
        lines.append(
            f"why: no fixed path scores a higher validation objective at λ = {lam_text}; paying for dearer "
            f"tiers buys at most {gain:+.4f} F1 here, so a router can only match this path on average."
        )
    else:
        lines.append(
            f"why: {'; '.join(beaten)}; PPO did not reach it in {timesteps} timesteps: raise "
            "train.total_timesteps."
        )
    lines.append(
        f"A per-question choice among these paths (oracle) would score {task_metric} "
        f"{float(oracle.mean()):.4f} vs {float(own.mean()):.4f}: {improvable} of {n} questions answer better "
        "on another path. A router earns its keep only where the observation tells those questions apart; "
        "`python evaluate.py routability` measures whether it can on a frontier run's records "
        "(docs/results/routability.md: on the committed LoCoMo, HotpotQA and LongMemEval test records "
        "it cannot)."
    )
    return {
        "router_path": path_name(path),
        "rows": rows,
        "oracle_score": float(oracle.mean()),
        "questions_improvable": improvable,
        "n": n,
        "lines": lines,
    }
