"""The evaluation loop: run a policy over questions and collect :class:`EpisodeRecord` s."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from envs.episode import Episode, EpisodeRecord
from modules.tier import MODULE_ORDER, Tier

if TYPE_CHECKING:
    from envs.components import EnvComponents
    from envs.question_bank import QuestionItem

#: ``decide(observation, module_name) -> Tier``: the interface of routers and baselines.
DecideFn = Callable[[np.ndarray, str], Tier]

__all__ = ["DecideFn", "EpisodeRecord", "evaluate_policy", "run_episode", "summarize_records"]


def run_episode(
    item: QuestionItem, decide: DecideFn, components: EnvComponents, cost_lambda: float | None = None
) -> EpisodeRecord:
    """Route one question with ``decide`` and return its record.

    Args:
        item: The question and its evidence.
        decide: Called once per module with that module's observation and name; returns a ``Tier``.
        components: From :func:`envs.components.make_components`.
        cost_lambda: The λ in the observations (the same weights route differently at each λ);
            None = ``components.cost_weight.default``.

    Returns:
        The episode record (judge filled in when ``components.judge`` is set).
    """
    ep = Episode(item, components, cost_lambda)
    while not ep.done:
        module = ep.module
        ep.step(decide(ep.observation(), module))
    return ep.finish(run_judge=components.judge is not None)


def evaluate_policy(
    decide: DecideFn,
    items: Iterable[QuestionItem],
    components: EnvComponents,
    progress: bool = True,
    cost_lambda: float | None = None,
) -> list[EpisodeRecord]:
    """Run :func:`run_episode` over ``items`` in order.

    Args:
        decide: The policy (``Router.decide``, a baseline's ``decide``, ...).
        items: Question bank items.
        components: The env components.
        progress: Show a tqdm progress bar.
        cost_lambda: The λ in the observations (None = ``components.cost_weight.default``).

    Returns:
        One record per item, in order.
    """
    from tqdm.auto import tqdm

    items = list(items)
    # One encoder batch for all queries is much faster than one call per episode (MiniLM on CPU).
    components.obs_builder.embed_many([it.question.question for it in items])
    return [
        run_episode(item, decide, components, cost_lambda)
        for item in tqdm(items, desc="evaluate", unit="q", disable=not progress)
    ]


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else float("nan")


def _summary(records: Sequence[EpisodeRecord]) -> dict[str, float]:
    # Failed verdicts are counted in judge_failed, not averaged in as 0.
    judged = [float(r.judge) for r in records if r.judge is not None and not r.judge_failed]
    calls = sum(r.calls for r in records)
    out = {
        "n": float(len(records)),
        "f1": _mean([r.f1 for r in records]),
        "em": _mean([r.em for r in records]),
        "judge": _mean(judged) if judged else float("nan"),
        "judge_failed": float(sum(r.judge_failed for r in records)),
        "module_cost": _mean([r.module_cost for r in records]),
        "answer_cost": _mean([r.answer_cost for r in records]),
        "total_cost": _mean([r.total_cost for r in records]),
        "latency_s": _mean([r.latency_s for r in records]),
        "failures": float(sum(r.failures for r in records)),
        "cache_hit_rate": sum(r.cache_hits for r in records) / calls if calls else 0.0,
    }
    for m_idx, module in enumerate(MODULE_ORDER):
        tiers = [r.tiers[m_idx] for r in records if len(r.tiers) > m_idx]
        for tier in Tier:
            out[f"tier_ratio/{module}/{tier.name.lower()}"] = (
                sum(t == tier for t in tiers) / len(tiers) if tiers else float("nan")
            )
    return out


def summarize_records(records: Sequence[EpisodeRecord]) -> dict[str, Any]:
    """Means overall and per category, plus per-module tier ratios.

    Returns:
        ``{"overall": {...}, "per_category": {category: {...}}}`` where each inner dict has
        ``n``, ``f1``, ``em``, ``judge`` (NaN when no judge ran), ``judge_failed``,
        ``module_cost``, ``answer_cost``, ``total_cost``, ``latency_s``, ``failures``,
        ``cache_hit_rate`` and ``tier_ratio/<module>/<low|mid|high>``.
    """
    by_cat: dict[str, list[EpisodeRecord]] = defaultdict(list)
    for r in records:
        by_cat[r.category].append(r)
    return {
        "overall": _summary(records),
        "per_category": {cat: _summary(rs) for cat, rs in sorted(by_cat.items())},
    }
