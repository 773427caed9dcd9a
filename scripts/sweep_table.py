#!/usr/bin/env python
"""Summarise a λ sweep's runs: how the router's tier choices and quality move with λ.

    python scripts/sweep_table.py runs/sweep-locomo/sweep            # markdown table + PNG
    python scripts/sweep_table.py runs --glob 'locomo__*' --last 0.5

For every run directory (one holding ``result.json``) it reads:

* ``progress*.csv``: the HIGH (and LOW) share of the *training* episodes over the last
  ``--last`` fraction of the run. These actions are sampled from the stochastic policy, so the
  share follows the policy's probabilities, not only its argmax;
* ``validation.json``: the selected router's validation HIGH share (argmax actions), mean
  P(HIGH) over its decisions when recorded, F1, module cost and the selection score;
* ``result.json``: λ, seed, timesteps, and the calls the run computed (cache misses of every
  tier, rules and models included; the LLM-only count is in ``bench_sweep_calls.py``).

It prints a markdown table sorted by (λ, seed) (plus means over seeds when a λ has several),
writes it next to a PNG plot of the per-λ means of HIGH share and F1 (``--out``, default
``<runs_dir>/sweep_table.{md,png}``).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MODULES = ("filter", "entity", "temporal", "topic", "summary")


def training_shares(run_dir: Path, last: float) -> tuple[float, float, int]:
    """Mean HIGH and LOW shares of the training rollouts in the last ``last`` fraction of the run.

    Reads ``progress.csv`` and, for a resumed run, its ``progress-from-<step>.csv`` files.

    Returns:
        ``(high_share, low_share, rollouts averaged)``; NaNs when no CSV has tier columns.
    """
    rows: list[dict[str, str]] = []
    for path in sorted(run_dir.glob("progress*.csv")):
        with path.open(newline="") as fh:
            rows += [r for r in csv.DictReader(fh) if r.get("tiers/high_share")]
    rows.sort(key=lambda r: float(r.get("time/total_timesteps") or 0))
    if not rows:
        return math.nan, math.nan, 0
    tail = rows[max(0, int(len(rows) * (1.0 - last))) :]

    def mean_of(tier: str) -> float:
        vals = [float(r[f"tiers/{m}/{tier}"]) for r in tail for m in MODULES if r.get(f"tiers/{m}/{tier}")]
        return sum(vals) / len(vals) if vals else math.nan

    return mean_of("high"), mean_of("low"), len(tail)


def run_rows(run_dir: Path, last: float) -> list[dict[str, Any]]:
    """The table rows of a finished run directory: one, or one per λ of a λ-conditioned router.

    A λ-conditioned run (``result.json`` → ``cost_lambdas``) is one set of weights validated at each
    of its λ values (``validation.json`` → ``best.per_lambda``); its rows say ``conditioned`` and
    share the run's training shares, which pool every λ's episodes.
    """
    result = json.loads((run_dir / "result.json").read_text())
    val_path = run_dir / "validation.json"
    val = json.loads(val_path.read_text()) if val_path.exists() else {}
    best = val.get("best") or {}
    high, low, n_roll = training_shares(run_dir, last)
    calls = int(result.get("llm_calls") or 0)
    hits = int(result.get("cache_hits") or 0)
    common = {
        "seed": int(result.get("seed", 0)),
        "timesteps": int(result.get("timesteps", 0)),
        "train_high": high,
        "train_low": low,
        "rollouts": n_roll,
        "selected_on": val.get("select_metric", ""),
        "best_step": val.get("best_step"),
        "computed_calls": calls - hits,
        "run": run_dir.name,
    }
    lambdas = result.get("cost_lambdas")
    if lambdas:
        per_lambda = best.get("per_lambda") or {}
        rows = []
        for lam in lambdas:
            stats = per_lambda.get(f"{float(lam):g}") or {}
            rows.append({
                "lambda": float(lam),
                "router": "conditioned",
                "val_high": stats.get("high_share", math.nan),
                "val_p_high": stats.get("p_high", math.nan),
                "val_f1": stats.get("f1", math.nan),
                "val_module_cost": stats.get("module_cost", math.nan),
                **common,
            })
        return rows
    return [{
        "lambda": float(result["cost_lambda"]),
        "router": "single",
        "val_high": best.get("high_share", math.nan),
        "val_p_high": best.get("p_high", math.nan),
        "val_f1": best.get("f1", math.nan),
        "val_module_cost": best.get("module_cost", math.nan),
        **common,
    }]


def markdown(rows: list[dict[str, Any]], last: float) -> str:
    """The table as markdown."""

    def f(v: Any, fmt: str) -> str:
        return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)

    head = (
        f"| λ | router | seed | steps | train HIGH (last {last:.0%}) | train LOW | val HIGH | val P(HIGH) "
        "| val F1 | val module cost (GFLOPs) | selected on (step) | calls computed (all tiers) |"
    )
    lines = [head, "|" + "---|" * 12]
    for r in rows:
        lines.append(
            f"| {r['lambda']:g} | {r['router']} | {r['seed']} | {r['timesteps']} | "
            f"{f(r['train_high'], '.2f')} | "
            f"{f(r['train_low'], '.2f')} | {f(r['val_high'], '.2f')} | {f(r['val_p_high'], '.2f')} | "
            f"{f(r['val_f1'], '.3f')} | {f(r['val_module_cost'], '.1f')} | "
            f"{r['selected_on']} ({r['best_step']}) | {r['computed_calls']} |"
        )
    return "\n".join(lines) + "\n"


#: Columns averaged over seeds by :func:`by_lambda`.
MEAN_KEYS = ("train_high", "train_low", "val_high", "val_p_high", "val_f1", "val_module_cost")


def _nanmean(values: list[Any]) -> float:
    vals = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    return sum(vals) / len(vals) if vals else math.nan


def by_lambda(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Means per (router kind, λ) over its runs (``runs``; ``seeds`` counts distinct seeds among them)."""
    groups: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["router"], r["lambda"]), []).append(r)
    return [
        {
            "lambda": lam,
            "router": kind,
            "runs": len(rs),
            "seeds": len({r["seed"] for r in rs}),
            **{k: _nanmean([r[k] for r in rs]) for k in MEAN_KEYS},
        }
        for (kind, lam), rs in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0]))
    ]


