"""Eviction policies (a registry) and the batch victim selection they share."""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LevelView:
    """Read-only arrays over one level's live items (same order in every array)."""

    item_ids: np.ndarray  # int64
    importance: np.ndarray  # float32
    usage: np.ndarray  # int64
    last_access: np.ndarray  # int64


def lowest_k(primary: np.ndarray, tiebreak: np.ndarray, ids: np.ndarray, n: int) -> np.ndarray:
    """Return positions of the ``n`` smallest ``primary`` values, ties broken deterministically.

    Linear time: ``argpartition`` finds the n-th value, everything strictly below it is taken,
    and only the items tied at that value are ordered (by ``tiebreak``, then ``ids``).

    Args:
        primary: Values to minimise.
        tiebreak: Secondary key for items tied on ``primary`` (smaller first).
        ids: Final tie-break key (item ids, unique).
        n: How many positions to return (clipped to ``len(primary)``).

    Returns:
        Positions into the input arrays (unordered).
    """
    size = len(primary)
    n = min(n, size)
    if n <= 0:
        return np.empty(0, dtype=np.int64)
    if n == size:
        return np.arange(size, dtype=np.int64)
    kth = primary[np.argpartition(primary, n - 1)[n - 1]]
    below = np.flatnonzero(primary < kth)
    tied = np.flatnonzero(primary == kth)
    need = n - len(below)
    if need < len(tied):
        order = np.lexsort((ids[tied], tiebreak[tied]))
        tied = tied[order[:need]]
    return np.concatenate([below, tied]).astype(np.int64, copy=False)


def importance_scores(view: LevelView) -> np.ndarray:
    """HTM-EAR retention score ``0.75 * importance + 0.25 * min(usage / 10, 1)`` (float64)."""
    return 0.75 * view.importance.astype(np.float64) + 0.25 * np.minimum(view.usage / 10.0, 1.0)


class EvictionPolicy(abc.ABC):
    """Base class: choose ``n`` victims among a level's live items."""

    name = "base"

    @abc.abstractmethod
    def select(self, view: LevelView, n: int, *, protect_threshold: float | None = None) -> np.ndarray:
        """Return the item ids to evict.

        Args:
            view: The level's live items.
            n: Number of victims wanted (clipped to the number of items).
            protect_threshold: If set, items with importance >= it are chosen only when the
                unprotected items cannot supply ``n`` victims (the L2 rule of the importance
                policy). Policies that ignore importance ignore it.

        Returns:
            Item ids (int64) of the victims.
        """


class ImportancePolicy(EvictionPolicy):
    """Evict the lowest ``0.75 * importance + 0.25 * min(usage/10, 1)`` first."""

    name = "importance"

    def select(self, view: LevelView, n: int, *, protect_threshold: float | None = None) -> np.ndarray:
        """See :meth:`EvictionPolicy.select`."""
        scores = importance_scores(view)
        if protect_threshold is None:
            return view.item_ids[lowest_k(scores, view.last_access, view.item_ids, n)]
        # Paper rule: unprotected items first; protected ones only if the batch cannot be filled.
        protected = view.importance >= protect_threshold
        free = np.flatnonzero(~protected)
        take = free[lowest_k(scores[free], view.last_access[free], view.item_ids[free], n)]
        short = n - len(take)
        if short > 0:
            prot = np.flatnonzero(protected)
            take = np.concatenate(
                [take, prot[lowest_k(scores[prot], view.last_access[prot], view.item_ids[prot], short)]]
            )
        return view.item_ids[take]


class LRUPolicy(EvictionPolicy):
    """Evict the oldest ``last_access`` first (ties: lowest id); importance is ignored."""

    name = "lru"

    def select(self, view: LevelView, n: int, *, protect_threshold: float | None = None) -> np.ndarray:
        """See :meth:`EvictionPolicy.select` (``protect_threshold`` is ignored by design)."""
        return view.item_ids[lowest_k(view.last_access, view.item_ids, view.item_ids, n)]


#: name -> policy factory.
POLICIES: dict[str, Callable[[], EvictionPolicy]] = {
    "importance": ImportancePolicy,
    "lru": LRUPolicy,
}


def get_policy(name: str) -> EvictionPolicy:
    """Build the eviction policy registered as ``name``.

    Raises:
        ValueError: For an unknown policy name.
    """
    if name not in POLICIES:
        raise ValueError(f"unknown eviction policy {name!r}; known: {sorted(POLICIES)}")
    return POLICIES[name]()


def batch_size(capacity: int, fraction: float) -> int:
    """Number of items one eviction removes: ``max(1, int(fraction * capacity))``."""
    return max(1, int(fraction * capacity))
