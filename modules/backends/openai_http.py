"""Client for OpenAI-compatible HTTP endpoints (OpenAI, vLLM/llama.cpp servers, hosted APIs)."""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import requests
from requests.adapters import HTTPAdapter

from modules.backends.base import GenerationRequest, GenerationResult, LLMBackend

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


class OpenAIBackend(LLMBackend):
    """Generate through ``POST {base_url}/chat/completions`` (or ``/completions`` for raw prompts).

    Args:
        model: Model name sent to the server.
        base_url: Endpoint root, e.g. ``"http://127.0.0.1:8000/v1"``.
        api_key_env: Name of the environment variable holding the API key; if that variable
            is unset no ``Authorization`` header is sent (fine for local servers).
        api_key: The key itself (takes precedence over ``api_key_env``); runs redact it from
            everything they write (``common.redact``), but an environment variable is safer.
        model_id: Id for results and pricing (default: ``model``).
        n_ctx: The model's context window (informational; the server enforces it).
        timeout_s: Per-attempt timeout (connect and read) in seconds.
        max_retries: Retries after the first attempt.
        backoff_s: First backoff delay; doubles each retry.
        max_backoff_s: Backoff cap.
        concurrency: Maximum requests in flight for one batch.
        token_counter: Optional exact token counter for ``count_tokens``.
        session: Optional ``requests.Session`` (for connection pooling or tests).
        numerics: What the server runs (e.g. ``"vllm-0.32 fp32"``), part of every call's cache key:
            declare it when one model name is served by different engines or dtypes.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "http://127.0.0.1:8000/v1",
        api_key_env: str | None = "OPENAI_API_KEY",
        api_key: str | None = None,
        model_id: str | None = None,
        n_ctx: int = 8192,
        timeout_s: float = 60.0,
        max_retries: int = 4,
        backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
        concurrency: int = 8,
        token_counter: Callable[[str], int] | None = None,
        session: requests.Session | None = None,
        numerics: str | None = None,
    ) -> None:
        if timeout_s <= 0 or max_retries < 0 or concurrency < 1:
            raise ValueError(
                "need timeout_s > 0, max_retries >= 0, concurrency >= 1; "
                f"got {timeout_s}, {max_retries}, {concurrency}"
            )
        self.model = model
        self.model_id = model_id or model
        self.base_url = base_url.rstrip("/")
        self.n_ctx = n_ctx
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.concurrency = concurrency
        # The server batches; each episode's requests go to it as they come (at most `concurrency`
        # at once per generate call, and one call per episode in flight).
        self.concurrent_calls = True
        self.in_flight = concurrency  # as many questions as requests it keeps in flight
        self.token_counter = token_counter
        if session is None:
            session = requests.Session()
            # One kept-alive connection per request in flight: urllib3's default pool of 10 would
            # open and drop a connection per call once more episodes than that are in flight.
            adapter = HTTPAdapter(pool_connections=4, pool_maxsize=max(64, concurrency))
            session.mount("http://", adapter)
            session.mount("https://", adapter)
        self.session = session
        key = api_key or (os.environ.get(api_key_env) if api_key_env else None)
        self._headers = {"Content-Type": "application/json"}
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        self.attempts = 0  # total HTTP attempts made (for tests and logs)
        self._numerics = {"engine": "openai-http", "served": numerics or "undeclared"}

    def numerics(self) -> dict[str, str]:
        """The HTTP engine and what the server declares it runs (``numerics=``)."""
        return dict(self._numerics)

    def count_tokens(self, text: str) -> int:
        """Token count: exact with ``token_counter``, else an estimate of UTF-8 bytes / 4."""
        if self.token_counter is not None:
            return self.token_counter(text)
        return math.ceil(len(text.encode()) / 4)

    def _body(self, request: GenerationRequest) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "seed": request.seed,
        }
        if request.stop:
            body["stop"] = list(request.stop)
        if request.json_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": request.json_schema, "strict": True},
            }
        if request.messages is not None:
            body["messages"] = [dict(m) for m in request.messages]
            return "/chat/completions", body
        body["prompt"] = request.prompt
        return "/completions", body

    def _delay(self, attempt: int, response: requests.Response | None) -> float:
        delay = self.backoff_s * (2**attempt)
        if response is not None and response.headers.get("Retry-After"):
            # An HTTP-date Retry-After is not parsed; the exponential delay stays.
            with contextlib.suppress(ValueError):
                delay = float(response.headers["Retry-After"])
        return min(max(delay, 0.0), self.max_backoff_s)

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST with retries; returns the JSON reply or raises RuntimeError with the last failure."""
        last = "no attempt made"
        for attempt in range(self.max_retries + 1):
            response: requests.Response | None = None
            self.attempts += 1
            try:
                response = self.session.post(
                    self.base_url + path, json=body, headers=self._headers, timeout=self.timeout_s
                )
            except requests.Timeout:
                last = f"timed out after {self.timeout_s:g} s"
            except requests.ConnectionError as exc:
                last = f"connection error: {exc}"
            else:
                if response.status_code == 200:
                    try:
                        return response.json()
                    except ValueError as exc:
                        raise RuntimeError(f"server returned invalid JSON: {response.text[:200]!r}") from exc
                last = f"HTTP {response.status_code}: {response.text[:300]}"
                if response.status_code not in RETRY_STATUS:
                    raise RuntimeError(last)
            if attempt < self.max_retries:
                time.sleep(self._delay(attempt, response))
        raise RuntimeError(f"gave up after {self.max_retries + 1} attempts; last: {last}")

    def _one(self, request: GenerationRequest) -> GenerationResult:
        start = time.perf_counter()
        path, body = self._body(request)
        try:
            text, tokens_in, tokens_out, finish = parse_reply(self._post(path, body))
            return GenerationResult(
                text=text,
                tokens_in=tokens_in,
                tokens_out=tokens_out,
                latency_s=time.perf_counter() - start,
                model_id=self.model_id,
                finish_reason=finish,
            )
        except (RuntimeError, KeyError, IndexError, TypeError, ValueError) as exc:
            return GenerationResult(
                text="", tokens_in=0, tokens_out=0, latency_s=time.perf_counter() - start,
                model_id=self.model_id, finish_reason="error", error=f"{self.base_url}{path}: {exc}",
            )

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """Send the batch with at most ``concurrency`` requests in flight; results keep input order."""
        if len(requests) <= 1 or self.concurrency == 1:
            return [self._one(r) for r in requests]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(requests))) as pool:
            return list(pool.map(self._one, requests))

    def close(self) -> None:
        """Close the HTTP session."""
        self.session.close()


