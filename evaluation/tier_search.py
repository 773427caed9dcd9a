"""Choose the best fixed per-module tier tuple on the validation split, cheaply."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from modules.tier import MODULE_ORDER, Tier, parse_tiers, tiers_label

TierTuple = tuple[Tier, ...]
#: ``evaluate(tiers) -> (quality, cost)`` on the validation split.
Evaluator = Callable[[TierTuple], tuple[float, float]]

ALL_LOW: TierTuple = (Tier.LOW,) * len(MODULE_ORDER)
ALL_HIGH: TierTuple = (Tier.HIGH,) * len(MODULE_ORDER)
SEARCH_METHODS: tuple[str, ...] = ("greedy", "exhaustive", "candidates")


@dataclass
class SearchResult:
    """Outcome of a tier-tuple search.

    Attributes:
        best: The chosen tuple.
        quality: Its validation quality.
        cost: Its validation cost.
        budget: The cost budget (``budget_frac`` x all-HIGH cost).
        method: Search method used.
        trace: Every evaluated tuple in evaluation order: ``(label, quality, cost)``.
    """

    best: TierTuple
    quality: float
    cost: float
    budget: float
    method: str
    trace: list[tuple[str, float, float]] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        """Return a JSON-friendly dict."""
        return {
            "best": tiers_label(self.best),
            "quality": self.quality,
            "cost": self.cost,
            "budget": self.budget,
            "method": self.method,
            "n_evaluated": len(self.trace),
            "trace": [{"tiers": t, "quality": q, "cost": c} for t, q, c in self.trace],
        }


class _Memo:
    def __init__(self, evaluate: Evaluator) -> None:
        self._evaluate = evaluate
        self.results: dict[TierTuple, tuple[float, float]] = {}
        self.trace: list[tuple[str, float, float]] = []

    def __call__(self, tiers: TierTuple) -> tuple[float, float]:
        if tiers not in self.results:
            q, c = self._evaluate(tiers)
            self.results[tiers] = (float(q), float(c))
            self.trace.append((tiers_label(tiers), float(q), float(c)))
        return self.results[tiers]


def _pick_best(results: dict[TierTuple, tuple[float, float]], budget: float) -> TierTuple:
    feasible = [t for t, (_, c) in results.items() if c <= budget]
    if not feasible:  # only possible if all-LOW itself is over budget: fall back to the cheapest
        return min(results, key=lambda t: (results[t][1], tuple(int(x) for x in t)))
    return min(feasible, key=lambda t: (-results[t][0], results[t][1], tuple(int(x) for x in t)))


def _greedy(memo: _Memo, budget: float) -> None:
    current = ALL_LOW
    while True:
        q0, c0 = memo(current)
        best_move: tuple[float, TierTuple] | None = None
        for i in range(len(current)):
            if current[i] == Tier.HIGH:
                continue
            cand = (*current[:i], Tier(current[i] + 1), *current[i + 1 :])
            q, c = memo(cand)
            dq, dc = q - q0, c - c0
            if c > budget or dq < 0 or (dq == 0 and dc > 0):
                continue
            # Gain per unit cost; a move that costs nothing (or saves) ranks first.
            score = float("inf") if dc <= 0 else dq / dc
            if best_move is None or score > best_move[0]:
                best_move = (score, cand)
        if best_move is None:
            return
        current = best_move[1]


def search_fixed_tiers(
    evaluate: Evaluator,
    *,
    budget_frac: float = 0.5,
    method: str = "greedy",
    candidates: Sequence[TierTuple] = (),
) -> SearchResult:
    """Find the best fixed tier tuple under a cost budget relative to all-HIGH.

    Args:
        evaluate: Returns ``(quality, cost)`` of a tuple on the validation split.
        budget_frac: Budget as a fraction of all-HIGH's validation cost.
        method: ``"greedy"`` (coordinate ascent), ``"exhaustive"`` or ``"candidates"``.
        candidates: Tuples to evaluate for ``method="candidates"``.

    Returns:
        The :class:`SearchResult` with the full evaluation trace.

    Raises:
        ValueError: For an unknown method, a non-positive budget or a malformed candidate.
    """
    if method not in SEARCH_METHODS:
        raise ValueError(f"unknown search method {method!r}; choose from {SEARCH_METHODS}")
    if budget_frac <= 0:
        raise ValueError(f"budget_frac must be > 0, got {budget_frac}")
    memo = _Memo(evaluate)
    _, c_high = memo(ALL_HIGH)
    budget = budget_frac * c_high
    memo(ALL_LOW)
    if method == "greedy":
        _greedy(memo, budget)
    elif method == "exhaustive":
        for t in itertools.product(list(Tier), repeat=len(MODULE_ORDER)):
            memo(tuple(t))
    else:
        for cand in candidates:
            memo(parse_tiers(cand))
    best = _pick_best(memo.results, budget)
    q, c = memo.results[best]
    return SearchResult(best=best, quality=q, cost=c, budget=budget, method=method, trace=memo.trace)
