"""Batched rollouts: N episodes' LLM calls reach the backend as one batch, with unchanged results."""

from __future__ import annotations

import contextlib
import copy
import threading
import time
from collections.abc import Sequence

import numpy as np
import pytest

from envs.components import make_components
from envs.fakes import make_fake_bank, token_f1_scorer
from envs.rollout import evaluate_policy
from modules.backends.base import GenerationRequest, GenerationResult
from modules.backends.fake import FakeBackend
from modules.cache import CachedLLM, CallCache
from modules.tier import Tier
from scale.batched_rollout import evaluate_policy_batched
from scale.batching import BatchStats, LockstepBatcher
from tests.support import has_locomo

# Lockstep batching is an optional scale path: `-m "not batching"` skips these tests.
pytestmark = pytest.mark.batching

TAGS = {"module": "entity", "tier": "HIGH", "strategy": "implementation"}


class RecordingBackend(FakeBackend):
    """FakeBackend that records each batch's size and can sleep once per batch (a batched engine)."""

    def __init__(self, *args, batch_sleep_s: float = 0.0, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.batch_sizes: list[int] = []
        self.batch_sleep_s = batch_sleep_s
        self._guard = threading.Lock()

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        # Never entered by two threads at once: the batcher serialises backend calls.
        assert self._guard.acquire(blocking=False), "backend entered concurrently"
        try:
            self.batch_sizes.append(len(requests))
            if self.batch_sleep_s:
                time.sleep(self.batch_sleep_s)
            return super().generate(requests)
        finally:
            self._guard.release()


def req(text: str) -> GenerationRequest:
    return GenerationRequest(messages=({"role": "user", "content": text},), max_tokens=8)


def test_lockstep_batches_calls_of_all_workers() -> None:
    backend = RecordingBackend()
    llm = CachedLLM(backend, CallCache(":memory:"))

    def episode(i: int) -> list[str]:
        return [llm.generate([req(f"q{i} step{s}")], tags=TAGS)[0].text for s in range(3)]

    batcher: LockstepBatcher[list[str]] = LockstepBatcher()
    out = batcher.run([lambda i=i: episode(i) for i in range(8)])
    assert backend.batch_sizes == [8, 8, 8]
    assert batcher.stats.rounds == 3 and batcher.stats.mean_batch == 8.0
    # Same texts as unbatched calls (fresh cache, fresh backend).
    plain = CachedLLM(FakeBackend(), None)
    expected = [
        [plain.generate([req(f"q{i} step{s}")], tags=TAGS)[0].text for s in range(3)] for i in range(8)
    ]
    assert out == expected


def test_uneven_workers_models_and_mixed_tags() -> None:
    a, b = RecordingBackend(model_id="fake-llm"), RecordingBackend(model_id="fake-mid")
    la, lb = CachedLLM(a, CallCache(":memory:")), CachedLLM(b, CallCache(":memory:"))

    def episode(i: int) -> int:
        n = 0
        for s in range(i + 1):  # worker i makes i+1 rounds of calls: later rounds shrink
            llm = la if s % 2 == 0 else lb
            n += len(llm.generate([req(f"{i}-{s}")], tags={**TAGS, "tier": "HIGH" if i % 2 else "MID"}))
        return n

    out = LockstepBatcher().run([lambda i=i: episode(i) for i in range(4)])
    assert out == [1, 2, 3, 4]
    assert a.batch_sizes == [4, 2] and b.batch_sizes == [3, 1]


def test_worker_error_is_reraised_and_others_finish() -> None:
    llm = CachedLLM(RecordingBackend(), None)
    finished: list[int] = []

    def ok(i: int) -> None:
        llm.generate([req(str(i))], tags=TAGS)
        llm.generate([req(str(i) + "b")], tags=TAGS)
        finished.append(i)

    def bad() -> None:
        llm.generate([req("x")], tags=TAGS)
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        LockstepBatcher().run([lambda: ok(0), bad, lambda: ok(2)])
    assert sorted(finished) == [0, 2]


def test_backend_exception_reaches_the_callers() -> None:
    class Broken(FakeBackend):
        def generate(self, requests):
            raise RuntimeError("engine died")

    llm = CachedLLM(Broken(), None)
    with pytest.raises(RuntimeError, match="engine died"):
        LockstepBatcher().run([lambda: llm.generate([req("a")], tags=TAGS)] * 3)


def test_batching_is_faster_with_a_batched_engine() -> None:
    # One sleep per backend call stands in for a batched engine (vLLM, llama.cpp slots).
    def run(n_envs: int) -> float:
        backend = RecordingBackend(batch_sleep_s=0.02)
        llm = CachedLLM(backend, None)
        work = [lambda i=i: [llm.generate([req(f"{i}-{s}")], tags=TAGS) for s in range(5)] for i in range(8)]
        t = time.perf_counter()
        if n_envs == 1:
            for w in work:
                w()
        else:
            LockstepBatcher().run(work)
        return time.perf_counter() - t

    assert run(8) * 3 < run(1)


BASE = {
    "benchmark": {"name": "locomo"},
    "strategy": {"name": "implementation"},
    "encoder": "hashing",
    "backend": {"name": "fake", "model_id": "fake-llm"},
    "cost": {"unit": "gflops", "lambda": 0.1},
    "cache": {"path": None},
}


def _components(backend: FakeBackend):
    comps = make_components(copy.deepcopy(BASE))
    comps.llms["high"].backend = backend  # high and answer share one CachedLLM
    comps.scorer = token_f1_scorer
    return comps


def _decide(obs: np.ndarray, module: str) -> Tier:
    # Deterministic, input-dependent tiers so episodes diverge (mixed tags in one round).
    return Tier.HIGH if module in ("filter", "summary") or int(obs.sum() * 1000) % 2 else Tier.LOW


def test_evaluate_policy_batched_matches_sequential_records() -> None:
    items = make_fake_bank(3, k=4)
    seq_backend, bat_backend = RecordingBackend(), RecordingBackend()
    seq = evaluate_policy(_decide, items, _components(seq_backend), progress=False)
    stats = BatchStats()
    comps = _components(bat_backend)
    bat = evaluate_policy_batched(_decide, items, comps, n_envs=4, progress=False, stats=stats)
    assert [r.to_dict() for r in bat] == [r.to_dict() for r in seq]
    assert max(seq_backend.batch_sizes) == 1
    assert max(bat_backend.batch_sizes) == 4 and stats.mean_batch > 2
    assert sum(bat_backend.batch_sizes) == sum(seq_backend.batch_sizes)


def test_batched_vec_env_equals_dummy_vec_env() -> None:
    from stable_baselines3.common.vec_env import DummyVecEnv

    from envs.reward import RewardShaper
    from envs.router_env import MemoryRouterEnv
    from scale.batched_vec_env import BatchedVecEnv

    items = make_fake_bank(2, k=3)

    def make(cls, backend):
        comps = _components(backend)
        fns = [
            lambda i=i: MemoryRouterEnv(items, comps, RewardShaper(), seed=10 + i)
            for i in range(4)
        ]
        return cls(fns)

    dummy_backend, batched_backend = RecordingBackend(), RecordingBackend()
    envs = [make(DummyVecEnv, dummy_backend), make(BatchedVecEnv, batched_backend)]
    obs = [e.reset() for e in envs]
    np.testing.assert_array_equal(obs[0], obs[1])
    rng = np.random.default_rng(0)
    for _ in range(12):
        actions = rng.integers(0, 3, size=4)
        outs = [e.step(actions) for e in envs]
        for a, b in zip(outs[0][:3], outs[1][:3], strict=True):
            np.testing.assert_array_equal(a, b)
        for ia, ib in zip(outs[0][3], outs[1][3], strict=True):
            assert ia.keys() == ib.keys() and ia.get("module") == ib.get("module")
    assert max(batched_backend.batch_sizes) > 1 and max(dummy_backend.batch_sizes) == 1
    assert envs[1].batcher.stats.requests == sum(batched_backend.batch_sizes)


def test_train_vec_env_batched_builds_the_scale_vec_env() -> None:
    # train.vec_env=batched reaches scale/ by name (the core never imports it).
    from policies.training.vec_env import build_vec_env
    from scale.batched_vec_env import BatchedVecEnv

    comps = _components(RecordingBackend())
    env = build_vec_env(make_fake_bank(2, k=3), BASE, n_envs=2, seed=0, kind="batched", components=comps)
    assert isinstance(env, BatchedVecEnv) and env.num_envs == 2
    assert env.reset().shape[0] == 2
    env.close()


def _frontier_records(tmp_path, concurrency: int, backend: FakeBackend, items, name: str) -> list[dict]:
    from evaluation.frontier_runner import RecordStore, RunSpec, evaluate_run, same_for_every_item

    run = RunSpec("policy", same_for_every_item(_decide))
    store = RecordStore(tmp_path / f"{name}.jsonl")
    recs = evaluate_run(run, items, _components(backend), store, progress=False, concurrency=concurrency)
    return [{k: v for k, v in r.items() if k != "git_commit"} for r in recs]


def test_frontier_with_n_in_flight_gives_the_records_of_one_at_a_time(tmp_path) -> None:
    """`evaluate.py frontier --concurrency N`: the same records as N = 1, the engine sees batches of N."""
    items = make_fake_bank(4, k=4)
    one, many = RecordingBackend(), RecordingBackend()
    seq = _frontier_records(tmp_path, 1, one, items, "one")
    bat = _frontier_records(tmp_path, 4, many, items, "many")
    assert bat == seq
    assert max(one.batch_sizes) == 1 and max(many.batch_sizes) == 4
    assert sum(many.batch_sizes) == sum(one.batch_sizes)


def test_the_runs_of_a_table_share_one_queue_of_episodes(tmp_path) -> None:
    """`frontier --concurrency N` over several paths: the next path's questions start while the last
    ones of the path before are in flight, the records are those of one path after the other, and runs
    sharing an id are evaluated once."""
    from evaluation.frontier_runner import RecordStore, evaluate_runs, fixed_run
    from modules.tier import parse_tiers

    items = make_fake_bank(3, k=4)
    paths = [fixed_run(parse_tiers(p)) for p in ("H,H,H,H,H", "H,L,L,L,L", "L,L,L,L,H", "H,H,H,H,H")]

    def table(concurrency: int, name: str) -> tuple[list[list[dict]], RecordingBackend]:
        backend = RecordingBackend()
        runs = [(run, RecordStore(tmp_path / name / f"{run.run_id}.jsonl")) for run in paths]
        records = evaluate_runs(runs, items, _components(backend), progress=False, concurrency=concurrency)
        return _without_cache_fields(records), backend

    seq, one = table(1, "one")
    shared, many = table(4, "many")
    assert shared == seq and shared[0] == shared[3]
    assert max(one.batch_sizes) == 1 and max(many.batch_sizes) == 4
    # The batch drains once, at the end, not after every path (a queue per path: 4, ..., 1, 1, 4, ...).
    assert many.batch_sizes == sorted(many.batch_sizes, reverse=True) and min(many.batch_sizes) < 4
    assert sum(many.batch_sizes) == sum(one.batch_sizes)  # the duplicate path computed nothing
    assert sorted(p.name for p in (tmp_path / "many").iterdir()) == sorted(
        f"{run.run_id}.jsonl" for run in paths[:3]
    )


def test_ctrl_c_with_episodes_in_flight_keeps_what_finished(tmp_path) -> None:
    """A KeyboardInterrupt while N episodes run: the finished episodes' records are saved and their calls
    cached; a rerun computes only the rest and ends with the same records."""
    from evaluation.frontier_runner import RecordStore, RunSpec, evaluate_run, same_for_every_item

    class StopAfter(RecordingBackend):
        def __init__(self, batches: int) -> None:
            super().__init__()
            self.left = batches

        def generate(self, requests):
            self.left -= 1
            if self.left < 0:
                raise KeyboardInterrupt
            return super().generate(requests)

    items = make_fake_bank(6, k=4)
    cache = CallCache(str(tmp_path / "calls.sqlite"))
    run = RunSpec("policy", same_for_every_item(_decide))
    store_path = tmp_path / "records.jsonl"
    # The whole run once, to stop the next one in its middle.
    full = RecordingBackend()
    ref_store = RecordStore(tmp_path / "ref.jsonl")
    reference = evaluate_run(run, items, _components(full), ref_store, progress=False, concurrency=2)
    stopping = StopAfter(len(full.batch_sizes) // 2)
    comps = _components(stopping)
    comps.llms["high"].cache = cache
    with pytest.raises(KeyboardInterrupt):
        evaluate_run(run, items, comps, RecordStore(store_path), progress=False, concurrency=2)
    saved = RecordStore(store_path).records
    assert 0 < len(saved) < len(items)
    again = RecordingBackend()
    comps = _components(again)
    comps.llms["high"].cache = cache
    recs = evaluate_run(run, items, comps, RecordStore(store_path), progress=False, concurrency=2)
    assert _without_cache_fields(recs) == _without_cache_fields(reference)
    assert sum(again.batch_sizes) < sum(full.batch_sizes)  # the finished episodes' calls came from the cache


def test_an_episode_that_returns_after_a_stop_is_not_kept() -> None:
    """The batcher's threads outlive a Ctrl-C or SIGTERM in the main thread. The caller then closes its
    engine, and an episode still in flight returns with a "backend closed" failure: it must not reach
    ``on_result`` (the powered study once kept 40 such empty answers as outcomes, counted done on resume)."""
    import signal

    from scale.batched_rollout import map_batched

    release, kept = threading.Event(), []

    def fn(i: int) -> str:
        if i > 0:
            release.wait(60)  # in flight when the stop comes (the stop ends the wait long before)
            return f"failed {i}: backend closed"
        return "answer 0"

    def on_result(_idx: int, result: str) -> None:
        kept.append(result)
        if len(kept) > 1:
            return
        # The stop: a real signal to the main thread (interrupt_main would not wake it from join()), sent
        # now rather than from a timer, which a loaded machine can delay past the episodes' return.
        main = threading.main_thread().ident
        assert main is not None
        signal.pthread_kill(main, signal.SIGINT)

    # Python's own Ctrl-C handler, whatever an earlier test in this worker process left installed.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            map_batched(fn, list(range(3)), n_envs=3, on_result=on_result, progress=False)
    finally:
        signal.signal(signal.SIGINT, previous)
    release.set()
    time.sleep(0.3)  # the workers return now
    assert kept == ["answer 0"]


def _without_cache_fields(value):
    """A record as the engine made it: not how warm the cache was, not the commit."""
    if isinstance(value, dict):
        drop = ("git_commit", "cache_hits", "cache_hit_rate")
        return {k: _without_cache_fields(v) for k, v in value.items() if k not in drop}
    if isinstance(value, list):
        return [_without_cache_fields(v) for v in value]
    return value


@pytest.mark.skipif(not has_locomo(), reason="LoCoMo data directory absent (locomo10.json)")
def test_validation_with_episodes_in_flight_gives_the_same_history(tmp_path) -> None:
    """`train.eval_concurrency=N`: the validation inside training runs N questions at once, same numbers."""
    import json

    from policies.training.loop import train
    from tests.reliability_support import RUN_NAME, config

    histories = []
    for n in (1, 3):
        base = tmp_path / f"n{n}"
        train(config(base, "train.total_timesteps=40", f"train.eval_concurrency={n}"))
        history = json.loads((base / "runs" / RUN_NAME / "validation.json").read_text())["history"]
        histories.append([{k: v for k, v in h.items() if k != "seconds" and "cache" not in k}
                          for h in history])  # fmt: skip
    assert histories[0] == histories[1] and len(histories[0]) == 2


class _EchoServer:
    """An OpenAI-compatible chat server that echoes the prompt; a prompt containing "stall" waits first."""

    def __init__(self, stall_s: float) -> None:
        import http.server
        import json

        stall = stall_s

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                prompt = body["messages"][-1]["content"]
                if "stall" in prompt:
                    time.sleep(stall)
                reply = {"choices": [{"message": {"role": "assistant", "content": f"echo {prompt}"},
                                      "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": 3, "completion_tokens": 2}}
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                with contextlib.suppress(BrokenPipeError):  # the client gave up (its timeout)
                    self.wfile.write(data)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _finish_times(backend, prompts: list[str], n: int) -> tuple[list[str], dict[str, float]]:
    from scale.batched_rollout import map_batched

    llm = CachedLLM(backend, CallCache(":memory:"))
    start = time.perf_counter()
    finished: dict[str, float] = {}
    texts = map_batched(
        lambda p: llm.generate([req(p)], tags=TAGS)[0].text or "error", prompts, n,
        on_result=lambda i, _: finished.setdefault(prompts[i], time.perf_counter() - start), progress=False,
    )
    return texts, finished


def test_a_stalled_request_holds_only_its_own_episode() -> None:
    """N episodes in flight against a server that stalls one request: the others proceed and finish first;
    past the client's timeout the stalled call is one failed call, and the rest are unaffected."""
    from modules.backends.openai_http import OpenAIBackend

    server = _EchoServer(stall_s=2.0)
    prompts = ["q0", "stall", "q2", "q3", "q4", "q5", "q6"]
    try:
        backend = OpenAIBackend("m", base_url=server.url, timeout_s=10, api_key_env=None)
        assert backend.concurrent_calls
        texts, finished = _finish_times(backend, prompts, 3)
        assert texts == [f"echo {p}" for p in prompts]
        assert max(t for p, t in finished.items() if p != "stall") < 1.0 <= 2.0 <= finished["stall"]
        # The same through a barrier (an engine that needs one): the stalled call holds its batch-mates.
        backend.concurrent_calls = False
        _, lockstep = _finish_times(backend, prompts, 3)
        assert sorted(lockstep.values())[1] >= 2.0
        # A stall past the timeout: one failed call (not cached, so a rerun retries it); the rest answer.
        impatient = OpenAIBackend("m", base_url=server.url, timeout_s=0.5, max_retries=0, api_key_env=None)
        texts, finished = _finish_times(impatient, prompts, 3)
        assert texts == ["error" if p == "stall" else f"echo {p}" for p in prompts]
        assert max(t for p, t in finished.items() if p != "stall") < 1.0
    finally:
        server.close()
