"""How ``evaluate.py learners`` reports what it found.

The plain-text report it prints, and the Markdown tables the docs render from its committed ``learners.json``
(so a results page cannot drift from the file). Learners trained with several seeds (``PPO s0``, ``PPO s1``…)
are one family; the Markdown table gives a family one row per price (the seeds' mean, min and max, and how
many passed the guard), the text report every seed's row and the spread below.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evaluation.outcome_learners import LearnerRow, Shipped

_SEED = re.compile(r" s\d+$")


def family(learner: str) -> str:
    """A learner's name without its seed: ``"PPO s3"`` -> ``"PPO"``; a learner without seeds is its own."""
    return _SEED.sub("", learner)


def _ci(v: Sequence[float], signed: bool = False) -> str:
    f = "{:+.3f}" if signed else "{:.3f}"
    return f"{f.format(v[0])} [{f.format(v[1])}, {f.format(v[2])}]"


def seed_spread(rows: Sequence[LearnerRow]) -> list[str]:
    """Per learner family run with several seeds and price: the seeds' spread, one line each."""
    groups: dict[tuple[str, float], list[LearnerRow]] = {}
    for r in rows:
        if family(r.learner) != r.learner:
            groups.setdefault((family(r.learner), r.price), []).append(r)
    lines = []
    for (name, price), rs in groups.items():
        f1 = np.array([r.test_f1[0] for r in rs])
        diff = np.array([r.test_diff[0] for r in rs])
        lines.append(
            f"{name} over {len(rs)} seeds, price {price:g}: test F1 mean {f1.mean():.3f} "
            f"(min {f1.min():.3f}, max {f1.max():.3f}, sd {f1.std(ddof=1) if len(rs) > 1 else 0.0:.3f}); "
            f"test − fixed mean {diff.mean():+.3f}; guard passed {sum(r.passed for r in rs)} of {len(rs)}"
        )
    return lines


def shipped_line(s: Shipped) -> str:
    """What ships at one price and how it does on test, as a sentence."""
    what = f"the learner {s.router}" if s.router else f"the fixed path {s.fixed_path} (no learner passed)"
    high = f"; − all-HIGH F1 {_ci(s.vs_high, True)}" if s.vs_high is not None else ""
    return (
        f"price {s.price:g}: ships {what}: test F1 {_ci(s.test_f1)}, cost share {s.test_cost_share:.3f}; "
        f"− validation's fixed path {s.fixed_path} {_ci(s.vs_fixed, True)}{high}"
    )


def format_report(
    rows: Sequence[LearnerRow], shipped: Sequence[Shipped], n_val: int, n_test: int, paths: Sequence[str]
) -> str:
    """The learners' table (every seed its own row), the seeds' spread, and per price what ships."""
    lines = [
        f"{len(paths)} paths; learners fitted on {n_val} validation questions, judged on {n_test} test ones",
        f"{'learner':<24} {'price':>5}  {'val − fixed (cross-fitted)':<28} {'guard':<7} "
        f"{'test F1':<22} {'cost':>6}  test − fixed",
    ]
    for r in rows:
        lines.append(
            f"{r.learner:<24} {r.price:>5g}  {_ci(r.val_diff, True):<28} {'passed' if r.passed else 'no':<7} "
            f"{_ci(r.test_f1):<22} {r.test_cost_share:>6.3f}  {_ci(r.test_diff, True)}"
        )
    lines += seed_spread(rows)
    lines += [shipped_line(s) for s in shipped]
    return "\n".join(lines)


def _tuples(d: dict[str, Any]) -> dict[str, Any]:
    # JSON has no tuples: the (mean, lo, hi) estimates come back as lists
    return {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}


def load_report(path: str | Path) -> tuple[list[LearnerRow], list[Shipped], dict[str, Any]]:
    """The rows, the verdicts and the rest (questions, paths, options) of a ``learners.json``.

    Raises:
        FileNotFoundError: No such file (named).
        ValueError: The file is not a learners report (the file and the missing key are named).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no learners.json (`evaluate.py learners --out` writes one)")
    doc = json.loads(path.read_text())
    try:
        rows = [LearnerRow(**_tuples(r)) for r in doc["rows"]]
        shipped = [Shipped(**_tuples(s)) for s in doc["shipped"]]
    except (KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a learners report ({exc})") from exc
    return rows, shipped, doc


def _family_row(name: str, price: float, rs: Sequence[LearnerRow]) -> str:
    if len(rs) == 1 and family(rs[0].learner) == rs[0].learner:
        r = rs[0]
        guard = "**passed**" if r.passed else "no"
        return (
            f"| {name} | {price:g} | {_ci(r.val_diff, True)} | {guard} | {_ci(r.test_f1)} "
            f"| {r.test_cost_share:.1%} | {_ci(r.test_diff, True)} |"
        )
    f1 = [r.test_f1[0] for r in rs]
    val = np.mean([r.val_diff[0] for r in rs])
    diff = [r.test_diff[0] for r in rs]
    cost = np.mean([r.test_cost_share for r in rs])
    return (
        f"| {name}, {len(rs)} seeds | {price:g} | {val:+.3f} (mean) "
        f"| {sum(r.passed for r in rs)} of {len(rs)} "
        f"| {np.mean(f1):.3f} (seeds {min(f1):.3f}–{max(f1):.3f}) | {cost:.1%} "
        f"| {np.mean(diff):+.3f} (seeds {min(diff):+.3f} to {max(diff):+.3f}) |"
    )


def markdown_report(rows: Sequence[LearnerRow], shipped: Sequence[Shipped], doc: dict[str, Any]) -> str:
    """What ships per price, then every learner (seed families as one row per price), as Markdown tables."""
    n_val, n_test = len(doc.get("val_questions", [])), len(doc.get("test_questions", []))
    lines = [
        f"Fitted on {n_val} validation questions, judged on {n_test} test questions, over "
        f"{len(doc.get('paths', []))} paths. Differences are paired, with 95% bootstrap intervals; the "
        "objective is F1 − price · cost share (at price 0, F1).",
        "",
        "| price | validation's best fixed path | ships | test F1 | − that fixed path (objective) "
        "| − all-HIGH (F1) | cost share |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in shipped:
        what = s.router or "the fixed path (no learner passed the guard)"
        high = _ci(s.vs_high, True) if s.vs_high is not None else "-"
        lines.append(
            f"| {s.price:g} | `{s.fixed_path}` | {what} | {_ci(s.test_f1)} | {_ci(s.vs_fixed, True)} "
            f"| {high} | {s.test_cost_share:.1%} |"
        )
    lines += [
        "",
        "| learner | price | validation − fixed (cross-fitted) | guard | test F1 | cost share "
        "| test − fixed |",
        "|---|---|---|---|---|---|---|",
    ]
    groups: dict[tuple[str, float], list[LearnerRow]] = {}
    for r in rows:
        groups.setdefault((family(r.learner), r.price), []).append(r)
    lines += [_family_row(name, price, rs) for (name, price), rs in groups.items()]
    return "\n".join(lines)


def learners_markdown(directory: str | Path) -> str:
    """The Markdown tables of the ``learners.json`` committed in ``directory``."""
    rows, shipped, doc = load_report(Path(directory) / "learners.json")
    return markdown_report(rows, shipped, doc)
