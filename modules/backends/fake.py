"""A deterministic fake LLM backend for unit tests of the plumbing (never for results)."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from modules.backends.base import GenerationRequest, GenerationResult, LLMBackend

Responder = Callable[[GenerationRequest], str]
FailurePredicate = Callable[[GenerationRequest], bool]


def request_text(request: GenerationRequest) -> str:
    """The prompt text of a request: the raw prompt, or the message contents joined by newlines."""
    if request.prompt is not None:
        return request.prompt
    assert request.messages is not None
    return "\n".join(str(m.get("content", "")) for m in request.messages)


def minimal_instance(schema: dict[str, Any]) -> Any:
    """A small value that satisfies a simple JSON schema (object/array/string/number/enum).

    Used for the fake's default answer to JSON-schema requests so that callers' parsers are
    exercised. Only the common schema keywords are understood; ``required`` properties of
    objects are filled, optional ones are left out.
    """
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return minimal_instance(schema[key][0])
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = kind[0]
    if kind == "object":
        props = schema.get("properties", {})
        return {name: minimal_instance(props.get(name, {})) for name in schema.get("required", [])}
    if kind == "array":
        n = int(schema.get("minItems", 0))
        return [minimal_instance(schema.get("items", {"type": "string"})) for _ in range(n)]
    return {"string": "fake", "integer": 0, "number": 0.0, "boolean": False, "null": None}.get(kind, "fake")


class FakeBackend(LLMBackend):
    """Deterministic stand-in for an LLM.

    Without a ``responder`` the output is ``"fake <8 hex digits of the request fingerprint>"``,
    or a minimal schema-valid JSON document when the request has a ``json_schema``.
    Output is cut at the first stop string and at ``max_tokens`` whitespace tokens.

    Args:
        model_id: Model id reported in results (``"fake-llm"`` has entries in the cost tables).
        responder: Optional function computing the raw output text from the request.
        latency_s: Latency reported for every call.
        sleep: If True, really sleep ``latency_s`` per call (for timing/concurrency tests).
        n_ctx: Context window; prompts longer than ``n_ctx - max_tokens`` come back as errors.
        fail_when: Predicate; matching requests come back as errors (``error_message``).
        fail_first: The first ``fail_first`` calls fail, later ones succeed (retry tests).
        fail_after: Every call after the first ``fail_after`` fails: a backend that dies mid-run
            (``+backend.fail_after=N`` in a fake-stack run; failure-budget tests).
        timeout_s: If set and ``latency_s > timeout_s``, every call comes back as a timeout error.
        error_message: Message used for injected failures.
    """

    def __init__(
        self,
        model_id: str = "fake-llm",
        responder: Responder | None = None,
        *,
        latency_s: float = 0.0,
        sleep: bool = False,
        n_ctx: int = 8192,
        fail_when: FailurePredicate | None = None,
        fail_first: int = 0,
        fail_after: int | None = None,
        timeout_s: float | None = None,
        error_message: str = "injected failure",
    ) -> None:
        if latency_s < 0:
            raise ValueError(f"FakeBackend latency_s must be >= 0, got {latency_s}")
        self.model_id = model_id
        self.n_ctx = n_ctx
        self.responder = responder
        self.latency_s = latency_s
        self.sleep = sleep
        self.fail_when = fail_when
        self.fail_first = fail_first
        self.fail_after = fail_after
        self.timeout_s = timeout_s
        self.error_message = error_message
        self.calls = 0
        self.seen: list[GenerationRequest] = []

    def numerics(self) -> None:
        """None: fake answers are a pure function of the request (keys as before)."""
        return None

    def count_tokens(self, text: str) -> int:
        """Whitespace token count."""
        return len(text.split())

    def _default_text(self, request: GenerationRequest) -> str:
        if request.json_schema is not None:
            return json.dumps(minimal_instance(request.json_schema), sort_keys=True)
        digest = hashlib.sha256(request.fingerprint().encode()).hexdigest()[:8]
        return f"fake {digest}"

    def _one(self, request: GenerationRequest) -> GenerationResult:
        self.calls += 1
        self.seen.append(request)
        if self.sleep and self.latency_s > 0:
            time.sleep(self.latency_s)
        tokens_in = self.count_tokens(request_text(request))

        def error(msg: str) -> GenerationResult:
            return GenerationResult(
                text="", tokens_in=tokens_in, tokens_out=0, latency_s=self.latency_s,
                model_id=self.model_id, finish_reason="error", error=msg,
            )

        dead = self.fail_after is not None and self.calls > self.fail_after
        if dead or self.calls <= self.fail_first or (self.fail_when is not None and self.fail_when(request)):
            return error(self.error_message)
        if self.timeout_s is not None and self.latency_s > self.timeout_s:
            return error(f"timed out after {self.timeout_s:.3g} s")
        if tokens_in > self.n_ctx - request.max_tokens:
            return error(
                f"prompt of {tokens_in} tokens does not fit "
                f"n_ctx={self.n_ctx} - max_tokens={request.max_tokens}"
            )
        raw = self.responder(request) if self.responder is not None else self._default_text(request)
        text, finish = raw, "stop"
        cuts = [text.find(s) for s in request.stop if s and s in text]
        if cuts:
            text = text[: min(cuts)]
        words = text.split()
        if len(words) > request.max_tokens:
            text, finish = " ".join(words[: request.max_tokens]), "length"
        return GenerationResult(
            text=text, tokens_in=tokens_in, tokens_out=self.count_tokens(text),
            latency_s=self.latency_s, model_id=self.model_id, finish_reason=finish,
        )

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """Answer each request in order (see the class docstring for the rules)."""
        return [self._one(r) for r in requests]
