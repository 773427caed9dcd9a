"""Seeded, vectorised bootstrap over questions (and over seeds when a system has several)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

#: Defaults used by the frontier command; recorded in its metadata.
DEFAULT_N_BOOT = 2000
DEFAULT_ALPHA = 0.05
DEFAULT_SEED = 0


@dataclass(frozen=True)
class Estimate:
    """A point estimate with a percentile confidence interval.

    Attributes:
        mean: Point estimate on the full (non-resampled) data.
        lo: Lower percentile bound (``alpha/2``).
        hi: Upper percentile bound (``1 - alpha/2``).
        n: Number of observations (questions with a value) behind the estimate.
    """

    mean: float
    lo: float
    hi: float
    n: int

    def to_dict(self) -> dict[str, float | int]:
        """Return a JSON-friendly dict."""
        return {"mean": self.mean, "lo": self.lo, "hi": self.hi, "n": self.n}


@dataclass(frozen=True)
class Resampler:
    """Shared bootstrap weights for ``n_questions`` questions and ``n_seeds`` seed runs.

    Attributes:
        question_weights: ``(n_boot, n_questions)``; row ``b`` holds how often each
            question was drawn in replicate ``b``, divided by ``n_questions``.
        seed_weights: ``(n_boot, n_seeds)``; the same for seed runs.
        alpha: Two-sided miscoverage of the intervals (0.05 gives 95% intervals).
    """

    question_weights: np.ndarray
    seed_weights: np.ndarray
    alpha: float

    @property
    def n_boot(self) -> int:
        """Number of bootstrap replicates."""
        return int(self.question_weights.shape[0])

    @property
    def n_questions(self) -> int:
        """Number of questions the weights were drawn for."""
        return int(self.question_weights.shape[1])

    @property
    def n_seeds(self) -> int:
        """Number of seed runs the weights were drawn for."""
        return int(self.seed_weights.shape[1])


def make_resampler(
    n_questions: int,
    n_seeds: int = 1,
    *,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = DEFAULT_SEED,
    alpha: float = DEFAULT_ALPHA,
) -> Resampler:
    """Draw the bootstrap weight matrices.

    The question weights depend only on ``(seed, n_questions, n_boot)``, so two systems
    evaluated on the same questions get identical question resamples (a paired bootstrap),
    whatever their number of seed runs.

    Args:
        n_questions: Number of questions (columns of the value matrices).
        n_seeds: Number of seed runs of the system.
        n_boot: Number of replicates.
        seed: RNG seed.
        alpha: Two-sided miscoverage, in (0, 1).

    Returns:
        A :class:`Resampler`.

    Raises:
        ValueError: For non-positive sizes or an ``alpha`` outside (0, 1).
    """
    if n_questions < 1 or n_seeds < 1 or n_boot < 1:
        raise ValueError(
            f"bootstrap needs n_questions, n_seeds, n_boot >= 1, got {n_questions}, {n_seeds}, {n_boot}"
        )
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    q_rng = np.random.default_rng([seed, n_questions, 0])
    s_rng = np.random.default_rng([seed, n_seeds, 1])
    qw = q_rng.multinomial(n_questions, np.full(n_questions, 1.0 / n_questions), size=n_boot) / n_questions
    if n_seeds == 1:
        sw = np.ones((n_boot, 1))
    else:
        sw = s_rng.multinomial(n_seeds, np.full(n_seeds, 1.0 / n_seeds), size=n_boot) / n_seeds
    return Resampler(question_weights=qw.astype(np.float64), seed_weights=sw.astype(np.float64), alpha=alpha)


def _as_matrix(values: ArrayLike, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2:
        raise ValueError(f"{name}: expected (n_seeds, n_questions) or (n_questions,), got shape {arr.shape}")
    return arr


def point_mean(values: ArrayLike) -> float:
    """Mean over questions within each seed run, then over seed runs, ignoring NaNs.

    NaN marks "no value for this question" (e.g. a failed judge call); such questions
    drop out of that seed's mean instead of counting as zero.

    Args:
        values: ``(n_seeds, n_questions)`` or ``(n_questions,)``.

    Returns:
        The mean, or NaN if no value is present at all.
    """
    arr = _as_matrix(values, "values")
    mask = ~np.isnan(arr)
    counts = mask.sum(axis=1)
    sums = np.where(mask, arr, 0.0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_seed = sums / counts
    per_seed = per_seed[counts > 0]
    return float(per_seed.mean()) if per_seed.size else float("nan")


def replicate_means(values: ArrayLike, resampler: Resampler) -> np.ndarray:
    """Return the ``n_boot`` bootstrap replicates of :func:`point_mean`.

    Args:
        values: ``(n_seeds, n_questions)`` or ``(n_questions,)`` with NaN for missing values.
        resampler: Weights whose sizes match ``values``.

    Returns:
        Array of shape ``(n_boot,)``; a replicate whose resample holds no value is NaN.

    Raises:
        ValueError: If the shapes do not match the resampler.
    """
    arr = _as_matrix(values, "values")
    if arr.shape != (resampler.n_seeds, resampler.n_questions):
        raise ValueError(
            f"values have shape {arr.shape} but the resampler was drawn for "
            f"({resampler.n_seeds} seeds, {resampler.n_questions} questions)"
        )
    mask = (~np.isnan(arr)).astype(np.float64)
    filled = np.where(mask > 0, arr, 0.0)
    qw = resampler.question_weights
    # (n_seeds, n_boot): weighted sums and weighted counts of each seed run per replicate.
    sums = filled @ qw.T
    counts = mask @ qw.T
    with np.errstate(invalid="ignore", divide="ignore"):
        per_seed = sums / counts  # NaN where a seed run has no value in the resample
    sw = resampler.seed_weights.T  # (n_seeds, n_boot)
    present = ~np.isnan(per_seed)
    weight = np.where(present, sw, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (np.where(present, per_seed, 0.0) * weight).sum(axis=0) / weight.sum(axis=0)


def interval(replicates: np.ndarray, alpha: float) -> tuple[float, float]:
    """Percentile interval of bootstrap replicates, ignoring NaN replicates."""
    reps = np.asarray(replicates, dtype=np.float64)
    reps = reps[~np.isnan(reps)]
    if reps.size == 0:
        return float("nan"), float("nan")
    lo, hi = np.percentile(reps, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return float(lo), float(hi)


def bootstrap_mean(values: ArrayLike, resampler: Resampler) -> tuple[Estimate, np.ndarray]:
    """Mean with a percentile bootstrap interval.

    Args:
        values: ``(n_seeds, n_questions)`` or ``(n_questions,)``; NaN = missing.
        resampler: Shared weights (see :func:`make_resampler`).

    Returns:
        The estimate and its replicates (kept for paired comparisons).
    """
    arr = _as_matrix(values, "values")
    reps = replicate_means(arr, resampler)
    lo, hi = interval(reps, resampler.alpha)
    n = int((~np.isnan(arr)).any(axis=0).sum())
    return Estimate(point_mean(arr), lo, hi, n), reps


def paired_difference(
    point_a: float, reps_a: np.ndarray, point_b: float, reps_b: np.ndarray, alpha: float
) -> Estimate:
    """Paired bootstrap estimate of ``a - b`` from replicates drawn on the same questions."""
    if reps_a.shape != reps_b.shape:
        raise ValueError(f"replicate shapes differ: {reps_a.shape} vs {reps_b.shape}")
    lo, hi = interval(reps_a - reps_b, alpha)
    return Estimate(point_a - point_b, lo, hi, int(reps_a.size))


def paired_ratio(
    point_a: float, reps_a: np.ndarray, point_b: float, reps_b: np.ndarray, alpha: float
) -> Estimate:
    """Paired bootstrap estimate of ``a / b`` (ratio of means, per replicate)."""
    if reps_a.shape != reps_b.shape:
        raise ValueError(f"replicate shapes differ: {reps_a.shape} vs {reps_b.shape}")
    with np.errstate(invalid="ignore", divide="ignore"):
        ratios = np.where(reps_b != 0, reps_a / np.where(reps_b != 0, reps_b, 1.0), np.nan)
        point = point_a / point_b if point_b != 0 else float("nan")
    lo, hi = interval(ratios, alpha)
    return Estimate(float(point), lo, hi, int(reps_a.size))
