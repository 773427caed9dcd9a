"""From system summaries to the frontier analysis, the verdict, and the table/CSV/JSON outputs."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from common.atomic import atomic_write_csv, atomic_write_json
from evaluation import router_metrics_report as rmr
from evaluation.aggregate import METRICS, SystemSummary, compare_to
from evaluation.bootstrap import DEFAULT_ALPHA, Estimate, paired_difference
from evaluation.frontier import (
    Dominance,
    FrontierScore,
    Point,
    TargetResult,
    dominance,
    frontier_score,
    pareto_frontier,
    reference_pair,
    target_check,
)
from modules.tier import MODULE_ORDER


@dataclass(frozen=True)
class AboveGap:
    """How far a baseline above the routers' frontier lies above it.

    Attributes:
        router: The best router (highest quality) at no more than the baseline's cost: the
            routers' step frontier at that cost. None when every router costs more.
        diff: Baseline quality minus that router's, with a paired bootstrap interval (None
            without a router).
    """

    router: str | None
    diff: Estimate | None

    @property
    def clearly_above(self) -> bool:
        """True when the gap's whole interval lies above zero."""
        return self.diff is not None and self.diff.lo > 0.0


@dataclass
class FrontierReport:
    """Everything the frontier command reports.

    Attributes:
        summaries: Per-system summaries (routers sorted by λ, then baselines by cost, then the oracle).
        quality: Quality metric on the y axis (``"f1"``, ``"em"`` or ``"judge"``).
        cost: Cost metric on the x axis (``"module_cost"`` or ``"total_cost"``).
        reference: Name of the reference system (all-HIGH), or None if absent.
        quality_frac: Target share of the reference quality.
        cost_frac: Allowed share of the reference cost.
        router_frontier: Names on the routers' Pareto frontier (cost ascending).
        baseline_frontier: Names on the baselines' Pareto frontier.
        scores: ``{"routers"|"baselines"|"all": FrontierScore}``.
        targets: Target check of every router.
        dominance: Router-vs-baseline dominance, or None without routers.
        router_metrics: APGR, CPT, AIQ per family and cost axis, PGR and oracle share per system.
        above_gaps: For each baseline above the routers' frontier, its paired quality gap to it.
    """

    summaries: list[SystemSummary]
    quality: str
    cost: str
    reference: str | None
    quality_frac: float
    cost_frac: float
    router_frontier: list[str] = field(default_factory=list)
    baseline_frontier: list[str] = field(default_factory=list)
    scores: dict[str, FrontierScore] = field(default_factory=dict)
    targets: list[TargetResult] = field(default_factory=list)
    dominance: Dominance | None = None
    router_metrics: rmr.RouterMetrics | None = None
    above_gaps: dict[str, AboveGap] = field(default_factory=dict)

    def points(self, kind: str | None = None) -> list[Point]:
        """Cost-quality points of the systems (optionally only ``"router"`` or ``"baseline"``)."""
        return [
            Point(s.name, s.metrics[self.cost].mean, s.metrics[self.quality].mean, s.kind)
            for s in self.summaries
            if kind is None or s.kind == kind
        ]


def _lambda(s: SystemSummary) -> float:
    lam = s.params.get("cost_lambda")
    return float(lam) if isinstance(lam, (int, float)) else math.inf


