"""APGR, CPT(50%/80%), AIQ and the oracle's share for the frontier's systems, with bootstrap intervals."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from common.atomic import atomic_write_csv
from evaluation.aggregate import SystemSummary
from evaluation.bootstrap import Estimate, interval
from evaluation.oracle import minimum_paths
from evaluation.router_metrics import CPT_LEVELS, Ends, aiq, apgr, cost_share, cpt, pgr

#: Cost axes the metrics are computed on.
COST_AXES: tuple[str, ...] = ("module_cost", "total_cost")
LOW_TIERS = "L,L,L,L,L"
HIGH_TIERS = "H,H,H,H,H"

#: ``{system name: (cost, quality)}`` for one replicate (or the point estimates).
View = Mapping[str, tuple[float, float]]


@dataclass(frozen=True)
class FamilyMetrics:
    """The router metrics of one family of systems on one cost axis.

    Attributes:
        family: ``"routers"``, ``"baselines"``, ``"oracle"``, ``"λ-cond routers"``, ``"per-λ routers"``
            or the label of one training run (``--routers run6=...``) when several are labelled.
        cost: Cost axis.
        members: Names of the systems in the family.
        apgr: RouteLLM APGR.
        cpt: ``{level: CPT(level)}`` for :data:`~evaluation.router_metrics.CPT_LEVELS`.
        aiq: RouterBench AIQ (quality units).
    """

    family: str
    cost: str
    members: list[str]
    apgr: Estimate
    cpt: dict[float, Estimate]
    aiq: Estimate


@dataclass
class RouterMetrics:
    """Everything :func:`compute_router_metrics` found.

    Attributes:
        quality: Quality metric (``f1``, ``em`` or ``judge``).
        low: Name of the weak end (all-LOW), or None if it was not evaluated.
        high: Name of the strong end (all-HIGH), or None.
        families: One entry per family and cost axis.
        per_system: ``{system: {"pgr"|"cost_share_<axis>"|"oracle_gain": Estimate}}``.
        oracle: Name of the oracle system, or None.
        notes: Why something is undefined (no ends, no gap...).
    """

    quality: str
    low: str | None
    high: str | None
    families: list[FamilyMetrics] = field(default_factory=list)
    per_system: dict[str, dict[str, Estimate]] = field(default_factory=dict)
    oracle: str | None = None
    notes: list[str] = field(default_factory=list)


def find_end(summaries: Sequence[SystemSummary], name: str, tiers: str) -> SystemSummary | None:
    """The baseline called ``name``, else a baseline whose fixed tiers are ``tiers``."""
    base = [s for s in summaries if s.kind == "baseline"]
    return next((s for s in base if s.name == name), None) or next(
        (s for s in base if s.params.get("tiers") == tiers), None
    )


def _views(summaries: Sequence[SystemSummary], quality: str, cost: str) -> tuple[View, list[View]]:
    point = {s.name: (s.metrics[cost].mean, s.metrics[quality].mean) for s in summaries}
    n_boot = len(summaries[0].replicates[quality])
    costs = {s.name: s.replicates[cost] for s in summaries}
    quals = {s.name: s.replicates[quality] for s in summaries}
    reps: list[View] = [{n: (float(costs[n][b]), float(quals[n][b])) for n in point} for b in range(n_boot)]
    return point, reps


def _estimate(fn: Callable[[View], float], point: View, reps: Sequence[View], alpha: float) -> Estimate:
    values = np.array([fn(v) for v in reps], dtype=np.float64)
    lo, hi = interval(values, alpha)
    return Estimate(float(fn(point)), lo, hi, int(np.isfinite(values).sum()))


def _ends(view: View, low: str, high: str) -> Ends:
    (c_lo, q_lo), (c_hi, q_hi) = view[low], view[high]
    return Ends(c_lo, q_lo, c_hi, q_hi)


def _families(summaries: Sequence[SystemSummary]) -> dict[str, list[str]]:
    routers = [s for s in summaries if s.kind == "router"]
    out = {
        "routers": [s.name for s in routers],
        "baselines": [s.name for s in summaries if s.kind == "baseline"],
        "oracle": [s.name for s in summaries if s.kind == "oracle"],
    }
    cond = [s.name for s in routers if s.params.get("conditioned")]
    if cond and len(cond) < len(routers):
        out["λ-cond routers"] = cond
        out["per-λ routers"] = [s.name for s in routers if s.name not in cond]
    # One family per labelled training run (`--routers run3=... run6=...`): APGR joins a family's
    # points into one curve, so a dominated run among the routers would pull the other's score down.
    labels = {s.params.get("label") for s in routers}
    if len(labels) > 1:
        for label in dict.fromkeys(s.params["label"] for s in routers if s.params.get("label")):
            key = label if label not in out else f"{label} (run)"
            out[key] = [s.name for s in routers if s.params.get("label") == label]
    return {k: v for k, v in out.items() if v}


def compute_router_metrics(
    summaries: Sequence[SystemSummary],
    quality: str = "f1",
    *,
    low: str = "all-low",
    high: str = "all-high",
    costs: Sequence[str] = COST_AXES,
    alpha: float = 0.05,
) -> RouterMetrics:
    """APGR, CPT, AIQ per family and cost axis, PGR/cost share/oracle gain per system.

    Args:
        summaries: The frontier's systems (routers, baselines and optionally one ``"oracle"``).
        quality: Quality metric.
        low: Name of the all-LOW baseline (found by its tiers if named otherwise).
        high: Name of the all-HIGH baseline.
        costs: Cost axes.
        alpha: Two-sided miscoverage of the intervals.

    Returns:
        The :class:`RouterMetrics` (empty families, with a note, when an end is missing).
    """
    lo_s, hi_s = find_end(summaries, low, LOW_TIERS), find_end(summaries, high, HIGH_TIERS)
    out = RouterMetrics(quality, lo_s.name if lo_s else None, hi_s.name if hi_s else None)
    oracle = next((s for s in summaries if s.kind == "oracle"), None)
    out.oracle = oracle.name if oracle else None
    if oracle is not None and (missing := oracle.params.get("minimum_paths_missing")):
        out.notes.append(
            f"the oracle's path set lacks {len(missing)} of the {len(minimum_paths())} minimum paths "
            f"(3 uniform + 10 single-module changes from all-MID): {'; '.join(missing)}; it understates "
            "the achievable gain (add all-low,all-mid,all-high,single-module to --baselines)"
        )
    if lo_s is None or hi_s is None:
        out.notes.append(f"router metrics need both {low!r} and {high!r} among the baselines")
        return out
    lo, hi = lo_s.name, hi_s.name
    if not hi_s.metrics[quality].mean > lo_s.metrics[quality].mean:
        out.notes.append(
            f"{hi} ({quality} {hi_s.metrics[quality].mean:.3f}) is not better than {lo} "
            f"({lo_s.metrics[quality].mean:.3f}): no performance gap, so PGR, APGR and CPT are undefined"
        )
    families = _families(summaries)
    for axis in costs:
        point, reps = _views(summaries, quality, axis)
        if not point[hi][0] > point[lo][0]:
            out.notes.append(f"{hi} does not cost more than {lo} on {axis}: no cost range")
        for fam, members in families.items():
            out.families.append(
                FamilyMetrics(
                    fam,
                    axis,
                    members,
                    apgr=_estimate(partial(_family_apgr, members, lo, hi), point, reps, alpha),
                    cpt={
                        lvl: _estimate(partial(_family_cpt, members, lo, hi, lvl), point, reps, alpha)
                        for lvl in CPT_LEVELS
                    },
                    aiq=_estimate(partial(_family_aiq, members, lo, hi), point, reps, alpha),
                )
            )
        for s in summaries:
            row = out.per_system.setdefault(s.name, {})
            if "pgr" not in row:
                row["pgr"] = _estimate(partial(_system_pgr, s.name, lo, hi), point, reps, alpha)
                if oracle is not None and s.kind == "router":
                    gain = partial(_system_oracle_gain, s.name, lo, oracle.name)
                    row["oracle_gain"] = _estimate(gain, point, reps, alpha)
            share = partial(_system_cost_share, s.name, lo, hi)
            row[f"cost_share_{axis}"] = _estimate(share, point, reps, alpha)
    return out


# The per-view statistics, bound with functools.partial (typed, and free of late-binding loop variables).


def _family_apgr(members: Sequence[str], lo: str, hi: str, v: View) -> float:
    return apgr([v[n] for n in members], _ends(v, lo, hi))


def _family_cpt(members: Sequence[str], lo: str, hi: str, level: float, v: View) -> float:
    return cpt([v[n] for n in members], _ends(v, lo, hi), level)


def _family_aiq(members: Sequence[str], lo: str, hi: str, v: View) -> float:
    return aiq([v[n] for n in members], v[lo], v[lo][0], v[hi][0])


def _system_pgr(name: str, lo: str, hi: str, v: View) -> float:
    return pgr(v[name][1], _ends(v, lo, hi))


def _system_oracle_gain(name: str, lo: str, oracle: str, v: View) -> float:
    return _gain_share(v[name][1], v[lo][1], v[oracle][1])


def _system_cost_share(name: str, lo: str, hi: str, v: View) -> float:
    return cost_share(v[name][0], _ends(v, lo, hi))


def _gain_share(q: float, q_low: float, q_oracle: float) -> float:
    """Share of the oracle's gain over all-LOW that a system captures; NaN if the oracle gains nothing."""
    return (q - q_low) / (q_oracle - q_low) if q_oracle > q_low else math.nan


