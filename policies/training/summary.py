"""Aggregate episode records into the numbers training logs, selects on, and reports."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from modules.tier import MODULE_ORDER, Tier


def tier_ratios(
    tier_rows: Sequence[Sequence[Tier]], modules: Sequence[str] = MODULE_ORDER
) -> dict[str, float]:
    """Share of LOW/MID/HIGH per module and the overall HIGH share.

    Args:
        tier_rows: One tuple of tiers per episode, in module order.
        modules: Module names in the same order.

    Returns:
        ``{"{module}/{low,mid,high}": share, ..., "high_share": share of all decisions}``.
    """
    out: dict[str, float] = {}
    if not tier_rows:
        return out
    arr = np.array([[int(t) for t in row] for row in tier_rows], dtype=np.int64)
    for j, module in enumerate(modules[: arr.shape[1]]):
        for tier in Tier:
            out[f"{module}/{tier.name.lower()}"] = float(np.mean(arr[:, j] == int(tier)))
    out["high_share"] = float(np.mean(arr == int(Tier.HIGH)))
    return out


def summarize_records(records: Sequence[Any]) -> dict[str, Any]:
    """Means and totals over episode records.

    Returns:
        ``n``, ``f1``, ``em``, ``judge`` (mean over judged episodes, None if none),
        ``judge_failed``, ``module_cost``, ``answer_cost``, ``total_cost`` (means),
        ``llm_calls``, ``cache_hits`` (totals), ``cache_hit_rate``, ``failures``,
        ``high_share`` and ``tiers`` (per-module ratios, see :func:`tier_ratios`).
    """
    n = len(records)
    if n == 0:
        return {"n": 0}
    judged = [float(r.judge) for r in records if r.judge is not None]
    calls = int(sum(int(r.calls) for r in records))
    hits = int(sum(int(r.cache_hits) for r in records))
    ratios = tier_ratios([tuple(r.tiers) for r in records])
    return {
        "n": n,
        "f1": float(np.mean([r.f1 for r in records])),
        "em": float(np.mean([r.em for r in records])),
        "judge": float(np.mean(judged)) if judged else None,
        "judge_failed": int(sum(bool(r.judge_failed) for r in records)),
        "module_cost": float(np.mean([r.module_cost for r in records])),
        "answer_cost": float(np.mean([r.answer_cost for r in records])),
        "total_cost": float(np.mean([r.total_cost for r in records])),
        "llm_calls": calls,
        "cache_hits": hits,
        "cache_hit_rate": hits / calls if calls else 0.0,
        "failures": int(sum(int(r.failures) for r in records)),
        "high_share": ratios.pop("high_share"),
        "tiers": ratios,
    }


def selection_score(summary: dict[str, Any], metric: str) -> float:
    """The validation score that picks the best checkpoint (``objective``, ``f1``, ``em`` or ``judge``).

    Raises:
        ValueError: If ``metric`` is ``judge`` but no episode was judged.
    """
    value = summary.get(metric)
    if value is None:
        raise ValueError(
            f"validation metric {metric!r} is unavailable (no judged episodes?); "
            "enable the judge (judge.enabled=true) or select on f1"
        )
    return float(value)


def flat_metrics(summary: dict[str, Any], prefix: str) -> dict[str, float]:
    """Flatten a summary into ``{prefix/key: number}`` for the logger.

    Tier shares go under ``prefix/tiers/``; a λ-conditioned run's ``per_lambda`` entries under
    ``prefix/lam{λ}/``.
    """
    out: dict[str, float] = {}
    for key, value in summary.items():
        if key == "tiers":
            for tkey, share in value.items():
                out[f"{prefix}/tiers/{tkey}"] = float(share)
        elif key == "per_lambda":
            for lam, metrics in value.items():
                out.update(flat_metrics(metrics, f"{prefix}/lam{lam}"))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[f"{prefix}/{key}"] = float(value)
    return out


def markdown_report(title: str, summary: dict[str, Any], extra: dict[str, Any] | None = None) -> str:
    """A short human-readable validation report (markdown)."""
    lines = [f"# {title}", ""]
    for key, value in (extra or {}).items():
        lines.append(f"- **{key}**: {value}")
    if extra:
        lines.append("")
    lines += ["| metric | value |", "|---|---|"]
    for key in (
        "n",
        "objective",
        "f1",
        "em",
        "judge",
        "module_cost",
        "answer_cost",
        "total_cost",
        "high_share",
        "p_high",
        "llm_calls",
        "cache_hits",
        "cache_hit_rate",
        "failures",
    ):
        value = summary.get(key)
        text = "n/a" if value is None else (f"{value:.4g}" if isinstance(value, float) else str(value))
        lines.append(f"| {key} | {text} |")
    tiers = summary.get("tiers") or {}
    if tiers:
        lines += ["", "| module | LOW | MID | HIGH |", "|---|---|---|---|"]
        for module in MODULE_ORDER:
            if f"{module}/low" in tiers:
                row = [f"{tiers[f'{module}/{t}']:.2f}" for t in ("low", "mid", "high")]
                lines.append(f"| {module} | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"