def analyse(
    summaries: list[SystemSummary],
    *,
    quality: str = "f1",
    cost: str = "module_cost",
    reference: str = "all-high",
    quality_frac: float = 0.95,
    cost_frac: float = 0.5,
    alpha: float = DEFAULT_ALPHA,
) -> FrontierReport:
    """Compute comparisons, frontiers, scores, target checks and dominance.

    Args:
        summaries: One summary per system; all on the same questions.
        quality: Quality metric for the frontier.
        cost: Cost metric for the frontier.
        reference: Reference system for ratios and the target (normally ``"all-high"``).
        quality_frac: Target share of reference quality.
        cost_frac: Allowed share of reference cost.
        alpha: Two-sided miscoverage of the router metrics' intervals.

    Returns:
        The :class:`FrontierReport` (summaries are updated in place with ``vs_reference``).

    Raises:
        ValueError: For an unknown metric or systems evaluated on different question counts.
    """
    for m in (quality, cost):
        if m not in METRICS:
            raise ValueError(f"unknown metric {m!r}; choose from {METRICS}")
    routers = sorted((s for s in summaries if s.kind == "router"), key=lambda s: (_lambda(s), s.name))
    # The oracle (kind "oracle") is shown but is neither a baseline nor a router: it picks paths with
    # hindsight, so it stays out of the frontiers, scores, targets and dominance.
    baselines = sorted(
        (s for s in summaries if s.kind == "baseline"), key=lambda s: (s.metrics[cost].mean, s.name)
    )
    others = [s for s in summaries if s.kind not in ("router", "baseline")]
    ref = next((s for s in summaries if s.name == reference), None)
    report = FrontierReport(
        summaries=[*routers, *baselines, *others],
        quality=quality,
        cost=cost,
        reference=ref.name if ref else None,
        quality_frac=quality_frac,
        cost_frac=cost_frac,
    )
    if ref is not None:
        for s in report.summaries:
            compare_to(s, ref)
    # Judge scores can be absent (no judge ran): such systems cannot be placed on the plane.
    finite = [p for p in report.points() if math.isfinite(p.cost) and math.isfinite(p.quality)]
    usable = [p for p in finite if p.kind in ("router", "baseline")]
    r_pts = [p for p in usable if p.kind == "router"]
    b_pts = [p for p in usable if p.kind == "baseline"]
    report.router_frontier = [p.name for p in pareto_frontier(r_pts)]
    report.baseline_frontier = [p.name for p in pareto_frontier(b_pts)]
    if len(b_pts) >= 2:
        low, high = reference_pair(b_pts)
        if high.cost > low.cost:
            report.scores = {
                "routers": frontier_score(r_pts, low, high),
                "baselines": frontier_score(b_pts, low, high),
                "all": frontier_score(usable, low, high),
            }
    if ref is not None:
        for s in routers:
            q_ratio = s.vs_reference.get(f"{quality}_ratio")
            c_ratio = s.vs_reference.get(f"{cost}_ratio")
            if q_ratio is not None and c_ratio is not None:
                report.targets.append(target_check(s.name, q_ratio, c_ratio, quality_frac, cost_frac))
    if r_pts and b_pts:
        report.dominance = dominance(r_pts, b_pts)
        report.above_gaps = _above_gaps(report, report.dominance.above_routers, r_pts, alpha)
    report.router_metrics = rmr.compute_router_metrics(report.summaries, quality, alpha=alpha)
    return report


def _above_gaps(
    report: FrontierReport, above: list[str], routers: list[Point], alpha: float
) -> dict[str, AboveGap]:
    """Pair each baseline above the routers' frontier with the frontier's best router at its cost.

    A point estimate above the frontier can be noise: the paired interval of the quality gap says
    whether the baseline is above the routers with its whole interval (a real miss) or not.
    """
    by_name = {s.name: s for s in report.summaries}
    q = report.quality
    gaps: dict[str, AboveGap] = {}
    for name in above:
        b = by_name[name]
        cheaper = [r for r in routers if r.cost <= b.metrics[report.cost].mean]
        if not cheaper:
            gaps[name] = AboveGap(None, None)
            continue
        best = max(cheaper, key=lambda r: (r.quality, -r.cost, r.name))
        r = by_name[best.name]
        diff = paired_difference(
            b.metrics[q].mean, b.replicates[q], r.metrics[q].mean, r.replicates[q], alpha
        )
        gaps[name] = AboveGap(best.name, diff)
    return gaps


