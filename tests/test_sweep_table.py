"""scripts/sweep_table.py: the λ-sweep summary reads run directories and writes a table and a plot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import load_script

MODULES = ("filter", "entity", "temporal", "topic", "summary")


def _load():
    return load_script("sweep_table")


def _write_progress(path: Path, highs: list[float], first_step: int) -> None:
    tiers = [f"tiers/{m}/{t}" for m in MODULES for t in ("low", "high")]
    cols = ["time/total_timesteps", "tiers/high_share", *tiers]
    lines = [",".join(cols)]
    for i, high in enumerate(highs):
        shares = [str(1 - high), str(high)] * len(MODULES)
        lines.append(",".join([str(first_step + 10 * i), str(high), *shares]))
    lines.append("," * (len(cols) - 1))  # the trailing validation-only row SB3's logger writes
    path.write_text("\n".join(lines) + "\n")


def _run(root: Path, lam: float, highs: list[float]) -> None:
    run = root / f"locomo__implementation__lam{lam}__s0"
    run.mkdir(parents=True)
    (run / "result.json").write_text(
        json.dumps({"cost_lambda": lam, "seed": 0, "timesteps": 40, "llm_calls": 10, "cache_hits": 4})
    )
    best = {"high_share": highs[-1], "p_high": 0.3, "f1": 0.5, "module_cost": 12.0}
    val = {"select_metric": "objective", "best_step": 40, "best": best}
    (run / "validation.json").write_text(json.dumps(val))
    _write_progress(run / "progress.csv", highs, first_step=0)


def test_sweep_table_hand_case(tmp_path, capsys):
    st = _load()
    _run(tmp_path, 0.5, [0.4, 0.4, 0.2, 0.0])
    _run(tmp_path, 0.0, [0.4, 0.4, 0.6, 0.4])
    assert st.main([str(tmp_path), "--last", "0.5"]) == 0
    text = capsys.readouterr().out
    rows = [line for line in text.splitlines() if line.startswith("| 0")]
    assert rows[0].startswith(
        "| 0 | single | 0 | 40 | 0.50 | 0.50 | 0.40 | 0.30 | 0.500 | 12.0 | objective (40) | 6 |"
    )
    assert rows[1].startswith("| 0.5 | single | 0 | 40 | 0.10 | 0.90 | 0.00 |")
    png = (tmp_path / "sweep_table.png").read_bytes()
    assert png[:4] == b"\x89PNG" and len(png) > 5_000
    assert (tmp_path / "sweep_table.md").read_text() in text

    # a resumed run continues in progress-from-<step>.csv: both files count, in step order
    run = tmp_path / "locomo__implementation__lam0.5__s0"
    _write_progress(run / "progress-from-40.csv", [0.6, 0.8, 1.0, 1.0], first_step=40)
    assert st.training_shares(run, 0.5)[0] == pytest.approx(0.85)


def test_sweep_table_no_runs_and_bad_fraction(tmp_path, capsys):
    st = _load()
    assert st.main([str(tmp_path)]) == 2
    assert "no finished runs" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        st.main([str(tmp_path), "--last", "0"])


def test_sweep_table_means_over_seeds(tmp_path):
    st = _load()
    rows = [
        {"lambda": 0.1, "router": "single", "seed": 0, **dict.fromkeys(st.MEAN_KEYS, 0.2)},
        {"lambda": 0.1, "router": "single", "seed": 1, **dict.fromkeys(st.MEAN_KEYS, 0.4)},
        {"lambda": 0.0, "router": "single", "seed": 0, **dict.fromkeys(st.MEAN_KEYS, 1.0)}
        | {"val_p_high": float("nan")},
    ]
    agg = st.by_lambda(rows)
    assert [a["lambda"] for a in agg] == [0.0, 0.1] and [a["seeds"] for a in agg] == [1, 2]
    assert agg[1]["val_f1"] == pytest.approx(0.3) and agg[0]["train_high"] == 1.0
    assert "| 0.1 | single | 2 (2) | 0.30 |" in st.markdown_by_lambda(agg)
    assert "| 0 | single | 1 (1) | 1.00 | 1.00 | – |" in st.markdown_by_lambda(agg)


def test_a_conditioned_run_is_one_row_per_lambda_and_repeated_seeds_are_runs(tmp_path, capsys):
    """A λ-conditioned run is not shown as λ = 0, and three seed-0 runs are three runs of one seed."""
    st = _load()
    _run(tmp_path, 0.0, [0.4, 0.4])
    other = tmp_path / "other"
    _run(other, 0.0, [0.2, 0.2])
    (tmp_path / "locomo__implementation__lam0.0__s0").rename(tmp_path / "a__lam0__s0")
    (other / "locomo__implementation__lam0.0__s0").rename(tmp_path / "b__lam0__s0")
    cond = tmp_path / "c__lamcond0-0.5__s0"
    cond.mkdir()
    (cond / "result.json").write_text(
        json.dumps({"cost_lambda": 0.0, "cost_lambdas": [0.0, 0.5], "seed": 0, "timesteps": 40})
    )
    per = {"0": {"high_share": 0.8, "f1": 0.6, "module_cost": 30.0}, "0.5": {"high_share": 0.1, "f1": 0.4}}
    (cond / "validation.json").write_text(json.dumps({"best": {"per_lambda": per, "high_share": 0.45}}))
    assert st.main([str(tmp_path), "--glob", "*__s0"]) == 0
    text = capsys.readouterr().out
    assert "| 0 | conditioned | 0 | 40 | – | – | 0.80 |" in text
    assert "| 0.5 | conditioned | 0 | 40 | – | – | 0.10 |" in text
    assert "| 0 | single | 2 (1) |" in text  # two runs of seed 0, not "2 seeds"
