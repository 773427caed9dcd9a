import csv
import json

import numpy as np
import pytest

from evaluation.aggregate import Run, SystemRuns, summarise
from evaluation.frontier_plot import plot_frontier
from evaluation.report import analyse, format_table, verdict_lines, write_csv, write_json

N = 40
QIDS = [f"q{i}" for i in range(N)]


def system(name, kind, f1, cost, tiers="HIGH", seeds=(0,), lam=None, judge=True):
    """A system whose every question has F1 `f1` (+ small per-question noise) and module cost `cost`."""
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
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
    png = plot_frontier(rep, tmp_path / "f.png", title="test")
    blob = png.read_bytes()
    assert blob[:8] == b"\x89PNG\r\n\x1a\n" and len(blob) > 10_000


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
