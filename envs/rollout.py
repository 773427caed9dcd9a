"""The evaluation loop: run a policy over questions and collect :class:`EpisodeRecord` s."""

from __future__ import annotations

import importlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from envs.episode import Episode, EpisodeRecord
from modules.tier import MODULE_ORDER, Tier

if TYPE_CHECKING:
    from envs.components import EnvComponents
    from envs.question_bank import QuestionItem

#: ``decide(observation, module_name) -> Tier``: the interface of routers and baselines.
DecideFn = Callable[[np.ndarray, str], Tier]
#: ``on_record(index, record)``: called as each episode of :func:`run_episodes` finishes (any order).
OnRecord = Callable[[int, EpisodeRecord], None]
T = TypeVar("T")
R = TypeVar("R")

__all__ = [
    "NO_OBSERVATION",
    "DecideFn",
    "EpisodeRecord",
    "OnRecord",
    "evaluate_policy",
    "map_in_flight",
    "run_episode",
    "run_episodes",
    "summarize_records",
]


#: What a policy that does not read observations gets instead of one (``observe=False``).
NO_OBSERVATION = np.zeros(0, dtype=np.float32)


def run_episode(
    item: QuestionItem,
    decide: DecideFn,
    components: EnvComponents,
    cost_lambda: float | None = None,
    observe: bool = True,
) -> EpisodeRecord:
    """Route one question with ``decide`` and return its record.

    Args:
        item: The question and its evidence.
        decide: Called once per module with that module's observation and name; returns a ``Tier``.
        components: From :func:`envs.components.make_components`.
        cost_lambda: The λ in the observations (the same weights route differently at each λ);
            None = ``components.cost_weight.default``.
        observe: False for a policy that never reads its observation (a fixed or random path): it gets
            :data:`NO_OBSERVATION`, and the module inputs are not embedded. The record is the same.

    Returns:
        The episode record (judge filled in when ``components.judge`` is set).
    """
    ep = Episode(item, components, cost_lambda)
    while not ep.done:
        module = ep.module
        ep.step(decide(ep.observation() if observe else NO_OBSERVATION, module))
    return ep.finish(run_judge=components.judge is not None)


def map_in_flight(
    fn: Callable[[T], R],
    items: Sequence[T],
    *,
    concurrency: int = 1,
    on_result: Callable[[int, R], None] | None = None,
    progress: bool = True,
    desc: str = "evaluate",
) -> list[R]:
    """``[fn(item) for item in items]`` with ``concurrency`` calls in flight; results in item order.

    With ``concurrency > 1`` the calls run in threads whose LLM calls reach each backend as one batch
    (``scale.batched_rollout.map_batched``, imported by name: an optional scale path), which engines with
    continuous batching or server slots turn into throughput. Each call's LLM requests are pure functions
    of its own inputs, so the results are those of one at a time; only the wall time changes.

    Args:
        fn: The work of one item (an episode, a headroom context, ...).
        items: The items.
        concurrency: Calls in flight (1 = one after the other).
        on_result: Called with ``(index, result)`` as each call finishes (one at a time), e.g. to save
            finished work while the rest runs: a stop loses nothing that finished.
        progress: Show a progress bar (questions/hour, and the batch sizes the engine sees).
        desc: The bar's label.

    Raises:
        ValueError: ``concurrency < 1``.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    items = list(items)
    if concurrency > 1 and len(items) > 1:
        batched = importlib.import_module("scale.batched_rollout")
        return list(
            batched.map_batched(
                fn, items, n_envs=concurrency, on_result=on_result, progress=progress, desc=desc
            )
        )
    from tqdm.auto import tqdm

    results = []
    for i, item in enumerate(tqdm(items, desc=desc, unit="q", disable=not progress)):
        result = fn(item)
        if on_result is not None:
            on_result(i, result)
        results.append(result)
    return results


def run_episodes(
    items: Sequence[QuestionItem],
    decide_for: Callable[[QuestionItem], DecideFn],
    components: EnvComponents,
    *,
    cost_lambda: float | None = None,
    concurrency: int = 1,
    on_record: OnRecord | None = None,
    progress: bool = True,
    desc: str = "evaluate",
    observe: bool = True,
) -> list[EpisodeRecord]:
    """One episode per item, ``concurrency`` of them in flight (:func:`map_in_flight`); records in order.

    Args:
        items: Question bank items.
        decide_for: The policy of each item (one ``decide`` for all, or a per-question seeded one).
        components: The env components (shared by every episode).
        cost_lambda: The λ in the observations (None = ``components.cost_weight.default``).
        concurrency: Episodes in flight (1 = one after the other).
        on_record: Called with ``(index, record)`` as each episode finishes.
        progress: Show a progress bar.
        desc: The bar's label.
        observe: False when the policies never read observations (:func:`run_episode`).
    """
    items = list(items)
    if observe:
        # One encoder batch for all queries is much faster than one call per episode (MiniLM on CPU).
        components.obs_builder.embed_many([it.question.question for it in items])
    return map_in_flight(
        lambda item: run_episode(item, decide_for(item), components, cost_lambda, observe), items,
        concurrency=concurrency, on_result=on_record, progress=progress, desc=desc,
    )  # fmt: skip


def evaluate_policy(
    decide: DecideFn,
    items: Iterable[QuestionItem],
    components: EnvComponents,
    progress: bool = True,
    cost_lambda: float | None = None,
    concurrency: int = 1,
) -> list[EpisodeRecord]:
    """Run :func:`run_episode` over ``items`` with one policy (see :func:`run_episodes`).

    Args:
        decide: The policy (``Router.decide``, a baseline's ``decide``, ...).
        items: Question bank items.
        components: The env components.
        progress: Show a tqdm progress bar.
        cost_lambda: The λ in the observations (None = ``components.cost_weight.default``).
        concurrency: Episodes in flight (1 = one after the other).

    Returns:
        One record per item, in order.
    """
    return run_episodes(
        list(items), lambda _item: decide, components, cost_lambda=cost_lambda, concurrency=concurrency,
        progress=progress,
    )  # fmt: skip


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
