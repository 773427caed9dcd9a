"""Cost-quality frontier maths: Pareto sets, area under the step frontier, verdicts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from evaluation.bootstrap import Estimate


@dataclass(frozen=True)
class Point:
    """One system on the cost-quality plane.

    Attributes:
        name: System name.
        cost: Mean cost per question.
        quality: Mean quality (e.g. F1).
        kind: ``"router"`` or ``"baseline"``.
    """

    name: str
    cost: float
    quality: float
    kind: str = "baseline"


def dominates(a: Point, b: Point) -> bool:
    """Return True if ``a`` is at least as cheap and as good as ``b`` and strictly better in one."""
    return a.cost <= b.cost and a.quality >= b.quality and (a.cost < b.cost or a.quality > b.quality)


def _check_finite(points: Sequence[Point]) -> None:
    for p in points:
        if not (np.isfinite(p.cost) and np.isfinite(p.quality)):
            raise ValueError(f"point {p.name!r} has a non-finite cost or quality ({p.cost}, {p.quality})")


def pareto_frontier(points: Sequence[Point]) -> list[Point]:
    """Return the non-dominated points, cost ascending.

    Args:
        points: Candidate points (finite cost and quality).

    Returns:
        The Pareto frontier; quality strictly increases along it.
    """
    _check_finite(points)
    ordered = sorted(points, key=lambda p: (p.cost, -p.quality, p.name))
    frontier: list[Point] = []
    for p in ordered:
        if not frontier or p.quality > frontier[-1].quality:
            frontier.append(p)
    return frontier


def step_curve_mean(points: Sequence[Point], floor: Point, c_lo: float, c_hi: float) -> float:
    """Mean of the step curve ``Q(c)`` of ``points ∪ {floor}`` over ``[c_lo, c_hi]``.

    Args:
        points: The family's points.
        floor: The always-available fallback (cheapest baseline); must cost ``<= c_lo``.
        c_lo: Start of the cost range.
        c_hi: End of the cost range (``> c_lo``).

    Returns:
        ``(1 / (c_hi - c_lo)) * integral of Q over [c_lo, c_hi]`` (exact, piecewise constant).
    """
    if not c_hi > c_lo:
        raise ValueError(f"empty cost range [{c_lo}, {c_hi}]: the dearest baseline must cost more")
    if floor.cost > c_lo:
        raise ValueError(f"floor {floor.name!r} costs {floor.cost} > start of range {c_lo}")
    frontier = pareto_frontier([*points, floor])
    area = 0.0
    for i, p in enumerate(frontier):
        start = max(p.cost, c_lo)
        end = min(frontier[i + 1].cost if i + 1 < len(frontier) else c_hi, c_hi)
        if end > start:
            area += p.quality * (end - start)
    return area / (c_hi - c_lo)


@dataclass(frozen=True)
class FrontierScore:
    """Summary numbers of one family's step curve over the baselines' cost range.

    Attributes:
        auc: Normalised area under the step curve (see docs/design/evaluation.md).
        step_pgr: Mean performance-gap recovered by the step curve; the low-high line scores 0.5.
        gain_over_line: ``step_pgr - 0.5``.
        c_lo: Cost of the cheapest baseline.
        c_hi: Cost of the dearest baseline.
        q_lo: Quality of the cheapest baseline.
        q_hi: Quality of the dearest baseline.
        low: Name of the cheapest baseline.
        high: Name of the dearest baseline.
    """

    auc: float
    step_pgr: float
    gain_over_line: float
    c_lo: float
    c_hi: float
    q_lo: float
    q_hi: float
    low: str
    high: str


def frontier_score(points: Sequence[Point], low: Point, high: Point) -> FrontierScore:
    """Score a family of points against the low-high baseline pair.

    Args:
        points: The family (e.g. all router points, or all baseline points).
        low: Cheapest baseline (range start and fallback).
        high: Dearest baseline (range end and quality reference).

    Returns:
        The :class:`FrontierScore`. ``step_pgr`` is NaN when ``high`` is not better than ``low``
        (there is no gap to recover) and ``auc`` is NaN when ``high``'s quality is 0.
    """
    _check_finite([*points, low, high])
    mean_q = step_curve_mean(points, low, low.cost, high.cost)
    auc = mean_q / high.quality if high.quality != 0 else float("nan")
    gap = high.quality - low.quality
    step_pgr = (mean_q - low.quality) / gap if gap > 0 else float("nan")
    return FrontierScore(
        auc=auc,
        step_pgr=step_pgr,
        gain_over_line=step_pgr - 0.5,
        c_lo=low.cost,
        c_hi=high.cost,
        q_lo=low.quality,
        q_hi=high.quality,
        low=low.name,
        high=high.name,
    )


def reference_pair(baselines: Sequence[Point]) -> tuple[Point, Point]:
    """Return the cheapest and the dearest baseline (ties broken by quality, then name)."""
    if len(baselines) < 2:
        raise ValueError("need at least two baselines (e.g. all-low and all-high) to span a cost range")
    low = min(baselines, key=lambda p: (p.cost, -p.quality, p.name))
    high = max(baselines, key=lambda p: (p.cost, p.quality, p.name))
    return low, high


@dataclass(frozen=True)
class TargetResult:
    """Whether one system meets the quality-at-cost target relative to the reference.

    Attributes:
        name: System name.
        quality_ratio: Quality / reference quality, with paired interval.
        cost_ratio: Cost / reference cost, with paired interval.
        passed: Both ratios meet the target on point estimates.
        robust: Both intervals lie entirely on the passing side.
    """

    name: str
    quality_ratio: Estimate
    cost_ratio: Estimate
    passed: bool
    robust: bool


def target_check(
    name: str,
    quality_ratio: Estimate,
    cost_ratio: Estimate,
    quality_frac: float = 0.95,
    cost_frac: float = 0.5,
) -> TargetResult:
    """Check ``quality >= quality_frac * ref`` and ``cost <= cost_frac * ref``.

    Args:
        name: System name.
        quality_ratio: Quality ratio to the reference (paired bootstrap estimate).
        cost_ratio: Cost ratio to the reference.
        quality_frac: Required share of the reference quality.
        cost_frac: Allowed share of the reference cost.

    Returns:
        The :class:`TargetResult`.
    """
    passed = quality_ratio.mean >= quality_frac and cost_ratio.mean <= cost_frac
    robust = passed and quality_ratio.lo >= quality_frac and cost_ratio.hi <= cost_frac
    return TargetResult(name, quality_ratio, cost_ratio, bool(passed), bool(robust))


@dataclass(frozen=True)
class Dominance:
    """Does the router family dominate the baselines?

    Attributes:
        dominated_by: ``{baseline: name of a router that dominates it, or None}``. The
            dominating router chosen is the cheapest one.
        verdict: ``"yes"`` (every baseline dominated), ``"partly"`` or ``"no"``.
        undominated_routers: Routers that no baseline dominates (on the joint frontier).
        tied_by: ``{baseline: a router at exactly its cost and quality, or None}`` for the
            baselines no router dominates. A tied baseline is on the routers' frontier, not
            above it (a router whose λ makes it take the baseline's path, e.g. all-LOW at a
            large λ).
    """

    dominated_by: dict[str, str | None]
    verdict: str
    undominated_routers: list[str] = field(default_factory=list)
    tied_by: dict[str, str | None] = field(default_factory=dict)

    @property
    def above_routers(self) -> list[str]:
        """Baselines neither dominated nor tied by a router: the ones above the routers' frontier."""
        return [b for b, r in self.dominated_by.items() if r is None and self.tied_by.get(b) is None]


def dominance(routers: Sequence[Point], baselines: Sequence[Point]) -> Dominance:
    """Check which baselines some router dominates, and which routers survive the baselines.

    Args:
        routers: Router points.
        baselines: Baseline points.

    Returns:
        The :class:`Dominance` result.
    """
    _check_finite([*routers, *baselines])
    by: dict[str, str | None] = {}
    tied: dict[str, str | None] = {}
    for b in sorted(baselines, key=lambda p: (p.cost, p.name)):
        winners = sorted((r for r in routers if dominates(r, b)), key=lambda r: (r.cost, -r.quality, r.name))
        by[b.name] = winners[0].name if winners else None
        if not winners:
            # Exact equality: a router taking the baseline's path on every question reproduces its
            # per-question records, hence bit-identical means.
            same = sorted(r.name for r in routers if r.cost == b.cost and r.quality == b.quality)
            tied[b.name] = same[0] if same else None
    n_dom = sum(v is not None for v in by.values())
    verdict = "yes" if by and n_dom == len(by) else ("partly" if n_dom else "no")
    survivors = [r.name for r in routers if not any(dominates(b, r) for b in baselines)]
    return Dominance(dominated_by=by, verdict=verdict, undominated_routers=sorted(survivors), tied_by=tied)
