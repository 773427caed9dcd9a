"""OpenAI-compatible serving: a real llama.cpp server on localhost, injected faults, and outages."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from modules.backends import get_backend
from modules.backends.base import GenerationRequest
from modules.backends.fake import FakeBackend
from modules.backends.openai_http import OpenAIBackend
from modules.cache import CachedLLM, CallCache
from scale.resilient import BackendOutage, ResilientBackend, is_transient
from scale.serving import free_port
from tests.fault_proxy import FaultProxy

# OpenAI-compatible serving is an optional scale path: `-m "not serving"` skips these tests.
pytestmark = pytest.mark.serving

TAGS = {"module": "answer", "tier": "HIGH", "strategy": "implementation"}


def chat(text: str, max_tokens: int = 4) -> GenerationRequest:
    return GenerationRequest(messages=({"role": "user", "content": text},), max_tokens=max_tokens)


# -- ResilientBackend without a server ------------------------------------------------------


def test_resilient_retries_transient_failures_only() -> None:
    naps: list[float] = []
    inner = FakeBackend(fail_first=3, error_message="connection error: refused")
    be = ResilientBackend(inner, backoff_s=1.0, max_backoff_s=3.0, max_outage_s=100, sleep=naps.append)
    out = be.generate([chat("a"), chat("b")])
    assert all(r.ok for r in out) and naps == [1.0, 2.0] and be.retries == 2
    # A permanent error (bad request) is returned at once, not retried.
    bad = ResilientBackend(FakeBackend(fail_first=1, error_message="HTTP 400: bad"), sleep=naps.append)
    (r,) = bad.generate([chat("c")])
    assert not r.ok and not is_transient(r) and bad.retries == 0


def test_outage_longer_than_the_limit_raises_and_caches_nothing() -> None:
    dead = OpenAIBackend("m", base_url=f"http://127.0.0.1:{free_port()}/v1", max_retries=0, timeout_s=2)
    be = ResilientBackend(dead, backoff_s=0.05, max_outage_s=0.3)
    llm = CachedLLM(be, CallCache(":memory:"))
    with pytest.raises(BackendOutage, match=r"unavailable for \d+ s \(> max_outage_s=0.3\)"):
        llm.generate([chat("x"), chat("y")], tags=TAGS)
    assert len(llm.cache) == 0 and be.retries >= 2


def test_resilient_is_in_the_registry_with_an_inner_config() -> None:
    be = get_backend("resilient", inner={"name": "fake", "model_id": "fake-llm"}, max_outage_s=5)
    assert isinstance(be, ResilientBackend) and be.model_id == "fake-llm"
    assert be.generate([chat("q")])[0].ok


# -- FaultProxy against a small fake upstream ------------------------------------------------


class _Upstream(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        text = body["messages"][-1]["content"].upper()
        payload = json.dumps(
            {
                "choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 7, "completion_tokens": 1},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def test_fault_proxy_injects_500_drop_and_slow() -> None:
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    try:
        root = f"http://127.0.0.1:{upstream.server_address[1]}"
        with FaultProxy(root, plan=["500", "drop", "slow", "ok"], slow_s=1.0) as proxy:
            be = OpenAIBackend("m", base_url=proxy.url + "/v1", max_retries=3, backoff_s=0.01,
                               timeout_s=0.5, concurrency=1, api_key_env=None)
            (r,) = be.generate([chat("hello")])
            assert r.ok and r.text == "HELLO" and (r.tokens_in, r.tokens_out) == (7, 1)
            assert be.attempts == 4 and proxy.actions == {"500": 1, "drop": 1, "slow": 1, "ok": 1}
            be_short = OpenAIBackend("m", base_url=proxy.url + "/v1", max_retries=1, backoff_s=0.01,
                                     timeout_s=0.5, api_key_env=None)
            (bad,) = be_short.generate([chat("x")])  # 500 then drop: gives up, as an error result
            assert not bad.ok and is_transient(bad)
    finally:
        upstream.shutdown()
        upstream.server_close()


# -- the real server --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server():
    from scale.serving import LocalLlamaServer

    srv = LocalLlamaServer("smollm2-135m", n_parallel=2, n_ctx=512)
    try:
        srv.start()
    except Exception as exc:  # the model package is a core dependency; fail loudly, not skip
        pytest.fail(f"could not start the local llama.cpp server: {exc}")
    yield srv
    srv.stop()


@pytest.mark.slow
def test_real_server_batch_with_exact_token_accounting(server) -> None:
    from modules.backends.gguf_tokenizer import load_gguf_tokenizer
    from modules.models import resolve_model_path

    be = server.backend(timeout_s=120)
    requests_ = [chat(f"Name a colour. {i}") for i in range(4)]
    out = be.generate(requests_)
    assert all(r.ok and r.model_id == "smollm2-135m" for r in out), [r.error for r in out]
    assert all(0 < r.tokens_out <= 4 for r in out)
    tok = load_gguf_tokenizer(str(resolve_model_path("smollm2-135m")))
    assert [r.tokens_in for r in out] == [tok.count_chat([dict(m) for m in q.messages]) for q in requests_]


@pytest.mark.slow
def test_real_server_behind_a_faulty_proxy(server) -> None:
    with FaultProxy(server.root_url, plan=["500", "drop", "ok", "503", "slow", "ok"], slow_s=4.0) as proxy:
        be = OpenAIBackend("smollm2-135m", base_url=proxy.url + "/v1", api_key_env=None, concurrency=1,
                           max_retries=3, backoff_s=0.01, timeout_s=2.0)
        a, b = be.generate([chat("Say yes."), chat("Say no.")])
        assert a.ok and b.ok, (a.error, b.error)
        assert be.attempts == 6 and proxy.actions["drop"] == 1 and proxy.actions["slow"] == 1


@pytest.mark.slow
def test_real_server_outage_pauses_and_resumes(server) -> None:
    be = ResilientBackend(server.backend(max_retries=0, timeout_s=60), backoff_s=0.25, max_outage_s=120)
    llm = CachedLLM(be, CallCache(":memory:"))
    server.stop()
    restarter = threading.Timer(1.0, server.start)
    restarter.start()
    t = time.perf_counter()
    out = llm.generate([chat("Say hi."), chat("Say bye.")], tags=TAGS)
    restarter.join()
    assert all(r.ok for r in out) and be.retries >= 1 and be.outage_s >= 0.25
    assert len(llm.cache) == 2 and time.perf_counter() - t < 120