def _pct(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{100 * x:.1f}%"


def _target_phrase(t: TargetResult) -> str:
    q, c = t.quality_ratio, t.cost_ratio
    return (
        f"{t.name}: {_pct(q.mean)} of reference quality [CI {_pct(q.lo)}-{_pct(q.hi)}] "
        f"at {_pct(c.mean)} of its cost [CI {_pct(c.lo)}-{_pct(c.hi)}]"
    )


def verdict_lines(report: FrontierReport) -> list[str]:
    """The two plain answers (target and dominance), computed from the report's numbers."""
    q, c = report.quality, report.cost
    ref = report.reference or "all-high"
    lines = [
        f"Q1. Does a router reach >= {_pct(report.quality_frac)} of {ref} {q} at <= "
        f"{_pct(report.cost_frac)} of {ref} {c}?"
    ]
    if report.reference is None:
        lines.append(f"    CANNOT TELL: the reference system {ref!r} was not evaluated.")
    elif not report.targets:
        lines.append("    CANNOT TELL: no router was evaluated.")
    else:
        passed = [t for t in report.targets if t.passed]
        if passed:
            robust = [t.name for t in passed if t.robust]
            lines.append(f"    YES: {', '.join(t.name for t in passed)}.")
            lines += [f"      {_target_phrase(t)}" for t in passed]
            lines.append(
                "      The bootstrap intervals clear both thresholds for: " + ", ".join(robust)
                if robust
                else "      But no router clears both thresholds with its whole 95% interval "
                "(the pass is within noise)."
            )
        else:
            lines.append("    NO: no router meets both thresholds.")
            cheap = [t for t in report.targets if t.cost_ratio.mean <= report.cost_frac]
            good = [t for t in report.targets if t.quality_ratio.mean >= report.quality_frac]
            if cheap:
                best = max(cheap, key=lambda t: t.quality_ratio.mean)
                lines.append(f"      best within the cost budget: {_target_phrase(best)}")
            if good:
                best = min(good, key=lambda t: t.cost_ratio.mean)
                lines.append(f"      cheapest at the quality target: {_target_phrase(best)}")
    lines.append("Q2. Does the router frontier dominate the fixed-tier baselines?")
    dom = report.dominance
    if dom is None:
        lines.append("    CANNOT TELL: need at least one router and one baseline with finite numbers.")
    else:
        word = {"yes": "YES", "partly": "PARTLY", "no": "NO"}[dom.verdict]
        n_dom = sum(v is not None for v in dom.dominated_by.values())
        lines.append(f"    {word}: routers dominate {n_dom} of {len(dom.dominated_by)} baselines.")
        for b, r in dom.dominated_by.items():
            if r:
                lines.append(f"      {b}: dominated by {r}")
            elif dom.tied_by.get(b):
                lines.append(
                    f"      {b}: tied by {dom.tied_by[b]} (same cost and quality: on the routers' frontier)"
                )
            else:
                lines.append(f"      {b}: not dominated by any router")
        above = dom.above_routers
        lines.append(
            "      no baseline lies above the routers' frontier."
            if not above
            else f"      above the routers' frontier: {', '.join(above)}."
        )
        lines += _gap_lines(report)
    sb_all = report.scores.get("baselines")
    if sb_all is not None and not sb_all.q_hi > sb_all.q_lo:
        lines.append(
            f"    Note: the dearest baseline ({sb_all.high}, {q} {sb_all.q_hi:.3f}) is not better than the "
            f"cheapest ({sb_all.low}, {sb_all.q_lo:.3f}): no quality gap to recover, so PGR is undefined."
        )
    elif "routers" in report.scores and report.dominance is not None:
        sr, sb = report.scores["routers"], report.scores["baselines"]
        lines.append(
            f"    Step-frontier score over [{sr.low}, {sr.high}] cost range: step PGR routers "
            f"{sr.step_pgr:.3f} vs baselines {sb.step_pgr:.3f} "
            f"(the {sr.low}-{sr.high} straight line = 0.500); "
            f"normalised AUC routers {sr.auc:.3f} vs baselines {sb.auc:.3f}."
        )
    return lines


def _gap_lines(report: FrontierReport) -> list[str]:
    """One line per baseline above the routers' frontier: its paired gap, and whether it is noise."""
    if not report.above_gaps:
        return []
    q = report.quality
    lines = []
    for name, g in report.above_gaps.items():
        if g.diff is None:
            lines.append(
                f"        {name}: cheaper than every router (the routers' frontier starts above its cost)"
            )
            continue
        d = g.diff
        where = "above with its whole interval" if g.clearly_above else "within noise"
        lines.append(
            f"        {name}: {q} {d.mean:+.3f} [{d.lo:+.3f}, {d.hi:+.3f}] over {g.router} "
            f"(the routers' best at <= its cost), paired; {where}"
        )
    clear = [n for n, g in report.above_gaps.items() if g.clearly_above]
    unreached = [n for n, g in report.above_gaps.items() if g.diff is None]
    summary = f"      above with the whole 95% interval: {', '.join(clear) if clear else 'none'}"
    if unreached:
        summary += f"; cheaper than every router: {', '.join(unreached)}"
    lines.append(summary + ".")
    return lines


# ------------------------------------------------------------------------------------------
# Outputs
# ------------------------------------------------------------------------------------------


def _fmt(x: float, digits: int = 3) -> str:
    return "-" if not math.isfinite(x) else f"{x:.{digits}g}" if abs(x) >= 1000 else f"{x:.{digits}f}"


def _ci(s: SystemSummary, m: str, digits: int = 3) -> str:
    e = s.metrics[m]
    if not math.isfinite(e.mean):
        return "-"
    return f"{_fmt(e.mean, digits)} [{_fmt(e.lo, digits)},{_fmt(e.hi, digits)}]"


def format_table(report: FrontierReport) -> str:
    """A fixed-width table of every system's main numbers (means with 95% intervals)."""
    headers = [
        "system",
        "seeds",
        "F1 [CI]",
        "EM",
        "judge",
        "module cost [CI]",
        "total cost",
        "latency s",
        "fails",
        f"{report.quality} % ref",
        f"{report.cost} % ref",
        "HIGH share",
    ]
    rows = []
    for s in report.summaries:
        high_share = sum(s.tier_ratios[m]["HIGH"] for m in MODULE_ORDER) / len(MODULE_ORDER)
        qr = s.vs_reference.get(f"{report.quality}_ratio")
        cr = s.vs_reference.get(f"{report.cost}_ratio")
        rows.append(
            [
                s.name + (" *" if s.name in report.router_frontier + report.baseline_frontier else ""),
                str(s.n_seeds),
                _ci(s, "f1"),
                _fmt(s.metrics["em"].mean),
                _fmt(s.metrics["judge"].mean),
                _ci(s, "module_cost", 4),
                _fmt(s.metrics["total_cost"].mean, 4),
                _fmt(s.metrics["latency_s"].mean, 2),
                f"{s.failures_total:g}",
                _pct(qr.mean) if qr else "-",
                _pct(cr.mean) if cr else "-",
                _pct(high_share),
            ]
        )
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    fmt_row = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True))  # noqa: E731
    lines = [fmt_row(headers), "  ".join("-" * w for w in widths), *map(fmt_row, rows)]
    n = report.summaries[0].n_questions if report.summaries else 0
    lines.append(f"({n} questions; 95% bootstrap intervals; * = on its family's Pareto frontier)")
    return "\n".join(lines)


