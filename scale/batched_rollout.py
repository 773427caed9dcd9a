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
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, TypeVar, cast

from envs.episode import EpisodeRecord
from envs.rollout import DecideFn, run_episode
from scale.batching import BatchStats, LockstepBatcher

if TYPE_CHECKING:
    from envs.components import EnvComponents
    from envs.question_bank import QuestionItem

__all__ = ["evaluate_policy_batched", "map_batched"]

T = TypeVar("T")
R = TypeVar("R")


def map_batched(
    fn: Callable[[T], R],
    items: Sequence[T],
    n_envs: int = 8,
    *,
    on_result: Callable[[int, R], None] | None = None,
    progress: bool = True,
    desc: str = "evaluate",
    stats: BatchStats | None = None,
) -> list[R]:
    """:func:`envs.rollout.map_in_flight` with ``n_envs`` calls in flight and their LLM calls batched.

    Each of the ``n_envs`` workers takes the next item from a shared queue; whenever every live worker
    waits on an LLM, the batcher sends the waiting calls of each model as one batch. A worker that raises
    (Ctrl-C included) ends the run once the other workers' calls return: what finished went through
    ``on_result`` and its calls are in the call cache.

    Args:
        fn: The work of one item.
        items: The items.
        n_envs: Calls in flight.
        on_result: Called with ``(index, result)`` as each call finishes, one at a time.
        progress: Show a progress bar with questions/hour and the mean batch size.
        desc: The bar's label.
        stats: If given, the batcher's statistics are added to it.

    Returns:
        One result per item, in item order.

    Raises:
        ValueError: If ``n_envs < 1``.
    """
    from tqdm.auto import tqdm

    if n_envs < 1:
        raise ValueError(f"n_envs must be >= 1, got {n_envs}")
    items = list(items)
    results: list[R | None] = [None] * len(items)
    done = [False] * len(items)
    cursor = iter(range(len(items)))
    lock = threading.Lock()
    batcher: LockstepBatcher[None] = LockstepBatcher()
    bar = tqdm(total=len(items), desc=f"{desc} x{n_envs}", unit="q", disable=not progress)
    start = time.perf_counter()

    def worker() -> None:
        while True:
            with lock:
                idx = next(cursor, None)
            if idx is None:
                return
            result = fn(items[idx])
            with lock:
                if stopped[0]:  # the run was stopped: what returns now may have failed because of it
                    return
                results[idx], done[idx] = result, True
                if on_result is not None:
                    on_result(idx, result)
                bar.update(1)
                hours = (time.perf_counter() - start) / 3600
                bar.set_postfix(q_per_h=f"{bar.n / hours:.0f}", batch=f"{batcher.stats.mean_batch:.1f}")

    # Set when the run ends early (Ctrl-C, SIGTERM, a worker's error): the batcher's threads outlive it, and
    # an episode that returns afterwards, its LLM call answered with "backend closed" as the caller shuts
    # its engine down, must not reach ``on_result``: a failure recorded as an outcome is kept on resume.
    stopped = [False]
    try:
        batcher.run([worker] * min(n_envs, max(len(items), 1)))
    except BaseException:
        with lock:
            stopped[0] = True
        raise
    finally:
        bar.close()
        if stats is not None:
            stats.rounds += batcher.stats.rounds
            stats.batches += batcher.stats.batches
            stats.requests += batcher.stats.requests
            stats.sizes.extend(batcher.stats.sizes)
    assert all(done)
    return cast(list[R], results)


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
    return map_batched(
        lambda item: run_episode(item, decide, components, cost_lambda), list(items), n_envs,
        progress=progress, stats=stats,
    )  # fmt: skip
