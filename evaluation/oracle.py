"""The oracle of one frontier run: per question, the best tier path among all the paths evaluated."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from evaluation.aggregate import Run, SystemRuns, align_runs
from modules.tier import MODULE_ORDER, tiers_label

ORACLE_NAME = "oracle"


def path_label(record: Mapping[str, Any]) -> str:
    """``"L,M,H,M,L"`` of a record's tiers (a list in MODULE_ORDER or a ``{module: tier}`` mapping)."""
    raw = record["tiers"]
    if isinstance(raw, Mapping):
        raw = [raw[m] for m in MODULE_ORDER]
    return tiers_label(raw)


def _num(record: Mapping[str, Any], key: str) -> float:
    value = record.get(key)
    try:
        out = float(value) if value is not None else math.nan
    except (TypeError, ValueError):
        return math.nan
    return out


def oracle_system(
    systems: Sequence[SystemRuns],
    question_ids: Sequence[str],
    *,
    quality: str = "f1",
    cost: str = "module_cost",
    name: str = ORACLE_NAME,
) -> SystemRuns:
    """Build the oracle system from the evaluated systems' records.

    Args:
        systems: Every evaluated system (its runs' records cover ``question_ids``).
        question_ids: The questions, in the shared order.
        quality: Quality metric maximised (a missing value ranks below every number).
        cost: Cost metric that breaks ties (lower wins).
        name: Name of the oracle system.

    Returns:
        A :class:`SystemRuns` of kind ``"oracle"`` with one run; ``params`` records the number of
        distinct paths per question and which systems supplied the chosen paths.

    Raises:
        ValueError: If no system or no question was given.
    """
    if not systems or not question_ids:
        raise ValueError("the oracle needs at least one evaluated system and one question")
    candidates: list[list[tuple[str, dict[str, Any]]]] = [[] for _ in question_ids]
    for system in systems:
        for run in align_runs(system, question_ids):
            for i, rec in enumerate(run):
                candidates[i].append((system.name, rec))
    chosen: list[dict[str, Any]] = []
    sources: Counter[str] = Counter()
    n_paths: list[int] = []
    for cands in candidates:
        n_paths.append(len({path_label(r) for _, r in cands}))

        def rank(c: tuple[str, dict[str, Any]]) -> tuple[float, float, str, str]:
            q, k = _num(c[1], quality), _num(c[1], cost)
            return (
                -q if math.isfinite(q) else math.inf,
                k if math.isfinite(k) else math.inf,
                path_label(c[1]),
                c[0],
            )

        source, rec = min(cands, key=rank)
        sources[source] += 1
        chosen.append({**rec, "run_id": name, "oracle_source": source})
    params = {
        "quality": quality,
        "tie_break": cost,
        "paths_per_question": {
            "min": min(n_paths),
            "mean": sum(n_paths) / len(n_paths),
            "max": max(n_paths),
        },
        "systems": [s.name for s in systems],
        "chosen_from": dict(sorted(sources.items())),
    }
    return SystemRuns(name, "oracle", [Run(name, chosen)], params)
