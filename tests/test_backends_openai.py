import contextlib
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from modules.backends import get_backend
from modules.backends.base import GenerationRequest
from modules.backends.openai_http import OpenAIBackend


class Script:
    """What the fake server does: a list of actions consumed per request, then 'ok' forever."""

    def __init__(self) -> None:
        self.actions: list[str] = []
        self.bodies: list[dict] = []
        self.headers: list[dict] = []
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0


def make_handler(script: Script) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with script.lock:
                script.bodies.append(body)
                script.headers.append(dict(self.headers))
                action = script.actions.pop(0) if script.actions else "ok"
                script.in_flight += 1
                script.max_in_flight = max(script.max_in_flight, script.in_flight)
            # The request counts as in flight until its reply is ready, not until the reply is
            # written: the client may start its next request as soon as the bytes arrive, before
            # this thread runs again, which made the bound look violated under CPU load.
            try:
                reply = self._reply(action, body)
            finally:
                with script.lock:
                    script.in_flight -= 1
            self._send(*reply)

        def _reply(self, action: str, body: dict) -> tuple[int, dict, dict | None]:
            if action == "stall":
                time.sleep(1.0)
                return 200, {"late": True}, None
            if action == "slow":
                time.sleep(0.2)
            if action.isdigit():
                return int(action), {"error": action}, {"Retry-After": "0"}
            if action == "nousage":
                choice = {"message": {"content": "x"}, "finish_reason": "stop"}
                return 200, {"choices": [choice]}, None
            prompt = body["messages"][-1]["content"] if "messages" in body else body["prompt"]
            choice = (
                {"message": {"role": "assistant", "content": f"echo {prompt}"}} if "messages" in body
                else {"text": f"echo {prompt}"}
            )
            choice["finish_reason"] = "stop"
            usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": 2}
            return 200, {"choices": [choice], "usage": usage}, None

        def _send(self, code: int, obj: dict, headers: dict | None = None) -> None:
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            with contextlib.suppress(BrokenPipeError):  # the client may have timed out
                self.wfile.write(data)

    return Handler


@pytest.fixture
def server() -> Iterator[tuple[str, Script]]:
    script = Script()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(script))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", script
    httpd.shutdown()
    httpd.server_close()


def chat(text: str, **kw) -> GenerationRequest:
    return GenerationRequest(messages=({"role": "user", "content": text},), **kw)


def client(url: str, **kw) -> OpenAIBackend:
    kw = {"backoff_s": 0.01, "timeout_s": 5.0, "api_key_env": None, **kw}
    return get_backend("openai", model="llama-3.1-8b", base_url=url, **kw)  # type: ignore[return-value]


def test_success_usage_and_request_body(server, monkeypatch) -> None:
    url, script = server
    monkeypatch.setenv("MY_KEY", "sekrit")
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    be = client(url, api_key_env="MY_KEY")
    (r,) = be.generate([chat("hello there", max_tokens=7, stop=("\n",), json_schema=schema)])
    assert r.ok and r.text == "echo hello there" and (r.tokens_in, r.tokens_out) == (2, 2)
    assert r.model_id == "llama-3.1-8b" and r.latency_s > 0
    body = script.bodies[0]
    assert body["model"] == "llama-3.1-8b" and body["max_tokens"] == 7 and body["temperature"] == 0.0
    assert body["stop"] == ["\n"] and body["response_format"]["json_schema"]["schema"] == schema
    assert script.headers[0]["Authorization"] == "Bearer sekrit"
    (c,) = be.generate([GenerationRequest(prompt="raw text")])
    assert c.text == "echo raw text" and "prompt" in script.bodies[1]


def test_retries_500s_then_succeeds(server) -> None:
    url, script = server
    script.actions = ["500", "503", "429"]
    be = client(url, max_retries=3)
    (r,) = be.generate([chat("a b")])
    assert r.ok and be.attempts == 4


def test_gives_up_after_max_retries(server) -> None:
    url, script = server
    script.actions = ["500"] * 5
    be = client(url, max_retries=2)
    (r,) = be.generate([chat("a")])
    assert r.finish_reason == "error" and "3 attempts" in (r.error or "") and "HTTP 500" in (r.error or "")
    assert r.text == "" and be.attempts == 3


def test_client_errors_are_not_retried(server) -> None:
    url, script = server
    script.actions = ["400"]
    be = client(url, max_retries=3)
    (r,) = be.generate([chat("a")])
    assert not r.ok and "HTTP 400" in (r.error or "") and be.attempts == 1


def test_stalled_server_times_out_as_error(server) -> None:
    url, script = server
    script.actions = ["stall", "stall"]
    be = client(url, timeout_s=0.2, max_retries=1)
    t0 = time.perf_counter()
    (r,) = be.generate([chat("a")])
    assert not r.ok and "timed out" in (r.error or "") and be.attempts == 2
    assert time.perf_counter() - t0 < 2.0


def test_missing_usage_is_an_error(server) -> None:
    url, script = server
    script.actions = ["nousage"]
    (r,) = client(url).generate([chat("a")])
    assert not r.ok and "usage" in (r.error or "")


def test_connection_refused_is_an_error_result() -> None:
    be = client("http://127.0.0.1:9/v1", max_retries=1)
    (r,) = be.generate([chat("a")])
    assert not r.ok and "connection error" in (r.error or "")


def test_batch_is_concurrent_bounded_and_ordered(server) -> None:
    url, script = server
    script.actions = ["slow"] * 8
    be = client(url, concurrency=3)
    results = be.generate([chat(f"q{i}") for i in range(8)])
    assert [r.text for r in results] == [f"echo q{i}" for i in range(8)]
    assert 1 < script.max_in_flight <= 3
    assert be.count_tokens("abcdefgh") == 2
    with pytest.raises(ValueError):
        OpenAIBackend("m", concurrency=0)
