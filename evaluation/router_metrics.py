"""The router metrics the routing literature reports: RouteLLM's APGR and CPT, RouterBench's AIQ."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

#: The PGR levels of the CPT columns (RouteLLM reports CPT(50%) and CPT(80%)).
CPT_LEVELS: tuple[float, ...] = (0.5, 0.8)


@dataclass(frozen=True)
class Ends:
    """The weak (all-LOW) and strong (all-HIGH) ends of one cost axis.

    Attributes:
        c_low: Mean cost of all-LOW.
        q_low: Mean quality of all-LOW.
        c_high: Mean cost of all-HIGH.
        q_high: Mean quality of all-HIGH.
    """

    c_low: float
    q_low: float
    c_high: float
    q_high: float

    @property
    def has_gap(self) -> bool:
        """Whether PGR is defined: all-HIGH is better than all-LOW."""
        return self.q_high > self.q_low

    @property
    def has_range(self) -> bool:
        """Whether cost shares are defined: all-HIGH costs more than all-LOW."""
        return self.c_high > self.c_low


def cost_share(cost: float, ends: Ends) -> float:
    """``(cost - c_low) / (c_high - c_low)``; NaN without a cost range."""
    return (cost - ends.c_low) / (ends.c_high - ends.c_low) if ends.has_range else math.nan


def pgr(quality: float, ends: Ends) -> float:
    """``(quality - q_low) / (q_high - q_low)``; NaN without a quality gap."""
    return (quality - ends.q_low) / (ends.q_high - ends.q_low) if ends.has_gap else math.nan


def _finite(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    return [(float(c), float(q)) for c, q in points if math.isfinite(c) and math.isfinite(q)]


def pgr_curve(points: Sequence[tuple[float, float]], ends: Ends) -> list[tuple[float, float]]:
    """The family's ``(cost share, PGR)`` points with the ends (0, 0) and (1, 1), sorted.

    Args:
        points: ``(cost, quality)`` of each member of the family.
        ends: The all-LOW / all-HIGH ends.

    Returns:
        The curve's vertices (empty when the ends define no cost range or no quality gap).
    """
    if not (ends.has_gap and ends.has_range):
        return []
    pts = [(cost_share(c, ends), pgr(q, ends)) for c, q in _finite(points)]
    return sorted([(0.0, 0.0), (1.0, 1.0), *pts])


def _segment_area(curve: Sequence[tuple[float, float]], lo: float, hi: float) -> float:
    """Trapezoid area under the polyline ``curve`` restricted to ``[lo, hi]``."""
    area = 0.0
    for (x0, y0), (x1, y1) in itertools.pairwise(curve):
        a, b = max(x0, lo), min(x1, hi)
        if b <= a:
            continue  # outside the range, or a vertical step (no width)
        slope = (y1 - y0) / (x1 - x0)
        ya, yb = y0 + slope * (a - x0), y0 + slope * (b - x0)
        area += 0.5 * (ya + yb) * (b - a)
    return area


def apgr(points: Sequence[tuple[float, float]], ends: Ends) -> float:
    """RouteLLM's average performance gap recovered (see docs/design/evaluation.md); NaN if undefined."""
    curve = pgr_curve(points, ends)
    return _segment_area(curve, 0.0, 1.0) if curve else math.nan


def cpt(points: Sequence[tuple[float, float]], ends: Ends, level: float) -> float:
    """RouteLLM's CPT(level): smallest cost share where the PGR curve reaches ``level``; NaN if undefined.

    Args:
        points: ``(cost, quality)`` of the family's members.
        ends: The all-LOW / all-HIGH ends.
        level: The PGR to reach (0.5 for CPT(50%)).

    Returns:
        The cost share (NaN when PGR is undefined or the curve never reaches ``level``).
    """
    curve = pgr_curve(points, ends)
    for i, (x, y) in enumerate(curve):
        if y >= level:
            if i == 0:
                return x
            x0, y0 = curve[i - 1]
            # y0 < level <= y: the first crossing lies inside this segment
            return x0 + (level - y0) / (y - y0) * (x - x0)
    return math.nan


def nondecreasing_hull(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """RouterBench's non-decreasing convex hull: the upper concave hull of the Pareto points.

    Args:
        points: ``(cost, quality)`` points (non-finite ones are ignored).

    Returns:
        Hull vertices, cost ascending; quality strictly increases along them and the hull is
        concave (each vertex lies strictly above the chord of its neighbours).
    """
    pareto: list[tuple[float, float]] = []
    for c, q in sorted(_finite(points), key=lambda p: (p[0], -p[1])):
        if not pareto or q > pareto[-1][1]:
            pareto.append((c, q))
    hull: list[tuple[float, float]] = []
    for p in pareto:
        # Drop the last vertex while it lies on or below the chord from the one before it to p.
        while len(hull) >= 2:
            (x0, y0), (x1, y1) = hull[-2], hull[-1]
            if (x1 - x0) * (p[1] - y0) - (y1 - y0) * (p[0] - x0) >= 0:
                hull.pop()
            else:
                break
        hull.append(p)
    return hull


def aiq(points: Sequence[tuple[float, float]], floor: tuple[float, float], c_lo: float, c_hi: float) -> float:
    """RouterBench's AIQ of a family over ``[c_lo, c_hi]`` (see docs/design/evaluation.md).

    Args:
        points: ``(cost, quality)`` of the family's members.
        floor: The always-available fallback (all-LOW), included in the hull.
        c_lo: Start of the cost range (all-LOW's cost).
        c_hi: End of the cost range (all-HIGH's cost).

    Returns:
        Mean of the hull's quality over the range; NaN when ``c_hi <= c_lo`` or the floor or range
        is not a number (e.g. no judge scores).

    Raises:
        ValueError: If the floor costs more than ``c_lo`` (the hull would not cover the range).
    """
    if not (c_hi > c_lo and math.isfinite(floor[0]) and math.isfinite(floor[1])):
        return math.nan
    if floor[0] > c_lo:
        raise ValueError(f"AIQ floor costs {floor[0]} > start of the range {c_lo}")
    hull = nondecreasing_hull([*points, floor])
    # Flat after the best point (more budget never lowers the quality one can buy).
    hull.append((max(c_hi, hull[-1][0]) + 1.0, hull[-1][1]))
    return _segment_area(hull, c_lo, c_hi) / (c_hi - c_lo)
