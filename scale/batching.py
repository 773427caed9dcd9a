"""Batch the LLM calls of N concurrent episodes: one backend call per model per round.

The pipeline, the answer generator and the judge call ``CachedLLM.generate`` one request at a
time, which is right for one episode. To batch across episodes without changing that code,
:class:`LockstepBatcher` runs N episodes in N threads and binds itself to each thread
(:func:`modules.cache.bind_batcher`); every ``CachedLLM.generate`` in those threads then
*queues* its calls and waits. When every live episode is waiting (or finished), the batcher
sends all queued calls of one model to that model's backend as **one batch** through
:meth:`~modules.cache.CachedLLM.generate_tagged` (cache lookups in one round trip, misses in
one ``backend.generate``), and wakes the episodes with their results. The backend turns the
batch into real parallel work: llama.cpp slots (``n_parallel``), vLLM's continuous batching,
concurrent HTTP requests (``concurrency``).

A backend that schedules requests itself (``LLMBackend.concurrent_calls``: llama.cpp with several
slots, an OpenAI-compatible server) gets no barrier: a worker's call goes to it at once, from the
worker's own thread, while the other workers go on. The engine sees every episode's request as soon
as it exists (continuous batching does the rest), a slow or stalled request holds only its own
episode, and the engine is not idle while one episode runs Python between its calls.

Why a barrier ("wait until every episode is waiting") and not a timer: episodes in lockstep
reach the same module at the same time, so the barrier yields the largest batches and no
latency tuning. Why only one episode thread runs Python at a time (``serialize_compute``):
the non-LLM work (tokenisers, spaCy, torch encoders) is not guaranteed thread-safe, and on a
CPU box the backend uses the cores anyway; the batch is where the parallelism is. Episodes
stay deterministic: each one's calls are pure functions of its own inputs, and a batch is
ordered by worker index.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from modules.backends.base import GenerationRequest, GenerationResult
from modules.cache import CachedLLM, bind_batcher

T = TypeVar("T")

_WORKER = threading.local()


@dataclass
class _Call:
    """One ``generate`` call waiting for its batch."""

    worker: int
    llm: CachedLLM
    items: list[tuple[GenerationRequest, Mapping[str, str]]]
    done: threading.Event = field(default_factory=threading.Event)
    results: list[GenerationResult] | None = None
    error: BaseException | None = None


@dataclass
class BatchStats:
    """What the batcher sent to backends.

    Attributes:
        rounds: Barrier flushes.
        batches: ``generate_tagged`` calls (one per model per round).
        requests: Requests sent in those batches (cache hits included).
        sizes: Requests the engine held per dispatch, in order: a lockstep batch's size, or for a
            backend called directly the requests in flight at that call (this one included).
    """

    rounds: int = 0
    batches: int = 0
    requests: int = 0
    sizes: list[int] = field(default_factory=list)

    @property
    def mean_batch(self) -> float:
        """Mean of :attr:`sizes`: the batch the engine sees (0 before any call)."""
        return sum(self.sizes) / len(self.sizes) if self.sizes else 0.0


class LockstepBatcher(Generic[T]):
    """Run callables in threads and batch their LLM calls (see the module docstring).

    Args:
        serialize_compute: Let only one worker run Python at a time (safe default; the batch
            is sent while every worker waits, so the backend still sees N requests at once).

    Attributes:
        stats: Batch statistics, accumulated over :meth:`run` calls.
    """

    def __init__(self, serialize_compute: bool = True) -> None:
        self.serialize_compute = serialize_compute
        self.stats = BatchStats()
        self._cv = threading.Condition()
        self._turn = threading.Lock()
        self._pending: list[_Call] = []
        self._live = 0
        self._direct = 0  # workers inside a call to a backend that takes concurrent calls
        self._in_flight = 0  # requests of those calls
        self._running = False

    # -- driving ------------------------------------------------------------------------

    def run(self, fns: Sequence[Callable[[], T]]) -> list[T]:
        """Run every ``fn`` in its own thread until all return; their LLM calls are batched.

        Args:
            fns: Zero-argument callables (e.g. "run episodes until the queue is empty").

        Returns:
            Their return values, in order.

        Raises:
            RuntimeError: If ``run`` is re-entered while running.
            BaseException: The first (by index) exception a callable raised, after all finished.
        """
        with self._cv:
            if self._running:
                raise RuntimeError("LockstepBatcher.run is already running (it is not re-entrant)")
            self._running = True
            self._live = len(fns)
            self._pending = []
        outs: list[Any] = [None] * len(fns)
        errors: list[BaseException | None] = [None] * len(fns)
        threads = [
            threading.Thread(
                target=self._worker, args=(i, fn, outs, errors), name=f"lockstep-{i}", daemon=True
            )
            for i, fn in enumerate(fns)
        ]
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            with self._cv:
                self._running = False
        for err in errors:
            if err is not None:
                raise err
        return outs

    def _acquire(self) -> None:
        if self.serialize_compute:
            self._turn.acquire()

    def _release(self) -> None:
        if self.serialize_compute:
            self._turn.release()

    def _worker(
        self, index: int, fn: Callable[[], T], outs: list[Any], errors: list[BaseException | None]
    ) -> None:
        _WORKER.index = index
        bind_batcher(self)
        self._acquire()
        try:
            outs[index] = fn()
        except BaseException as exc:  # re-raised by run() in the caller's thread
            errors[index] = exc
        finally:
            bind_batcher(None)
            with self._cv:
                self._live -= 1
                ready = self._take_if_ready()
            if ready:
                self._flush(ready)
            self._release()

    # -- the Batcher protocol (called from CachedLLM.generate) ---------------------------

    def submit(
        self, llm: CachedLLM, items: Sequence[tuple[GenerationRequest, Mapping[str, str]]]
    ) -> list[GenerationResult]:
        """Queue ``items`` for ``llm``, wait for the round's batch, return their results.

        Raises:
            BaseException: Whatever the backend raised for this call's batch.
        """
        if getattr(llm.backend, "concurrent_calls", False):
            return self._call_directly(llm, items)
        call = _Call(getattr(_WORKER, "index", 0), llm, list(items))
        with self._cv:
            self._pending.append(call)
            ready = self._take_if_ready()
        if ready:
            self._flush(ready)
        self._release()
        call.done.wait()
        self._acquire()
        if call.error is not None:
            raise call.error
        assert call.results is not None
        return call.results

    def _call_directly(
        self, llm: CachedLLM, items: Sequence[tuple[GenerationRequest, Mapping[str, str]]]
    ) -> list[GenerationResult]:
        """Send ``items`` to a backend that schedules concurrent calls itself, from this thread, now.

        The worker leaves the barrier while its call runs (the others' lockstep rounds do not wait for
        it) and gives up its compute turn (the others run their Python meanwhile).
        """
        with self._cv:
            self._direct += 1
            self._in_flight += len(items)
            self.stats.batches += 1
            self.stats.requests += len(items)
            self.stats.sizes.append(self._in_flight)
            ready = self._take_if_ready()
        if ready:
            self._flush(ready)
        self._release()
        try:
            return llm.generate_tagged(items)
        finally:
            with self._cv:
                self._direct -= 1
                self._in_flight -= len(items)
            self._acquire()

    def _take_if_ready(self) -> list[_Call]:
        """Under ``_cv``: the pending calls if every live worker is waiting (or in a direct call), else []."""
        if self._pending and len(self._pending) + self._direct >= self._live:
            ready, self._pending = self._pending, []
            return ready
        return []

    def _flush(self, calls: list[_Call]) -> None:
        """Send each model's queued calls as one batch and wake their workers."""
        calls = sorted(calls, key=lambda c: c.worker)
        groups: dict[int, list[_Call]] = {}
        for call in calls:
            groups.setdefault(id(call.llm), []).append(call)
        self.stats.rounds += 1
        for group in groups.values():
            items = [item for call in group for item in call.items]
            try:
                results = group[0].llm.generate_tagged(items)
            except BaseException as exc:
                for call in group:
                    call.error = exc
                    call.done.set()
                continue
            self.stats.batches += 1
            self.stats.requests += len(items)
            self.stats.sizes.append(len(items))
            pos = 0
            for call in group:
                call.results = results[pos : pos + len(call.items)]
                pos += len(call.items)
                call.done.set()


def run_batched(fns: Sequence[Callable[[], T]], batcher: LockstepBatcher[T] | None = None) -> list[T]:
    """Run ``fns`` through a (new) :class:`LockstepBatcher` and return their results."""
    return (batcher or LockstepBatcher()).run(fns)
