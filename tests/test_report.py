import csv
import json
import zlib

import numpy as np
import pytest

from evaluation.aggregate import Run, SystemRuns, summarise
from evaluation.frontier_plot import frontier_figure, plot_frontier
from evaluation.report import analyse, format_table, verdict_lines, write_csv, write_json

N = 40
QIDS = [f"q{i}" for i in range(N)]


def system(name, kind, f1, cost, tiers="HIGH", seeds=(0,), lam=None, judge=True):
    """A system whose every question has F1 `f1` (+ small per-question noise) and module cost `cost`."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))  # str hash() changes per process
    runs = []
    for seed in seeds:
        noise = rng.normal(0, 0.02, N)
        recs = [
            {
                "question_id": q,
                "category": str(1 + i % 2),
                "tiers": [tiers] * 5,
                "f1": float(np.clip(f1 + noise[i], 0, 1)),
                "em": float(f1 > 0.5),
                "judge": float(f1 > 0.4) if judge else None,
                "judge_failed": False,
                "failures": 0,
                "module_cost": cost,
                "answer_cost": 1.0,
                "total_cost": cost + 1.0,
                "latency_s": cost / 10,
            }
            for i, q in enumerate(QIDS)
        ]
        runs.append(Run(f"{name}@{seed}", recs, seed))
    params = {"cost_lambda": lam} if lam is not None else {}
    return summarise(SystemRuns(name, kind, runs, params), QIDS, n_boot=400)


def baselines():
    return [
        system("all-low", "baseline", 0.20, 1.0, "LOW"),
        system("all-mid", "baseline", 0.40, 3.0, "MID"),
        system("all-high", "baseline", 0.60, 5.0, "HIGH"),
    ]


def test_analyse_yes_case_and_outputs(tmp_path):
    routers = [
        system("router λ=0.1", "router", 0.59, 2.0, "MID", seeds=(0, 1), lam=0.1),
        system("router λ=0.5", "router", 0.45, 1.5, "LOW", seeds=(0, 1), lam=0.5),
    ]
    rep = analyse([*baselines(), *routers])
    assert [s.name for s in rep.summaries][:2] == ["router λ=0.1", "router λ=0.5"]
    assert rep.reference == "all-high"
    t = {x.name: x for x in rep.targets}
    assert t["router λ=0.1"].passed and not t["router λ=0.5"].passed
    assert t["router λ=0.1"].cost_ratio.mean == pytest.approx(0.4)
    assert t["router λ=0.1"].quality_ratio.mean == pytest.approx(
        rep.summaries[0].metrics["f1"].mean / rep.summaries[-1].metrics["f1"].mean
    )
    assert rep.dominance.verdict == "partly"
    assert rep.dominance.dominated_by["all-low"] is None
    assert rep.dominance.dominated_by["all-mid"] == "router λ=0.5"
    assert rep.scores["routers"].step_pgr > rep.scores["baselines"].step_pgr
    lines = verdict_lines(rep)
    text = "\n".join(lines)
    assert "Q1." in text and "YES: router λ=0.1." in text
    # λ=0.1 (cost 2, F1 .59) is cheaper than all-high (5, .60) but not as good: all-high survives
    assert "PARTLY: routers dominate 1 of 3 baselines." in text
    assert "all-high: not dominated by any router" in text
    assert "all-low: not dominated by any router" in text
    assert "above the routers' frontier: all-low, all-high." in text
    # all-high (5.0, ~.60) is compared with the routers' best at <= its cost: λ=0.1 (2.0, ~.59), paired
    gap = rep.above_gaps["all-high"]
    hi_s, r_s = rep.summaries[-1], rep.summaries[0]
    assert gap.router == "router λ=0.1"
    assert gap.diff.mean == pytest.approx(hi_s.metrics["f1"].mean - r_s.metrics["f1"].mean)
    assert gap.diff.lo <= gap.diff.mean <= gap.diff.hi
    # all-low (cost 1.0) is cheaper than every router: no frontier to compare with
    assert rep.above_gaps["all-low"].router is None and rep.above_gaps["all-low"].diff is None
    assert "all-low: cheaper than every router" in text
    assert "all-high: f1 " in text and "over router λ=0.1" in text
    assert "cheaper than every router: all-low." in text
    table = format_table(rep)
    assert "router λ=0.1 *" in table and "40.0%" in table

    write_csv(rep, tmp_path / "f.csv")
    with open(tmp_path / "f.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert next(r["system"] for r in rows) == "router λ=0.1"
    assert float(rows[0]["module_cost_ratio"]) == pytest.approx(0.4)
    assert float(rows[0]["tier_filter_MID"]) == 1.0
    write_json(rep, tmp_path / "f.json", {"checkpoint_ids": ["abc"]})
    data = json.loads((tmp_path / "f.json").read_text())
    assert data["metadata"]["checkpoint_ids"] == ["abc"]
    assert data["targets"][0]["passed"] is True
    assert data["verdict"] == lines
    assert data["dominance"]["above_gaps"]["all-low"] == {"router": None, "diff": None}
    assert data["dominance"]["above_gaps"]["all-high"]["router"] == "router λ=0.1"
    png = plot_frontier(rep, tmp_path / "f.png", title="test")
    blob = png.read_bytes()
    assert blob[:8] == b"\x89PNG\r\n\x1a\n" and len(blob) > 10_000


def test_above_gap_tells_a_clear_miss_from_noise():
    """A baseline far above the routers at its cost is a clear miss; one within noise is not."""
    routers = [system("router λ=1", "router", 0.30, 2.0, "LOW", lam=1.0)]
    far = system("fixed:far", "baseline", 0.55, 2.5, "MID")  # +0.25 F1 for a little more cost
    near = system("fixed:near", "baseline", 0.305, 2.2, "MID")  # +0.005: per-question noise is 0.02
    rep = analyse([*baselines(), far, near, *routers])
    assert rep.above_gaps["fixed:far"].clearly_above
    assert rep.above_gaps["fixed:far"].diff.lo > 0.2
    assert not rep.above_gaps["fixed:near"].clearly_above
    assert rep.above_gaps["fixed:near"].diff.lo < 0 < rep.above_gaps["fixed:near"].diff.hi
    text = "\n".join(verdict_lines(rep))
    far_line = next(ln for ln in text.splitlines() if ln.strip().startswith("fixed:far: f1 "))
    near_line = next(ln for ln in text.splitlines() if ln.strip().startswith("fixed:near: f1 "))
    assert "over router λ=1" in far_line and far_line.endswith("above with its whole interval")
    assert near_line.endswith("within noise")
    summary = next(ln for ln in text.splitlines() if "above with the whole 95% interval:" in ln)
    assert "fixed:far" in summary and "fixed:near" not in summary


def test_no_case_and_missing_judge(tmp_path):
    routers = [system("router λ=0.3", "router", 0.50, 4.0, "MID", lam=0.3, judge=False)]
    rep = analyse([*baselines(), *routers])
    text = "\n".join(verdict_lines(rep))
    assert "NO: no router meets both thresholds." in text
    assert "cheapest at the quality target" not in text
    # (4.0, .50) is dearer than all-mid (3.0, .40) and worse than all-high (5.0, .60): dominates nothing
    assert rep.dominance.verdict == "no"
    assert "NO: routers dominate 0 of 3 baselines." in text
    assert "best within the cost budget" not in text
    assert np.isnan(rep.summaries[0].metrics["judge"].mean)
    write_json(rep, tmp_path / "r.json")
    assert json.loads((tmp_path / "r.json").read_text())["systems"][0]["metrics"]["judge"]["mean"] is None
    assert plot_frontier(rep, tmp_path / "r.png").stat().st_size > 0


def test_baselines_only_and_bad_metric(tmp_path):
    rep = analyse(baselines())
    text = "\n".join(verdict_lines(rep))
    assert "CANNOT TELL: no router was evaluated." in text
    assert rep.scores["baselines"].step_pgr > 0
    assert plot_frontier(rep, tmp_path / "b.png").stat().st_size > 0
    with pytest.raises(ValueError, match="unknown metric"):
        analyse(baselines(), quality="bleu")


def test_x_scale_goes_symlog_only_when_costs_span_more_than_a_hundredfold():
    from evaluation.frontier_plot import x_scale

    assert x_scale([1.0, 3.0, 5.0]) == ("linear", 0.0)
    assert x_scale([0.0, 1.0, 100.0]) == ("linear", 0.0)  # exactly 100x: still linear
    # the cpu_quality ladder: all-LOW 0.0025 .. all-HIGH 12,847 GFLOPs
    assert x_scale([0.0025, 0.0067, 69.3, 12847.0]) == ("symlog", 0.0025)
    assert x_scale([0.0, 0.01, 5.0]) == ("symlog", 0.01)  # a zero cost stays on the axis
    assert x_scale([0.0, 3.0]) == ("linear", 0.0)


def test_merge_labels_joins_points_on_one_spot_and_keeps_the_rest():
    from evaluation.frontier_plot import merge_labels

    items = [
        (0.0067, 0.4243, "cond λ=1"),
        (0.0066, 0.4241, "cond λ=3"),  # log10(67/66) < 0.05 decades, ΔF1 < 1% of the F1 span
        (0.0067, 0.4240, "fixed:L,L,M,L,L"),
        (0.0025, 0.389, "all-low"),
        (0.0025, 0.3885, "cond λ=10"),
        (0.118, 0.425, "cond λ=0"),  # F1 on the spot, cost 1.2 decades away: its own spot
        (69.3, 0.413, "all-mid"),
    ]
    merged = merge_labels(items, "symlog")
    assert merged == [
        (0.0067, 0.4243, "cond λ=1, cond λ=3, fixed:L,L,M,L,L"),
        (0.0025, 0.389, "all-low, cond λ=10"),
        (0.118, 0.425, "cond λ=0"),
        (69.3, 0.413, "all-mid"),
    ]
    # on a linear axis up to 69.3, λ=0 at 0.118 is within 1% of the span: it joins the F1=0.424 spot
    lin = merge_labels(items, "linear")
    assert [t for _, _, t in lin] == [
        "cond λ=1, cond λ=3, fixed:L,L,M,L,L, cond λ=0",
        "all-low, cond λ=10",
        "all-mid",
    ]
    assert merge_labels([(0.0, 0.5, "a"), (0.0, 0.5, "b"), (0.1, 0.5, "c")], "symlog") == [
        (0.0, 0.5, "a, b"),
        (0.1, 0.5, "c"),
    ]


def test_separate_labels_moves_overprinting_labels_apart():
    import matplotlib.pyplot as plt

    from evaluation.frontier_plot import separate_labels

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.set_xscale("symlog", linthresh=0.001)
    ax.set_xlim(0, 20_000)
    ax.set_ylim(0.4, 0.6)
    # the HotpotQA test plot: two single-HIGH paths at F1 0.548 / 0.549, 2,870 and 3,410 GFLOPs
    spots = [(2870.0, 0.548, "fixed:L,L,L,L,H"), (3410.0, 0.549, "fixed:H,L,L,L,L"), (0.002, 0.5, "all-low")]
    anns = [
        ax.annotate(t, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8) for x, y, t in spots
    ]
    fig.tight_layout()
    assert anns[0].get_window_extent().overlaps(anns[1].get_window_extent())  # the bug this fixes
    separate_labels(anns)
    boxes = [a.get_window_extent() for a in anns]
    assert not any(boxes[i].overlaps(boxes[j]) for i in range(3) for j in range(i))
    assert anns[0].xyann == (4, 4) and anns[2].xyann == (4, 4)  # labels already clear stay put
    assert anns[1].xyann != (4, 4) and anns[1].xyann[0] == 4  # the later one moved, vertically only
    plt.close(fig)


def test_separate_labels_keeps_clear_of_obstacles_and_ignores_leader_lines():
    import matplotlib.pyplot as plt
    from matplotlib.text import Text

    from evaluation.frontier_plot import separate_labels

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 10)
    line = {"arrowstyle": "-", "shrinkA": 0, "shrinkB": 2}
    ann = ax.annotate("label", (5, 5), textcoords="offset points", xytext=(4, 4), arrowprops=line)
    below = ax.annotate("other", (5, 4.6), textcoords="offset points", xytext=(4, 4), arrowprops=line)
    fig.tight_layout()
    # an obstacle (the metrics box) right where the first label sits, and just below it
    box = Text.get_window_extent(ann)
    obstacle = box.expanded(1.0, 3.0)
    separate_labels([ann, below], [obstacle])
    first = Text.get_window_extent(ann)
    assert not first.overlaps(obstacle)
    assert ann.xyann[1] > 4  # down was blocked too, so it went up
    assert not Text.get_window_extent(below).overlaps(first)
    assert not Text.get_window_extent(below).overlaps(obstacle)
    plt.close(fig)


def test_plot_with_a_wide_cost_span_renders(tmp_path):
    sys_ = [
        system("all-low", "baseline", 0.20, 0.002, "LOW"),
        system("all-mid", "baseline", 0.40, 70.0, "MID"),
        system("all-high", "baseline", 0.42, 12_000.0, "HIGH"),
        system("router λ=1", "router", 0.41, 0.007, "MID", lam=1.0),
    ]
    rep = analyse(sys_)
    blob = plot_frontier(rep, tmp_path / "w.png").read_bytes()
    assert blob[:8] == b"\x89PNG\r\n\x1a\n" and len(blob) > 10_000


def test_router_metrics_box_sits_under_the_axes_not_on_the_points():
    """The APGR/CPT/AIQ box is drawn under the x-axis label, inside the figure, clear of the data area."""
    import matplotlib.pyplot as plt

    routers = [
        system(f"router λ={lam}", "router", 0.3 + 0.05 * i, 1.0 + i, "MID", lam=float(lam))
        for i, lam in enumerate([0.1, 1, 3])
    ]
    fig, ax, box = frontier_figure(analyse([*baselines(), *routers]), title="t")
    try:
        assert box is not None and "APGR" in box.get_text() and "AIQ" in box.get_text()
        fig.canvas.draw()
        b, data, label = box.get_window_extent(), ax.get_window_extent(), ax.xaxis.label.get_window_extent()
        assert b.y1 <= label.y0 <= data.y0  # under the axis label, which is under the data area
        assert b.y0 >= 0 and b.x0 >= 0 and b.x1 <= fig.bbox.x1  # not cut off
    finally:
        plt.close(fig)
    _, _, only = frontier_figure(analyse(baselines()))
    assert only is not None and "routers:" not in only.get_text() and "baselines:" in only.get_text()
    plt.close("all")
