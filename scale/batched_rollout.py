"""Evaluate a policy over many questions with N episodes in flight and their LLM calls batched.

:func:`evaluate_policy_batched` is :func:`envs.rollout.evaluate_policy` with ``n_envs``
episodes running side by side under a :class:`scale.batching.LockstepBatcher`: each of the
N workers takes the next question from a shared queue and runs it with the ordinary
:func:`envs.rollout.run_episode`; whenever all N wait on an LLM, the calls of the same model
(same module and tier, usually, since episodes move in step) go to the backend as one batch.
Records are identical to the sequential loop's (same code path, temperature 0); only the
wall time changes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

from envs.episode import EpisodeRecord
from envs.rollout import DecideFn, run_episode
from scale.batching import BatchStats, LockstepBatcher

if TYPE_CHECKING:
    from envs.components import EnvComponents
    from envs.question_bank import QuestionItem

__all__ = ["evaluate_policy_batched"]


def evaluate_policy_batched(
    decide: DecideFn,
    items: Iterable[QuestionItem],
    components: EnvComponents,
    n_envs: int = 8,
    progress: bool = True,
    stats: BatchStats | None = None,
    cost_lambda: float | None = None,
) -> list[EpisodeRecord]:
    """Run every item with ``decide``, ``n_envs`` episodes at a time, LLM calls batched.

    Args:
        decide: The policy (``Router.decide``, a baseline's ``decide``, ...).
        items: Question bank items.
        components: The env components (shared by all episodes).
        n_envs: Episodes in flight (the batch size the backend sees; 1 = sequential).
        progress: Show a tqdm progress bar.
        stats: If given, the batcher's statistics are added to it.
        cost_lambda: The λ in the observations (None = ``components.cost_weight.default``).

    Returns:
        One record per item, in item order.

    Raises:
        ValueError: If ``n_envs < 1``.
    """
    from tqdm.auto import tqdm

    if n_envs < 1:
        raise ValueError(f"n_envs must be >= 1, got {n_envs}")
    items = list(items)
    records: list[EpisodeRecord | None] = [None] * len(items)
    cursor = iter(range(len(items)))
    lock = threading.Lock()
    bar = tqdm(total=len(items), desc=f"evaluate x{n_envs}", unit="q", disable=not progress)

    def worker() -> None:
        while True:
            with lock:
                idx = next(cursor, None)
            if idx is None:
                return
            records[idx] = run_episode(items[idx], decide, components, cost_lambda)
            bar.update(1)

    batcher: LockstepBatcher[None] = LockstepBatcher()
    try:
        batcher.run([worker] * min(n_envs, max(len(items), 1)))
    finally:
        bar.close()
    if stats is not None:
        stats.rounds += batcher.stats.rounds
        stats.batches += batcher.stats.batches
        stats.requests += batcher.stats.requests
        stats.sizes.extend(batcher.stats.sizes)
    assert all(r is not None for r in records)
    return [r for r in records if r is not None]