def markdown_by_lambda(agg: list[dict[str, Any]]) -> str:
    """The per-λ means as markdown (runs of one seed repeated are counted as runs, not as seeds)."""

    def f(v: float, fmt: str) -> str:
        return "–" if math.isnan(v) else format(v, fmt)

    lines = [
        "| λ | router | runs (seeds) | train HIGH | val HIGH | val P(HIGH) | val F1 "
        "| val module cost (GFLOPs) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for a in agg:
        lines.append(
            f"| {a['lambda']:g} | {a['router']} | {a['runs']} ({a['seeds']}) | {f(a['train_high'], '.2f')} | "
            f"{f(a['val_high'], '.2f')} | "
            f"{f(a['val_p_high'], '.2f')} | {f(a['val_f1'], '.3f')} | {f(a['val_module_cost'], '.1f')} |"
        )
    return "\n".join(lines) + "\n"


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """HIGH shares and validation F1 against λ (means over seeds; one dot per run behind them)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    agg = by_lambda(rows)
    lam = [a["lambda"] for a in agg]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(lam, [a["train_high"] for a in agg], "o-", label="train HIGH share (sampled)")
    ax.plot(lam, [a["val_high"] for a in agg], "s--", label="val HIGH share (argmax)")
    if any(not math.isnan(a["val_p_high"]) for a in agg):
        ax.plot(lam, [a["val_p_high"] for a in agg], "^:", label="val mean P(HIGH)")
    if len(rows) > len(agg):  # several seeds: show each run's validation HIGH share too
        ax.scatter(
            [r["lambda"] for r in rows],
            [r["val_high"] for r in rows],
            s=12,
            c="k",
            alpha=0.3,
            label="val HIGH share, each seed",
        )
    ax.set_xlabel("λ (cost weight)")
    ax.set_ylabel("share of HIGH decisions")
    ax.set_ylim(-0.02, 1.02)
    ax2 = ax.twinx()
    ax2.plot(lam, [a["val_f1"] for a in agg], "d-", color="grey", alpha=0.6, label="val F1")
    ax2.set_ylabel("validation F1")
    handles = ax.get_legend_handles_labels()[0] + ax2.get_legend_handles_labels()[0]
    labels = ax.get_legend_handles_labels()[1] + ax2.get_legend_handles_labels()[1]
    ax.legend(handles, labels, loc="upper right", fontsize=8)
    ax.set_title("Router tier choices across the λ sweep")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs_dir", type=Path)
    parser.add_argument("--glob", default="*", help="run directory names to include")
    parser.add_argument("--last", type=float, default=0.5, help="fraction of training rollouts to average")
    parser.add_argument("--out", type=Path, default=None, help="output stem (default <runs_dir>/sweep_table)")
    args = parser.parse_args(argv)
    if not 0.0 < args.last <= 1.0:
        parser.error(f"--last must be in (0, 1], got {args.last}")
    dirs = sorted(p for p in args.runs_dir.glob(args.glob) if (p / "result.json").is_file())
    if not dirs:
        print(f"no finished runs (result.json) under {args.runs_dir}/{args.glob}", file=sys.stderr)
        return 2
    rows = sorted(
        (row for d in dirs for row in run_rows(d, args.last)),
        key=lambda r: (r["lambda"], r["router"], r["seed"]),
    )
    text = markdown(rows, args.last)
    agg = by_lambda(rows)
    if len(agg) < len(rows):
        text += "\nMeans per λ and router kind:\n\n" + markdown_by_lambda(agg)
    print(text)
    from common.atomic import atomic_write_text

    stem = args.out or args.runs_dir / "sweep_table"
    atomic_write_text(stem.with_suffix(".md"), text)
    plot(rows, stem.with_suffix(".png"))
    print(f"written {stem.with_suffix('.md')} and {stem.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
