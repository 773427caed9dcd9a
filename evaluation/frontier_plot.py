"""PNG Pareto plot of a :class:`evaluation.report.FrontierReport` (quality vs cost)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless; must precede pyplot
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.text import Annotation, Text
from matplotlib.transforms import Bbox

from common.atomic import atomic_write_with
from evaluation.aggregate import SystemSummary
from evaluation.frontier import Point, pareto_frontier
from evaluation.report import FrontierReport
from evaluation.router_metrics import nondecreasing_hull
from modules.tier import MODULE_ORDER

_LABELS = {
    "f1": "token F1",
    "em": "exact match",
    "judge": "LLM-judge score",
    "module_cost": "module cost per question",
    "total_cost": "total cost per question (incl. answer)",
}


#: Costs spanning more than this ratio get a symlog x-axis (all-HIGH can cost 10^6x all-LOW, which
#: on a linear axis squeezes every cheap system into one pixel column at x = 0).
LOG_SPAN = 100.0


def x_scale(costs: list[float]) -> tuple[str, float]:
    """Choose the cost axis: ``("linear", 0)`` or ``("symlog", linthresh)``.

    Symlog (not log) keeps a zero-cost system plottable; its linear band ends at the cheapest
    positive cost, so every positive cost sits on the logarithmic part.

    Args:
        costs: The plotted costs (finite).

    Returns:
        The matplotlib scale name and, for symlog, its ``linthresh``.
    """
    pos = [c for c in costs if c > 0]
    if len(pos) < 2 or max(pos) / min(pos) <= LOG_SPAN:
        return "linear", 0.0
    return "symlog", min(pos)


def merge_labels(items: list[tuple[float, float, str]], scale: str) -> list[tuple[float, float, str]]:
    """Join the labels of points that sit on one spot, so they print once and legibly.

    A point joins the first earlier spot within 1% of the quality span (at least 0.001) and,
    on the cost axis, within 0.05 decades (symlog; non-positive costs are one spot) or 1% of the
    largest cost (linear): closer than that, two labels overprint at the plot's size.

    Args:
        items: ``(cost, quality, label)`` per plotted point, in drawing order.
        scale: The cost axis scale from :func:`x_scale`.

    Returns:
        One ``(cost, quality, "label1, label2...")`` per spot (at its first point), in first-seen order.
    """
    if not items:
        return []
    qs = [q for _, q, _ in items]
    q_tol = max(0.01 * (max(qs) - min(qs)), 1e-3)
    c_span = max(abs(c) for c, _, _ in items) or 1.0

    def near_cost(a: float, b: float) -> bool:
        if scale == "linear":
            return abs(a - b) <= 0.01 * c_span
        if a <= 0 or b <= 0:
            return a <= 0 and b <= 0
        return abs(math.log10(a / b)) <= 0.05

    spots: list[tuple[float, float, list[str]]] = []
    for cost, quality, text in items:
        for c, q, texts in spots:
            if abs(q - quality) <= q_tol and near_cost(c, cost):
                texts.append(text)
                break
        else:
            spots.append((cost, quality, [text]))
    return [(c, q, ", ".join(texts)) for c, q, texts in spots]


def _text_box(ann: Annotation) -> Bbox:
    """Display box of an annotation's text alone, at its current offset."""
    # Annotation's own extent first: it lays the figure out and moves the text to xyann (Text's
    # extent alone would measure the stale place); it also covers the leader line, which may
    # cross other labels harmlessly, so the text's extent is what is compared.
    ann.get_window_extent()
    return Text.get_window_extent(ann)


