import multiprocessing as mp
import threading
import time
from dataclasses import replace
from pathlib import Path

from modules.backends.base import GenerationRequest
from modules.backends.fake import FakeBackend
from modules.cache import CODE_VERSION, CachedLLM, CallCache, call_key

TAGS = {"module": "entity", "tier": "HIGH", "strategy": "model"}


def req(text: str) -> GenerationRequest:
    return GenerationRequest(messages=({"role": "user", "content": text},), max_tokens=8)


def test_callcache_get_put_counters_and_persistence(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "calls.sqlite"
    with CallCache(path) as c:
        assert c.get("k") is None and (c.hits, c.misses) == (0, 1)
        c.put("k", {"a": 1, "b": [1, 2]})
        assert c.get("k") == {"a": 1, "b": [1, 2]} and c.hits == 1
        assert len(c) == 1 and "k" in c and c.stats() == {"hits": 1, "misses": 1, "entries": 1}
    with CallCache(path) as c2:
        assert c2.get("k") == {"a": 1, "b": [1, 2]} and (c2.hits, c2.misses) == (1, 0)


def test_cached_llm_replays_original_tokens_and_latency(tmp_path: Path) -> None:
    be = FakeBackend(latency_s=0.25)
    llm = CachedLLM(be, CallCache(tmp_path / "c.sqlite"))
    (first,) = llm.generate([req("a b c")], tags=TAGS)
    (again,) = llm.generate([req("a b c")], tags=TAGS)
    assert be.calls == 1 and not first.cached and again.cached
    assert (again.text, again.tokens_in, again.tokens_out, again.latency_s) == (
        first.text, first.tokens_in, first.tokens_out, 0.25,
    )
    # A new process-level instance (fresh backend, same file) still hits.
    be2 = FakeBackend(latency_s=0.25)
    (third,) = CachedLLM(be2, CallCache(tmp_path / "c.sqlite")).generate([req("a b c")], tags=TAGS)
    assert be2.calls == 0 and third.cached and third.text == first.text
    assert llm.model_id == "fake-llm" and llm.n_ctx == be.n_ctx and llm.count_tokens("x y") == 2
    # The stored value carries the call's tags (for per-module breakdowns), not read back.
    stored = llm.cache.get(call_key(TAGS, llm.model_id, req("a b c")))
    assert stored is not None and stored["tags"] == TAGS


def test_key_depends_on_tags_model_request_and_version() -> None:
    base = call_key(TAGS, "m", req("q"))
    assert base == call_key(dict(reversed(list(TAGS.items()))), "m", req("q"))
    assert base != call_key({**TAGS, "tier": "LOW"}, "m", req("q"))
    assert base != call_key(TAGS, "m2", req("q"))
    assert base != call_key(TAGS, "m", req("q2"))
    assert CODE_VERSION


def test_failures_are_not_cached_and_batches_dedupe(tmp_path: Path) -> None:
    be = FakeBackend(fail_first=1)
    llm = CachedLLM(be, CallCache(tmp_path / "c.sqlite"))
    (bad,) = llm.generate([req("x")], tags=TAGS)
    assert not bad.ok and len(llm.cache) == 0
    (good,) = llm.generate([req("x")], tags=TAGS)
    assert good.ok and not good.cached and be.calls == 2
    a, b, c = llm.generate([req("y"), req("y"), req("x")], tags=TAGS)
    assert be.calls == 3 and a.text == b.text and not a.cached and b.cached and c.cached


class _NumberedBackend(FakeBackend):
    """A backend taking concurrent calls whose every computation answers differently (an engine whose
    numerics depend on the batch), slow enough that two threads ask for one key at the same time."""

    def __init__(self, fail_first: int = 0) -> None:
        super().__init__(fail_first=fail_first)
        self.concurrent_calls = True
        self.lock = threading.Lock()

    def generate(self, requests):
        with self.lock:
            out = super().generate(requests)
            n = self.calls
        time.sleep(0.2)
        return [replace(r, text=f"{r.text} #{n}") if r.ok else r for r in out]


def _two_threads_ask(llm: CachedLLM) -> list:
    results: list = [None, None]

    def ask(i: int) -> None:
        if i:
            time.sleep(0.05)  # the second thread asks while the first one computes
        results[i] = llm.generate([req("same")], tags=TAGS)[0]

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_a_call_in_flight_is_not_computed_twice(tmp_path: Path) -> None:
    """Two threads asking for one key at once: one computation, both get what the cache stores (two
    computations could differ, and the cache would keep one while an episode recorded the other)."""
    be = _NumberedBackend()
    llm = CachedLLM(be, CallCache(tmp_path / "c.sqlite"))
    first, second = _two_threads_ask(llm)
    assert be.calls == 1 and first.text == second.text and not first.cached and second.cached
    (stored,) = llm.generate([req("same")], tags=TAGS)
    assert stored.text == first.text
    # The computing thread failed: a failure is not stored, so the waiting thread computes it itself.
    be = _NumberedBackend(fail_first=1)
    llm = CachedLLM(be, CallCache(tmp_path / "d.sqlite"))
    first, second = _two_threads_ask(llm)
    assert be.calls == 2 and not first.ok and second.ok and not second.cached


def test_no_cache_passthrough() -> None:
    be = FakeBackend()
    llm = CachedLLM(be, None)
    llm.generate([req("x")], tags=TAGS)
    llm.generate([req("x")], tags=TAGS)
    assert be.calls == 2


def _worker(path: str, start: int, n: int, out: "mp.Queue[int]") -> None:
    cache = CallCache(path, busy_timeout_s=30)
    llm = CachedLLM(FakeBackend(), cache)
    for i in range(start, start + n):
        llm.generate([req(f"q{i % 40}")], tags=TAGS)
        cache.get(f"missing{i}")
    out.put(len(cache))


def test_two_processes_read_and_write_concurrently(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.sqlite")
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(path, s, 60, q)) for s in (0, 20)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    counts = [q.get(timeout=5) for _ in procs]
    assert all(0 < c <= 40 for c in counts)
    with CallCache(path) as c:
        assert len(c) == 40


def test_replay_keeps_finish_reason_and_truncated_flag(tmp_path: Path) -> None:
    from modules.backends.base import GenerationResult

    class Trunc(FakeBackend):
        def generate(self, requests):
            return [GenerationResult(text="t", tokens_in=9, tokens_out=1, latency_s=0.1, model_id="fake-llm",
                                     finish_reason="length", truncated=True) for _ in requests]

    llm = CachedLLM(Trunc(), CallCache(tmp_path / "c.sqlite"))
    llm.generate([req("x")], tags=TAGS)
    (r,) = llm.generate([req("x")], tags=TAGS)
    assert r.cached and r.truncated and r.finish_reason == "length" and r.tokens_in == 9
