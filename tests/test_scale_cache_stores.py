"""Cache stores: SQLite (one machine) and Redis (a cluster), shared by concurrent worker processes."""

from __future__ import annotations

import multiprocessing as mp
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from modules.backends.base import GenerationRequest
from modules.backends.fake import FakeBackend
from modules.cache import CachedLLM, CallCache
from modules.cache_stores import CacheStoreError, SQLiteStore, open_store, store_scheme

TAGS = {"module": "topic", "tier": "HIGH", "strategy": "implementation"}


def req(i: int) -> GenerationRequest:
    return GenerationRequest(messages=({"role": "user", "content": f"question {i}"},), max_tokens=8)


def test_open_store_by_url(tmp_path: Path) -> None:
    assert store_scheme(tmp_path / "a.sqlite") == "sqlite" and store_scheme(":memory:") == "sqlite"
    assert store_scheme("redis://h:1/0") == "redis"
    s = open_store(f"sqlite://{tmp_path}/b.sqlite")
    assert isinstance(s, SQLiteStore) and s.path == f"{tmp_path}/b.sqlite"
    s.close()
    with pytest.raises(CacheStoreError, match="unknown scheme 'ftp'"):
        open_store("ftp://x/y")


def test_sqlite_store_batch_ops_and_callcache_counters(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.sqlite")
    store.put_many([(f"k{i}", {"v": i}) for i in range(1200)])  # > one statement's parameter limit
    keys = [f"k{i}" for i in range(0, 1300, 7)] + ["k3", "k3"]
    got = store.get_many(keys)
    assert got[-2:] == [{"v": 3}, {"v": 3}]
    assert [g["v"] if g else None for g in got[:-2]] == [i if i < 1200 else None for i in range(0, 1300, 7)]
    assert len(store) == 1200 and "k5" in store and "zz" not in store
    cache = CallCache("unused-label", store=store)
    assert cache.get_many(["k1", "nope"]) == [{"v": 1}, None] and (cache.hits, cache.misses) == (1, 1)
    assert cache.path == "unused-label"
    cache.close()


def _worker(url: str, ids: list[int], out: mp.Queue) -> None:
    backend = FakeBackend()
    llm = CachedLLM(backend, CallCache(url))
    for start in range(0, len(ids), 5):  # several batches, interleaving with the other workers
        llm.generate([req(i) for i in ids[start : start + 5]], tags=TAGS)
    out.put((backend.calls, llm.cache.hits, llm.cache.misses))


def _run_workers(url: str, n_workers: int, ids: list[int]) -> list[tuple[int, int, int]]:
    ctx = mp.get_context("fork")
    out: mp.Queue = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(url, ids, out)) for _ in range(n_workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    return [out.get(timeout=5) for _ in procs]


def _check_shared(url: str) -> None:
    ids = list(range(40))
    first = _run_workers(url, 4, ids)  # concurrent cold workers: each computes at most all 40
    assert sum(c for c, _, _ in first) >= 40
    cache = CallCache(url)
    assert len(cache) == 40
    # A second wave (a sweep's later trials) makes no backend call at all.
    second = _run_workers(url, 3, ids)
    assert [c for c, _, _ in second] == [0, 0, 0] and all(h == 40 for _, h, _ in second)
    cache.close()


def test_sqlite_store_is_shared_by_concurrent_processes(tmp_path: Path) -> None:
    _check_shared(str(tmp_path / "shared.sqlite"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("redis", reason="the Redis store test needs the redis client (the 'ray' extra)")
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("redis-server is not installed (Debian package redis-server)")
    port = _free_port()
    workdir = tmp_path_factory.mktemp("redis")
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(workdir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    url = f"redis://127.0.0.1:{port}/0"
    import redis

    for _ in range(100):
        try:
            redis.Redis.from_url(url).ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    yield url
    proc.terminate()
    proc.wait(10)


@pytest.mark.redis
def test_redis_store_is_shared_by_concurrent_processes(redis_url: str) -> None:
    from scale.redis_store import RedisStore

    RedisStore(redis_url).clear()
    _check_shared(redis_url)
    store = RedisStore(redis_url, namespace="other")
    assert len(store) == 0 and "x" not in store  # namespaces are separate caches
    store.put("x", {"a": 1})
    assert store.get_many(["x", "y"]) == [{"a": 1}, None] and "x" in store
    store.clear()


@pytest.mark.redis
def test_unreachable_redis_is_a_clear_error() -> None:
    pytest.importorskip("redis")
    from scale.redis_store import RedisStore

    url = f"redis://127.0.0.1:{_free_port()}/0"
    with pytest.raises(CacheStoreError, match=r"cannot reach the Redis call cache at 'redis://127\.0\.0\.1"):
        RedisStore(url, timeout_s=0.5, retries=0)