def separate_labels(
    annotations: list[Annotation], obstacles: Sequence[Bbox] = (), step: float = 9.0, max_moves: int = 8
) -> None:
    """Move point labels until none overprints an earlier one or an obstacle.

    :func:`merge_labels` joins labels of points on one spot; points a little apart (e.g. two
    paths at the same F1 and 0.1 decades of cost apart) still get labels wider than the gap.
    Each label, in drawing order, tries offsets of ``step`` points below, then above, its
    place (down first: labels sit above-right of their point), up to ``max_moves`` steps each
    way, and keeps the first whose text box is clear; a label with no clear place stays where
    it was drawn, so a crowded plot still draws. Only the text is measured, not the leader line.

    Args:
        annotations: Labels drawn with ``textcoords="offset points"``, all on one figure.
        obstacles: Display-space boxes no label may cover (the legend).
        step: How far to move a label per step, in points.
        max_moves: The most steps one label is moved either way.
    """
    placed: list[Bbox] = list(obstacles)
    for ann in annotations:
        dx, dy = ann.xyann
        for k in range(2 * max_moves + 1):
            # 0, -1, +1, -2, +2, ... steps
            ann.xyann = (dx, dy + (k + 1) // 2 * (-step if k % 2 else step))
            box = _text_box(ann)
            if not any(box.overlaps(other) for other in placed):
                break
        else:
            ann.xyann = (dx, dy)
            box = _text_box(ann)
        placed.append(box)


def _step_xy(points: list[Point], x_max: float) -> tuple[list[float], list[float]]:
    xs: list[float] = []
    ys: list[float] = []
    for i, p in enumerate(points):
        end = points[i + 1].cost if i + 1 < len(points) else x_max
        xs += [p.cost, end]
        ys += [p.quality, p.quality]
    return xs, ys


def plot_frontier(report: FrontierReport, path: str | Path, title: str = "") -> Path:
    """Draw the Pareto plot and write it atomically as PNG.

    Args:
        report: The analysed frontier.
        path: Destination ``.png``.
        title: Figure title (benchmark, split, question count...).

    Returns:
        The written path.
    """
    fig, _, _ = frontier_figure(report, title)

    def _save(tmp: Path) -> None:
        fig.savefig(tmp, format="png", dpi=120)

    try:
        return atomic_write_with(path, _save)
    finally:
        plt.close(fig)


def frontier_figure(report: FrontierReport, title: str = "") -> tuple[Figure, Axes, Text | None]:
    """Lay out the Pareto plot (and the routers' tier shares, when there are routers).

    Args:
        report: The analysed frontier.
        title: Figure title.

    Returns:
        The figure (the caller closes it), the frontier axes and the router-metrics box under
        them (None when no router metrics are drawn).
    """
    q, c = report.quality, report.cost
    routers = [s for s in report.summaries if s.kind == "router"]
    # The metrics box sits under the frontier axes: grow the figure by its height, not the axes.
    rows = _metric_rows(report)
    height = 5.5 + 0.13 * len(rows)
    if routers:
        fig, (ax, ax_t) = plt.subplots(1, 2, figsize=(13, height), gridspec_kw={"width_ratios": [3, 2]})
    else:
        fig, ax = plt.subplots(figsize=(8, height))
        ax_t = None
    pts = [p for p in report.points() if math.isfinite(p.cost) and math.isfinite(p.quality)]
    by_name = {s.name: s for s in report.summaries}
    x_max = max((p.cost for p in pts), default=1.0) * 1.05 or 1.0
    ref = by_name.get(report.reference or "")
    if ref is not None and ref.metrics[q].mean > 0 and pts:
        # Target region: >= quality_frac of the reference quality at <= cost_frac of its cost.
        ax.fill_between(
            [0, report.cost_frac * ref.metrics[c].mean],
            report.quality_frac * ref.metrics[q].mean,
            max(p.quality for p in pts) * 1.05 + 1e-9,
            color="tab:green",
            alpha=0.12,
            label=f">= {report.quality_frac:.0%} {q} at <= {report.cost_frac:.0%} cost",
        )
    if "baselines" in report.scores:
        line = report.scores["baselines"]
        tag = " (APGR 0.5)" if line.q_hi > line.q_lo else ""  # RouteLLM's APGR of the straight line
        ax.plot(
            [line.c_lo, line.c_hi],
            [line.q_lo, line.q_hi],
            ls=":",
            color="grey",
            lw=1,
            label=f"{line.low} to {line.high} line{tag}",
        )
    scale, linthresh = x_scale([p.cost for p in pts])
    colours = plt.get_cmap("viridis")
    for kind, family in (("baseline", "baselines"), ("router", "routers")):
        fam = [p for p in pts if p.kind == kind]
        if not fam:
            continue
        score = report.scores.get(family)
        if score is not None and kind == "router":
            # Draw what the frontier score integrates: the routers plus the always-available floor.
            floor = next(p for p in pts if p.name == score.low)
            fam = [*fam, floor]
        front = pareto_frontier(fam)
        xs, ys = _step_xy(front, x_max)
        label = f"{family} frontier" + (
            f" (step PGR {score.step_pgr:.2f}, AUC {score.auc:.2f})"
            if score and math.isfinite(score.step_pgr)
            else ""
        )
        ax.plot(
            xs,
            ys,
            drawstyle="default",
            color="tab:blue" if kind == "router" else "grey",
            lw=1.5,
            alpha=0.8,
            label=label,
        )
    labels: list[tuple[float, float, str]] = []
    for p in pts:
        s = by_name[p.name]
        eq, ec = s.metrics[q], s.metrics[c]
        yerr = [[max(p.quality - eq.lo, 0)], [max(eq.hi - p.quality, 0)]]
        xerr = [[max(p.cost - ec.lo, 0)], [max(ec.hi - p.cost, 0)]]
        colour: str | tuple[float, float, float, float]
        if s.kind == "router":
            i = routers.index(s)
            colour = colours(i / max(len(routers) - 1, 1) * 0.85)
            marker = "o"
        elif s.kind == "oracle":
            colour, marker = "tab:red", "*"
        else:
            colour, marker = "dimgrey", "s"
        # Routers on top: a router that takes a baseline's path sits exactly on its square.
        z = 3 if s.kind == "router" else 2
        ax.errorbar(
            [p.cost], [p.quality], xerr=xerr, yerr=yerr, fmt=marker, color=colour, ms=6, capsize=2, zorder=z
        )
        text = _router_tag(s, prefix_conditioned=True) if s.kind == "router" else p.name
        if not s.params.get("single_module"):  # ten of them share a few spots: unlabelled grey squares
            labels.append((p.cost, p.quality, text))
    annotations = [
        # A faint leader line: once separate_labels moves a label off its point, the line still
        # says which point it names (at the default offset it is a few points long and unobtrusive).
        ax.annotate(
            text,
            (x, y),
            textcoords="offset points",
            xytext=(4, 4),
            fontsize=8,
            arrowprops={"arrowstyle": "-", "color": "0.55", "lw": 0.5, "shrinkA": 0, "shrinkB": 2},
        )
        for x, y, text in merge_labels(labels, scale)
    ]
    metrics_box = _draw_router_metrics(ax, report, pts, rows)
    if scale == "symlog":
        ax.set_xscale("symlog", linthresh=linthresh)
    ax.set_xlabel(_LABELS.get(c, c) + (" (symlog)" if scale == "symlog" else ""))
    ax.set_ylabel(_LABELS.get(q, q))
    ax.set_xlim(left=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    ax.set_title("cost-quality frontier (95% bootstrap CIs)", fontsize=10)

    if ax_t is not None:
        _draw_tier_shares(ax_t, routers)
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    # After the layout: the label boxes are only known in their final place.
    legend = ax.get_legend()
    obstacles = [legend.get_window_extent()] if legend is not None else []
    separate_labels(annotations, obstacles)
    return fig, ax, metrics_box


def _router_tag(s: SystemSummary, *, prefix_conditioned: bool) -> str:
    """Short plot label of a router point: ``run6 λ=1`` (labelled), ``cond λ=1``, ``λ=1`` or its name."""
    lam = s.params.get("cost_lambda")
    if not isinstance(lam, (int, float)):
        return s.name
    label = s.params.get("label")
    if label:
        return f"{label} λ={lam:g}"
    # one λ-conditioned router's points
    return ("cond " if prefix_conditioned and s.params.get("conditioned") else "") + f"λ={lam:g}"


#: Bar colours of the tiers (light to dark: cheap to dear).
_TIER_COLOURS = {"LOW": "#c6dbef", "MID": "#6baed6", "HIGH": "#08519c"}


def _draw_tier_shares(ax: plt.Axes, routers: list[SystemSummary]) -> None:
    """Per module, one stacked LOW/MID/HIGH bar per router (as BudgetMem's Fig. 4 shows them by λ).

    A λ-conditioned router contributes one system per λ, so its bars read left to right as λ grows
    when the routers are listed that way (the report's order).
    """
    n = len(routers)
    width = 0.8 / n
    x = np.arange(len(MODULE_ORDER))
    for i, s in enumerate(routers):
        bottom = np.zeros(len(MODULE_ORDER))
        for tier, colour in _TIER_COLOURS.items():
            share = np.array([s.tier_ratios[m][tier] for m in MODULE_ORDER], dtype=float)
            ax.bar(
                x + i * width,
                share,
                width * 0.92,
                bottom=bottom,
                color=colour,
                edgecolor="white",
                linewidth=0.4,
                label=tier if i == 0 else None,
            )
            bottom += share
        tag = _router_tag(s, prefix_conditioned=False)
        for j in range(len(MODULE_ORDER)):
            ax.text(x[j] + i * width, 1.01, tag, rotation=90, fontsize=6, ha="center", va="bottom")
    ax.set_xticks(x + 0.4 - width / 2, MODULE_ORDER)
    ax.set_ylim(0, 1.35)
    ax.set_yticks([0, 0.25, 0.5, 0.75, 1.0])
    ax.set_ylabel("share of questions")
    ax.legend(fontsize=7, loc="upper right", ncol=3)
    ax.set_title("routers: tier shares per module (one bar per router / λ)", fontsize=10)


def _metric_rows(report: FrontierReport) -> list[str]:
    """One line of APGR / CPT / AIQ per family on the plotted cost axis (none without router metrics)."""
    rm = report.router_metrics
    if rm is None or rm.low is None:
        return []
    return [
        f"{f.family}: APGR {f.apgr.mean:.2f}  CPT50 {f.cpt[0.5].mean:.2f}  CPT80 {f.cpt[0.8].mean:.2f}  "
        f"AIQ {f.aiq.mean:.3f}"
        for f in rm.families
        if f.cost == report.cost
    ]


def _draw_router_metrics(
    ax: plt.Axes, report: FrontierReport, pts: list[Point], rows: list[str]
) -> Text | None:
    """The routers' AIQ hull (dashed) and a box of the :func:`_metric_rows` under the x-axis label.

    Returns:
        The box, or None when none is drawn.
    """
    rm = report.router_metrics
    if rm is None or rm.low is None:
        return None
    low = next((p for p in pts if p.name == rm.low), None)
    routers = [(p.cost, p.quality) for p in pts if p.kind == "router"]
    if low is not None and routers:
        hull = nondecreasing_hull([*routers, (low.cost, low.quality)])
        xs, ys = [c for c, _ in hull], [q for _, q in hull]
        ax.plot(xs, ys, ls="--", color="tab:blue", lw=1, alpha=0.6, label="routers' AIQ hull")
    if not rows:
        return None
    # Under the x-axis label, outside the data area: inside it, the box hid points and error bars
    # (on LongMemEval it covered five baselines). tight_layout makes room for it.
    return ax.annotate(
        "\n".join(rows),
        xy=(0.5, 0.0),
        xycoords=ax.xaxis.label,
        xytext=(0, -6),
        textcoords="offset points",
        ha="center",
        va="top",
        multialignment="left",
        fontsize=6.5,
        family="monospace",
        bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "lightgrey"},
    )
