"""A real OpenAI-compatible server process: llama.cpp's ``llama-server`` built for this CPU.

The same binary is the ``engine="native"`` of the llamacpp backend. Needs
``bash scripts/build_llamacpp.sh`` (make test-engines runs it); BUDGET_ROUTER_REQUIRE_NATIVE=1 turns
a missing build into a failure instead of a skip.
"""

from __future__ import annotations

import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from modules.backends import get_backend
from modules.backends.base import BackendError, GenerationRequest
from modules.backends.llama_server import LlamaServerProcess, find_server_binary
from modules.backends.openai_http import OpenAIBackend
from modules.models import resolve_model_path

pytestmark = [pytest.mark.serving, pytest.mark.slow]


def _need_server() -> None:
    try:
        find_server_binary()
    except BackendError as exc:
        if os.environ.get("BUDGET_ROUTER_REQUIRE_NATIVE") == "1":
            pytest.fail(f"BUDGET_ROUTER_REQUIRE_NATIVE=1 but {exc}")
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def server():
    _need_server()
    proc = LlamaServerProcess(resolve_model_path("smollm2-135m"), n_ctx=4096, n_parallel=4, n_threads=2)
    yield proc
    proc.close()


def _chat(text: str, max_tokens: int = 24, **kw) -> GenerationRequest:
    return GenerationRequest(messages=({"role": "user", "content": text},), max_tokens=max_tokens, **kw)


def test_native_engine_answers_like_the_prebuilt_one() -> None:
    _need_server()
    native = get_backend("llamacpp", model="smollm2-135m", engine="native", n_threads=2)
    prebuilt = get_backend("llamacpp", model="smollm2-135m", n_threads=2)
    try:
        reqs = [
            _chat("What is the capital of France? Answer in one word.", 12),
            _chat("Name a primary colour.", 12),
        ]
        a, b = native.generate(reqs), prebuilt.generate(reqs)
        assert all(r.ok for r in a + b), [r.error for r in a + b]
        assert "paris" in a[0].text.lower()
        # Same tokenizer and template: the prompt costs the same on both engines.
        assert [r.tokens_in for r in a] == [r.tokens_in for r in b]
        # Different kernels may round differently, so the cache must keep them apart.
        assert prebuilt.numerics() is None
        num = native.numerics()
        assert num is not None and num["engine"] == "native" and len(num["weights_sha256"]) == 64
    finally:
        native.close()
        prebuilt.close()


def test_openai_backend_against_the_real_server(server) -> None:
    be = OpenAIBackend("smollm2", base_url=server.url + "/v1", api_key_env=None, numerics="llama-server")
    (res,) = be.generate([_chat("What is the capital of France? Answer in one word.", 12)])
    assert res.ok, res.error
    assert "paris" in res.text.lower() and res.tokens_in > 10 and 0 < res.tokens_out <= 12
    schema = {
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 2}
        },
        "required": ["items"],
    }
    (js,) = be.generate([_chat("List two fruits.", 96, json_schema=schema)])
    assert js.ok and js.finish_reason == "stop", js
    assert isinstance(json.loads(js.text)["items"], list), js
    assert be.numerics() == {"engine": "openai-http", "served": "llama-server"}


def test_concurrent_environments_share_one_server(server) -> None:
    be = OpenAIBackend("smollm2", base_url=server.url + "/v1", api_key_env=None, concurrency=4)
    prompts = [
        f"Give one word that rhymes with {w}." for w in ("cat", "tree", "sun", "light", "rain", "star")
    ]

    def episode(i: int) -> list[str]:  # an environment's own sequence of calls
        return [r.text for r in be.generate([_chat(prompts[(i + k) % 6], 8) for k in range(3)])]

    with ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(episode, range(4)))
    alone = {p: be.generate([_chat(p, 8)])[0].text for p in prompts}
    for i, texts in enumerate(outs):
        assert texts == [alone[prompts[(i + k) % 6]] for k in range(3)]


def test_server_restart_mid_run_is_ridden_out(server) -> None:
    from scale.resilient import ResilientBackend

    inner = OpenAIBackend(
        "smollm2", base_url=server.url + "/v1", api_key_env=None, max_retries=0, timeout_s=30
    )
    be = ResilientBackend(inner, max_outage_s=120, backoff_s=0.2, max_backoff_s=1.0)
    (before,) = be.generate([_chat("What is the capital of France? Answer in one word.", 12)])
    server.stop()

    def restart() -> None:
        time.sleep(2.0)
        server.start()  # the same port: the client sees connection refused, then the server back

    t = threading.Thread(target=restart)
    t.start()
    (after,) = be.generate([_chat("What is the capital of France? Answer in one word.", 12)])
    t.join()
    assert after.ok and after.text == before.text
    assert be.retries >= 1 and be.outage_s > 0


def test_a_server_that_dies_at_load_is_a_clear_error(tmp_path, monkeypatch) -> None:
    fake = tmp_path / "llama-server"
    fake.write_text(
        "#!/bin/sh\necho 'version: 0 (fake)'\n[ \"$1\" = --version ] && exit 0\necho boom; exit 3\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("LLAMA_SERVER", str(fake))
    log = tmp_path / "server.log"
    with pytest.raises(BackendError, match=r"exited with code 3 while loading.*server\.log"):
        LlamaServerProcess(
            resolve_model_path("smollm2-135m"), n_ctx=512, n_parallel=1, n_threads=1, log_path=log
        )
    assert "boom" in log.read_text()


def test_missing_build_names_the_build_command(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("LLAMA_SERVER", raising=False)
    monkeypatch.setenv("BUDGET_ROUTER_CACHE", str(tmp_path))
    with pytest.raises(BackendError, match=r"scripts/build_llamacpp\.sh"):
        find_server_binary()
    with pytest.raises(BackendError, match="engine 'gpu' is not one of"):
        get_backend("llamacpp", model="smollm2-135m", engine="gpu")


def test_questions_in_flight_on_real_server_slots() -> None:
    """N questions in flight (scale.batched_rollout.map_batched, what `--concurrency N` runs) on a real
    llama-server with N slots: the engine gets batches of N, every answer equals the one-at-a-time answer."""
    from modules.cache import CachedLLM
    from scale.batched_rollout import map_batched
    from scale.batching import BatchStats

    _need_server()
    native = get_backend("llamacpp", model="smollm2-135m", engine="native", n_threads=2, n_parallel=3)
    llm = CachedLLM(native, None)
    questions = [f"Name a colour that starts with the letter {c}. One word." for c in "BGRWY"]

    tags = {"module": "answer", "tier": "HIGH", "strategy": "implementation"}

    def ask(q: str) -> list[str]:  # two calls per question, like a module then the answer
        first = llm.generate([_chat(q, 8)], tags=tags)[0].text
        return [first, llm.generate([_chat(f"{q} Not {first.strip()}.", 8)], tags=tags)[0].text]

    try:
        alone = [ask(q) for q in questions]
        stats = BatchStats()
        together = map_batched(ask, questions, n_envs=3, progress=False, stats=stats)
    finally:
        native.close()
    assert together == alone
    assert max(stats.sizes) == 3 and stats.mean_batch > 1.5
    assert native.prefix_cache is not None and native.prefix_cache.prompt > 0