def _content_text(content: Any) -> str:
    """A message's content as text: a string, or the OpenAI content-parts form joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(part, Mapping) for part in content):
        texts = [part.get("text") for part in content if part.get("type", "text") == "text"]
        if all(isinstance(x, str) for x in texts):
            return "".join(texts)
    raise ValueError(f"message content must be a string or a list of text parts, got {content!r:.120}")


def _token_count(usage: Mapping[str, Any], name: str, default: int | None = None) -> int:
    value = usage.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"usage.{name} must be an integer >= 0, got {value!r}")
    return value


def parse_reply(reply: Any) -> tuple[str, int, int, str]:
    """``(text, prompt tokens, completion tokens, finish reason)`` of an OpenAI-style completion reply.

    A reply the server sent with HTTP 200 can still be unusable; each case is an error here, so the
    call is a counted failure and never cached: a reply that is not an object or has no choices, a
    choice or message of the wrong type, content that is null or empty (``finish_reason`` says why, e.g.
    ``content_filter``), a content filter's refusal, token counts that are missing, not integers or
    negative.

    Raises:
        ValueError: Naming the field and the value.
    """
    if not isinstance(reply, Mapping):
        raise ValueError(f"reply must be a JSON object, got {type(reply).__name__}")
    choices = reply.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise ValueError(f"reply.choices must be a non-empty list of objects, got {choices!r:.120}")
    choice = choices[0]
    finish = choice.get("finish_reason")
    if finish == "content_filter":
        raise ValueError("the server's content filter withheld the answer (finish_reason 'content_filter')")
    if "message" in choice:
        message = choice["message"]
        if not isinstance(message, Mapping):
            raise ValueError(f"choices[0].message must be an object, got {message!r:.120}")
        content = message.get("content")
    else:
        content = choice.get("text")
    if content is None:
        raise ValueError(f"the reply has no content (finish_reason {finish!r})")
    text = _content_text(content)
    if not text:
        raise ValueError(f"the reply's content is empty (finish_reason {finish!r})")
    usage = reply.get("usage")
    if not isinstance(usage, Mapping) or "prompt_tokens" not in usage:
        raise ValueError("reply has no 'usage' token counts, so the call's cost cannot be metered")
    return text, _token_count(usage, "prompt_tokens"), _token_count(usage, "completion_tokens", 0), (
        "length" if finish == "length" else "stop"
    )
