"""Per-question evaluation records -> one summary per system, with bootstrap intervals."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evaluation.bootstrap import (
    DEFAULT_ALPHA,
    DEFAULT_N_BOOT,
    DEFAULT_SEED,
    Estimate,
    bootstrap_mean,
    make_resampler,
    paired_difference,
    paired_ratio,
)
from modules.tier import MODULE_ORDER, Tier

#: Per-question metrics summarised for every system (record key -> summary key).
METRICS: tuple[str, ...] = (
    "f1",
    "em",
    "judge",
    "judge_failed",
    "module_cost",
    "answer_cost",
    "total_cost",
    "latency_s",
    "failures",
)
#: Quality metrics also broken down per question category.
CATEGORY_METRICS: tuple[str, ...] = ("f1", "em", "judge")
REQUIRED_KEYS: tuple[str, ...] = ("question_id", "tiers", "f1", "em", "module_cost", "total_cost")


class RecordError(ValueError):
    """A per-question record is malformed or the runs of a system do not line up."""


@dataclass
class Run:
    """One evaluation run of a system (one seed) over a list of questions.

    Attributes:
        run_id: Stable id (e.g. checkpoint sha or ``"random@seed=3"``).
        records: Per-question record dicts.
        seed: Seed of this run, if meaningful.
    """

    run_id: str
    records: list[dict[str, Any]]
    seed: int | None = None


@dataclass
class SystemRuns:
    """A system and its runs, before aggregation.

    Attributes:
        name: Display name (``"all-high"``, ``"router λ=0.1"``).
        kind: ``"baseline"`` or ``"router"``.
        runs: One or more runs (seeds).
        params: Free-form description recorded in the outputs (λ, tiers, checkpoint ids...).
    """

    name: str
    kind: str
    runs: list[Run]
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class SystemSummary:
    """Aggregated metrics of one system.

    Attributes:
        name: Display name.
        kind: ``"baseline"`` or ``"router"``.
        params: Copied from :class:`SystemRuns`.
        n_questions: Questions evaluated (per run).
        n_seeds: Number of runs averaged.
        metrics: Mean and interval of each of :data:`METRICS` (``failures`` is per question,
            ``judge_failed`` the failure rate, ``judge`` ignores failed judgements).
        failures_total: Failed calls summed over questions, averaged over runs.
        seed_std: Standard deviation across run means (only when ``n_seeds > 1``).
        per_category: ``{category: {metric: Estimate}}`` for :data:`CATEGORY_METRICS`.
        tier_ratios: ``{module: {"LOW"|"MID"|"HIGH": share of questions}}``.
        replicates: Bootstrap replicates per metric (paired across systems; not serialised).
        vs_reference: Paired comparisons against a reference system (see :func:`compare_to`).
    """

    name: str
    kind: str
    params: dict[str, Any]
    n_questions: int
    n_seeds: int
    metrics: dict[str, Estimate]
    failures_total: float
    seed_std: dict[str, float]
    per_category: dict[str, dict[str, Estimate]]
    tier_ratios: dict[str, dict[str, float]]
    replicates: dict[str, np.ndarray] = field(repr=False, default_factory=dict)
    vs_reference: dict[str, Estimate] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-friendly dict (without the bootstrap replicates)."""
        return {
            "name": self.name,
            "kind": self.kind,
            "params": self.params,
            "n_questions": self.n_questions,
            "n_seeds": self.n_seeds,
            "metrics": {k: v.to_dict() for k, v in self.metrics.items()},
            "failures_total": self.failures_total,
            "seed_std": self.seed_std,
            "per_category": {
                cat: {k: v.to_dict() for k, v in ms.items()} for cat, ms in self.per_category.items()
            },
            "tier_ratios": self.tier_ratios,
            "vs_reference": {k: v.to_dict() for k, v in self.vs_reference.items()},
        }


def _value(record: Mapping[str, Any], key: str, where: str) -> float:
    """Read one metric as float; ``None`` (e.g. no judge) becomes NaN (= missing)."""
    if key == "judge_failed":
        # A judge that was not run is missing, not a failure.
        if record.get("judge") is None and not record.get("judge_failed", False):
            return float("nan")
        return float(bool(record.get("judge_failed", False)))
    if key == "judge" and record.get("judge_failed", False):
        return float("nan")
    raw = record.get(key, 0.0 if key in ("answer_cost", "latency_s", "failures") else None)
    if raw is None:
        return float("nan")
    try:
        return float(raw)
    except (TypeError, ValueError) as exc:
        raise RecordError(f"{where}: field {key!r} is not a number: {raw!r}") from exc


def _tiers(record: Mapping[str, Any], where: str) -> tuple[Tier, ...]:
    raw = record["tiers"]
    if isinstance(raw, Mapping):  # {module: tier}
        raw = [raw[m] for m in MODULE_ORDER]
    try:
        tiers = tuple(Tier.parse(t) for t in raw)
    except (ValueError, KeyError, TypeError) as exc:
        raise RecordError(f"{where}: bad 'tiers' {raw!r}: {exc}") from exc
    if len(tiers) != len(MODULE_ORDER):
        raise RecordError(f"{where}: 'tiers' has {len(tiers)} entries, expected {len(MODULE_ORDER)}")
    return tiers