# ------------------------------------------------------------------------------------------
# Outputs
# ------------------------------------------------------------------------------------------


def _ci(e: Estimate | None, digits: int = 3) -> str:
    if e is None or not math.isfinite(e.mean):
        return "-"
    lo = f"{e.lo:.{digits}f}" if math.isfinite(e.lo) else "?"
    hi = f"{e.hi:.{digits}f}" if math.isfinite(e.hi) else "?"
    return f"{e.mean:.{digits}f} [{lo},{hi}]"


def format_router_metrics(rm: RouterMetrics) -> list[str]:
    """The printed block: one row per family and cost axis, the oracle line, and the notes."""
    lines = [
        f"Router metrics ({rm.quality}; weak end {rm.low}, strong end {rm.high}; 95% bootstrap CIs over "
        "questions and seeds). APGR, CPT: RouteLLM (area under PGR vs cost share; cost share, 0-1, "
        "needed for 50%/80% of the gap); AIQ: RouterBench (mean of the non-decreasing convex hull "
        "over the cost range)."
    ]
    if rm.families:
        headers = [
            "cost axis",
            "family",
            "n",
            "APGR [CI]",
            *(f"CPT({x:.0%}) [CI]" for x in CPT_LEVELS),
            "AIQ [CI]",
        ]
        rows = [
            [
                f.cost,
                f.family,
                str(len(f.members)),
                _ci(f.apgr),
                *(_ci(f.cpt[x]) for x in CPT_LEVELS),
                _ci(f.aiq),
            ]
            for f in rm.families
        ]
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in [headers, *rows]]
    if rm.oracle is not None and rm.oracle in rm.per_system:
        o = rm.per_system[rm.oracle]
        lines.append(
            f"{rm.oracle}: PGR {_ci(o.get('pgr'))}, module-cost share {_ci(o.get('cost_share_module_cost'))}"
        )
        gains = [(n, r["oracle_gain"]) for n, r in rm.per_system.items() if "oracle_gain" in r]
        if gains:
            lines.append(
                "share of the oracle's gain over all-LOW captured: "
                + "; ".join(f"{n} {_ci(e, 2)}" for n, e in gains)
            )
    lines += [f"note: {n}" for n in rm.notes]
    return lines


