"""The BudgetMem sliding-window cost normaliser: ``ĉ = clip((√c − P5) / (P95 − P5), 0, 1)``."""

from __future__ import annotations

import collections
from collections.abc import Mapping
from typing import Any

import numpy as np


def percentile_linear(values: np.ndarray, q: float) -> float:
    """The ``q``-th percentile with linear interpolation between order statistics.

    This is numpy's default ("linear", type 7) method, written out so the definition the
    tests check by hand is explicit: position ``h = (n − 1)·q/100``, value
    ``x[⌊h⌋] + (h − ⌊h⌋)·(x[⌊h⌋+1] − x[⌊h⌋])`` over the sorted values.
    """
    x = np.sort(np.asarray(values, dtype=np.float64))
    if x.size == 0:
        raise ValueError("percentile of an empty window")
    h = (x.size - 1) * q / 100.0
    lo = int(np.floor(h))
    hi = min(lo + 1, x.size - 1)
    return float(x[lo] + (h - lo) * (x[hi] - x[lo]))


class CostNormalizer:
    """Sliding-window sqrt + percentile normaliser of raw costs (see docs/design/envs.md).

    Args:
        window: Number of most recent raw costs kept (FIFO).
        low_pct: Lower clip percentile (5).
        high_pct: Upper clip percentile (95).

    Raises:
        ValueError: On a non-positive window or percentiles outside ``0 <= low < high <= 100``.
    """

    def __init__(self, window: int = 2000, low_pct: float = 5.0, high_pct: float = 95.0) -> None:
        if int(window) < 1:
            raise ValueError(f"cost window must be >= 1, got {window}")
        if not 0.0 <= low_pct < high_pct <= 100.0:
            raise ValueError(f"need 0 <= low_pct < high_pct <= 100, got {low_pct}, {high_pct}")
        self.window = int(window)
        self.low_pct = float(low_pct)
        self.high_pct = float(high_pct)
        self._costs: collections.deque[float] = collections.deque(maxlen=self.window)

    def __len__(self) -> int:
        return len(self._costs)

    @property
    def costs(self) -> list[float]:
        """The raw costs currently in the window, oldest first."""
        return list(self._costs)

    def bounds(self) -> tuple[float, float]:
        """Return ``(P5, P95)`` of √window after the degenerate-case rules.

        Raises:
            ValueError: If the window is empty.
        """
        roots = np.sqrt(np.asarray(self._costs, dtype=np.float64))
        p_lo = percentile_linear(roots, self.low_pct)
        p_hi = percentile_linear(roots, self.high_pct)
        if p_hi <= p_lo:
            if p_hi == 0.0:
                p_hi = 1.0
            else:
                p_lo = 0.9 * p_hi
        return p_lo, p_hi

    def normalise(self, raw_cost: float, *, update: bool = True) -> tuple[float, dict[str, float]]:
        """Append ``raw_cost`` to the window (if ``update``), then return ``(ĉ, details)``.

        Args:
            raw_cost: Non-negative cost of one episode.
            update: If False, normalise against the current window without adding the cost
                (for evaluation; the window must then be non-empty).

        Returns:
            ``ĉ`` in [0, 1] and ``{"p_low", "p_high"}`` (in √cost units).

        Raises:
            ValueError: On a negative or non-finite cost.
        """
        c = float(raw_cost)
        if not np.isfinite(c) or c < 0.0:
            raise ValueError(f"raw cost must be finite and >= 0, got {raw_cost!r}")
        if update:
            self._costs.append(c)
        p_lo, p_hi = self.bounds()
        c_hat = float(np.clip((np.sqrt(c) - p_lo) / (p_hi - p_lo), 0.0, 1.0))
        return c_hat, {"p_low": p_lo, "p_high": p_hi}

    def state_dict(self) -> dict[str, Any]:
        """Serializable state."""
        return {
            "window": self.window,
            "low_pct": self.low_pct,
            "high_pct": self.high_pct,
            "costs": self.costs,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore from :meth:`state_dict` (the window size must match)."""
        if int(state["window"]) != self.window:
            raise ValueError(f"saved cost window {state['window']} != configured window {self.window}")
        self._costs = collections.deque((float(c) for c in state["costs"]), maxlen=self.window)