def format_category_table(report: FrontierReport, metric: str = "f1") -> str:
    """Per-category means of ``metric`` (one row per system, one column per category)."""
    cats = sorted({c for s in report.summaries for c in s.per_category})
    headers = ["system", *(f"{metric} cat {c}" for c in cats)]
    rows = [
        [s.name, *(_fmt(s.per_category[c][metric].mean) if c in s.per_category else "-" for c in cats)]
        for s in report.summaries
    ]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in [headers, *rows])


def csv_rows(report: FrontierReport) -> list[dict[str, Any]]:
    """One flat row per system (means, interval bounds, ratios, tier shares, categories)."""
    cats = sorted({c for s in report.summaries for c in s.per_category})
    rows = []
    for s in report.summaries:
        row: dict[str, Any] = {
            "system": s.name,
            "kind": s.kind,
            "cost_lambda": s.params.get("cost_lambda", ""),
            "n_seeds": s.n_seeds,
            "n_questions": s.n_questions,
            "failures_total": s.failures_total,
            "on_frontier": s.name in report.router_frontier + report.baseline_frontier,
        }
        for m in METRICS:
            e = s.metrics[m]
            row.update({f"{m}": e.mean, f"{m}_lo": e.lo, f"{m}_hi": e.hi})
        for k, e in sorted(s.vs_reference.items()):
            row.update({f"{k}": e.mean, f"{k}_lo": e.lo, f"{k}_hi": e.hi})
        for mod in MODULE_ORDER:
            for tier, share in s.tier_ratios[mod].items():
                row[f"tier_{mod}_{tier}"] = share
        row.update(rmr.system_columns(report.router_metrics, s.name))
        for c in cats:
            for m in ("f1", "judge"):
                cat = s.per_category.get(c, {}).get(m)
                row[f"{m}_cat_{c}"] = cat.mean if cat else ""
        rows.append(row)
    return rows


def write_csv(report: FrontierReport, path: str | Path) -> Path:
    """Write :func:`csv_rows` atomically (NaN as an empty cell)."""
    return atomic_write_csv(path, csv_rows(report), ["system"], blank_nan=True)


def report_dict(report: FrontierReport, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """The whole report as JSON-friendly data, with the run metadata attached."""
    dom = report.dominance
    return {
        "metadata": metadata or {},
        "quality_metric": report.quality,
        "cost_metric": report.cost,
        "reference": report.reference,
        "target": {"quality_frac": report.quality_frac, "cost_frac": report.cost_frac},
        "systems": [s.to_dict() for s in report.summaries],
        "router_frontier": report.router_frontier,
        "baseline_frontier": report.baseline_frontier,
        "scores": {k: vars(v) for k, v in report.scores.items()},
        "router_metrics": rmr.router_metrics_dict(report.router_metrics) if report.router_metrics else None,
        "targets": [asdict(t) for t in report.targets],
        "dominance": None
        if dom is None
        else {
            "verdict": dom.verdict,
            "dominated_by": dom.dominated_by,
            "tied_by": dom.tied_by,
            "above_routers": dom.above_routers,
            "above_gaps": {
                name: {"router": g.router, "diff": None if g.diff is None else g.diff.to_dict()}
                for name, g in report.above_gaps.items()
            },
            "undominated_routers": dom.undominated_routers,
        },
        "verdict": verdict_lines(report),
    }


def json_safe(obj: Any) -> Any:
    """Replace non-finite floats (NaN = "no value", e.g. no judge) by None, recursively: strict JSON."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def write_json(report: FrontierReport, path: str | Path, metadata: dict[str, Any] | None = None) -> Path:
    """Write :func:`report_dict` atomically (strict JSON: NaN becomes null)."""
    return atomic_write_json(path, json_safe(report_dict(report, metadata)))