def family_rows(rm: RouterMetrics) -> list[dict[str, Any]]:
    """One flat row per family and cost axis (for ``router_metrics.csv``)."""
    rows = []
    for f in rm.families:
        row: dict[str, Any] = {
            "cost_axis": f.cost,
            "family": f.family,
            "n_systems": len(f.members),
            "members": ";".join(f.members),
        }
        cols = {"apgr": f.apgr, "aiq": f.aiq, **{f"cpt{round(100 * x)}": e for x, e in f.cpt.items()}}
        for k, e in cols.items():
            row.update({k: e.mean, f"{k}_lo": e.lo, f"{k}_hi": e.hi})
        rows.append(row)
    return rows


def system_columns(rm: RouterMetrics | None, name: str) -> dict[str, Any]:
    """Per-system columns for ``frontier.csv``: PGR, cost shares, oracle gain (means and bounds)."""
    if rm is None:
        return {}
    out: dict[str, Any] = {}
    for k in ("pgr", *(f"cost_share_{a}" for a in COST_AXES), "oracle_gain"):
        e = rm.per_system.get(name, {}).get(k)
        out.update(
            {k: e.mean, f"{k}_lo": e.lo, f"{k}_hi": e.hi} if e else {k: "", f"{k}_lo": "", f"{k}_hi": ""}
        )
    return out


def router_metrics_dict(rm: RouterMetrics) -> dict[str, Any]:
    """JSON-friendly form (NaN stays NaN; :func:`evaluation.report.json_safe` turns it into null)."""
    return {
        "quality": rm.quality,
        "low": rm.low,
        "high": rm.high,
        "oracle": rm.oracle,
        "families": [
            {
                "family": f.family,
                "cost_axis": f.cost,
                "members": f.members,
                "apgr": f.apgr.to_dict(),
                "cpt": {f"{x:g}": e.to_dict() for x, e in f.cpt.items()},
                "aiq": f.aiq.to_dict(),
            }
            for f in rm.families
        ],
        "per_system": {n: {k: e.to_dict() for k, e in r.items()} for n, r in rm.per_system.items()},
        "notes": rm.notes,
    }


def write_router_metrics_csv(rm: RouterMetrics, path: str | Path) -> Path:
    """Write :func:`family_rows` atomically (NaN as an empty cell)."""
    return atomic_write_csv(path, family_rows(rm), ["cost_axis", "family"], blank_nan=True)