def align_runs(system: SystemRuns, question_ids: Sequence[str]) -> list[list[dict[str, Any]]]:
    """Order each run's records by ``question_ids``; every run must cover every question.

    Args:
        system: The system whose runs to align.
        question_ids: The evaluated questions, in the shared order.

    Returns:
        One list of records per run, in ``question_ids`` order.

    Raises:
        RecordError: On a missing key, a duplicate question or a question missing from a run.
    """
    if not system.runs:
        raise RecordError(f"system {system.name!r} has no runs")
    aligned = []
    for run in system.runs:
        by_id: dict[str, dict[str, Any]] = {}
        for i, rec in enumerate(run.records):
            where = f"system {system.name!r}, run {run.run_id!r}, record {i}"
            missing = [k for k in REQUIRED_KEYS if k not in rec]
            if missing:
                raise RecordError(f"{where}: missing keys {missing}")
            qid = str(rec["question_id"])
            if qid in by_id:
                raise RecordError(f"{where}: duplicate question_id {qid!r}")
            by_id[qid] = dict(rec)
        absent = [q for q in question_ids if q not in by_id]
        if absent:
            raise RecordError(
                f"system {system.name!r}, run {run.run_id!r}: no record for {len(absent)} of "
                f"{len(question_ids)} questions (first: {absent[:3]})"
            )
        aligned.append([by_id[q] for q in question_ids])
    return aligned


def summarise(
    system: SystemRuns,
    question_ids: Sequence[str],
    *,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = DEFAULT_SEED,
    alpha: float = DEFAULT_ALPHA,
) -> SystemSummary:
    """Aggregate one system's runs into means, bootstrap intervals, categories and tier ratios.

    Args:
        system: The system and its runs.
        question_ids: The evaluated questions in the shared order (all systems must use the
            same list, which makes the bootstrap paired across systems).
        n_boot: Bootstrap replicates.
        seed: Bootstrap seed (the same for every system).
        alpha: Two-sided miscoverage of the intervals.

    Returns:
        The :class:`SystemSummary`.
    """
    if not question_ids:
        raise RecordError("no questions to summarise")
    runs = align_runs(system, question_ids)
    n_q = len(question_ids)
    resampler = make_resampler(n_q, len(runs), n_boot=n_boot, seed=seed, alpha=alpha)
    values = {
        m: np.array(
            [
                [_value(r, m, f"system {system.name!r}, question {r['question_id']!r}") for r in run]
                for run in runs
            ]
        )
        for m in METRICS
    }
    metrics: dict[str, Estimate] = {}
    replicates: dict[str, np.ndarray] = {}
    seed_std: dict[str, float] = {}
    for m, arr in values.items():
        metrics[m], replicates[m] = bootstrap_mean(arr, resampler)
        if len(runs) > 1:
            with np.errstate(invalid="ignore"):
                per_run = np.array([np.nanmean(row) if np.any(~np.isnan(row)) else np.nan for row in arr])
            seed_std[m] = (
                float(np.nanstd(per_run, ddof=1)) if np.sum(~np.isnan(per_run)) > 1 else float("nan")
            )

    categories = np.array([str(r.get("category", "all")) for r in runs[0]])
    per_category: dict[str, dict[str, Estimate]] = {}
    for cat in sorted(set(categories.tolist())):
        # Masking other categories with NaN reuses the same paired weights.
        mask = categories == cat
        per_category[cat] = {}
        for m in CATEGORY_METRICS:
            masked = np.where(mask[None, :], values[m], np.nan)
            per_category[cat][m], _ = bootstrap_mean(masked, resampler)

    counts = np.zeros((len(MODULE_ORDER), 3))
    for run in runs:
        for rec in run:
            for mi, tier in enumerate(
                _tiers(rec, f"system {system.name!r}, question {rec['question_id']!r}")
            ):
                counts[mi, int(tier)] += 1
    counts /= len(runs) * n_q
    tier_ratios = {
        module: {t.name: float(counts[mi, int(t)]) for t in Tier} for mi, module in enumerate(MODULE_ORDER)
    }
    failures_total = float(np.nansum(values["failures"]) / len(runs))
    return SystemSummary(
        name=system.name,
        kind=system.kind,
        params=dict(system.params),
        n_questions=n_q,
        n_seeds=len(runs),
        metrics=metrics,
        failures_total=failures_total,
        seed_std=seed_std,
        per_category=per_category,
        tier_ratios=tier_ratios,
        replicates=replicates,
    )


def compare_to(summary: SystemSummary, reference: SystemSummary, alpha: float = DEFAULT_ALPHA) -> None:
    """Fill ``summary.vs_reference`` with paired comparisons against ``reference``.

    Adds ``<metric>_ratio`` (e.g. ``f1_ratio`` = F1 / reference F1, ``module_cost_ratio``)
    and ``<metric>_diff`` for the quality metrics, each with a paired bootstrap interval
    (both systems' replicates were drawn on the same resampled questions).

    Args:
        summary: The system to compare (modified in place).
        reference: The reference system (usually all-HIGH).
        alpha: Two-sided miscoverage of the intervals.
    """
    if summary.n_questions != reference.n_questions:
        raise RecordError(
            f"cannot pair {summary.name!r} ({summary.n_questions} questions) with "
            f"{reference.name!r} ({reference.n_questions} questions)"
        )
    out: dict[str, Estimate] = {}
    for m in ("f1", "em", "judge", "module_cost", "total_cost", "latency_s"):
        a, b = summary.metrics[m], reference.metrics[m]
        out[f"{m}_ratio"] = paired_ratio(
            a.mean, summary.replicates[m], b.mean, reference.replicates[m], alpha
        )
        if m in CATEGORY_METRICS:
            out[f"{m}_diff"] = paired_difference(
                a.mean, summary.replicates[m], b.mean, reference.replicates[m], alpha
            )
    summary.vs_reference = out
