"""The oracle of one frontier run: per question, the best tier path among all the paths evaluated."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from evaluation.aggregate import Run, SystemRuns, align_runs
from modules.tier import MODULE_ORDER, Tier, one_module_changes, tiers_label

ORACLE_NAME = "oracle"


def minimum_paths() -> list[str]:
    """The paths every oracle should be taken over: the 3 uniform paths, then the 10 changes from all-MID.

    The single-module changes are the cheapest set that lets the oracle move any one module off
    MID in either direction; an oracle over fewer paths understates the achievable gain.
    """
    uniform = [tiers_label((t,) * len(MODULE_ORDER)) for t in Tier]
    changes = one_module_changes(Tier.MID, (Tier.LOW, Tier.HIGH))
    return uniform + [tiers_label(tiers) for _, _, tiers in changes]


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
        distinct paths per question, which systems supplied the chosen paths and which of the
        :func:`minimum_paths` were not evaluated on every question (``minimum_paths_missing``).

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
    everywhere: set[str] | None = None  # the paths evaluated on every question
    for cands in candidates:
        paths = {path_label(r) for _, r in cands}
        n_paths.append(len(paths))
        everywhere = paths if everywhere is None else everywhere & paths

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
        "minimum_paths_missing": [p for p in minimum_paths() if p not in (everywhere or set())],
    }
    return SystemRuns(name, "oracle", [Run(name, chosen)], params)
