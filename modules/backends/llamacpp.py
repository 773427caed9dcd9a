"""llama.cpp backend: the prebuilt ``xllamacpp`` (llama.cpp's server in process) or a native ``llama-server``.

Both engines take the same request bodies (llama.cpp's server API) and return the same replies;
``engine="native"`` runs the server binary compiled for this CPU by ``scripts/build_llamacpp.sh``
(see :mod:`modules.backends.llama_server`), ``engine="xllamacpp"`` the AVX2 wheel in process.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from modules.backends.base import (
    BackendError,
    GenerationRequest,
    GenerationResult,
    LLMBackend,
    PrefixCacheStats,
)
from modules.backends.gguf_tokenizer import load_gguf_tokenizer
from modules.backends.llama_server import LlamaServerProcess
from modules.backends.prompting import ContextOverflow, completion_prompt, fit_request, request_chars
from modules.backends.weights import file_sha256
from modules.models import MODELS, get_model_spec, resolve_model_path

#: The xllamacpp release the committed call packs were computed with (pinned in pyproject.toml): on a
#: registry GGUF it is the reference engine, whose cache keys carry no numerics.
REFERENCE_XLLAMACPP = "2026.10.11549"

# Chat-template tokens plus a default system prompt (SmolLM2 and Qwen add one of about 20
# tokens): the margin used with the byte bound to skip exact tokenisation of short prompts.
_TEMPLATE_MARGIN = 64


class LlamaCppBackend(LLMBackend):
    """Generate with a GGUF model in llama.cpp.

    Args:
        model: Registry key (``"smollm2-135m"``, ``"gemma3-270m"``, ``"qwen2.5-1.5b"``) or a GGUF path.
        model_id: Id reported in results and used for pricing (default: the registry key).
        n_ctx: Context window per request (default: the registry's, else 4096).
        n_threads: CPU threads for prompt processing and generation (1 is best on shared cores).
        n_parallel: Server slots; a batch is sent from this many threads at once.
        chat: Use the chat template (default: the registry's, else True).
        default_stop: Stop strings added to every request (default: the registry's).
        quiet: Silence llama.cpp's logging on stderr.
        engine: ``"xllamacpp"`` (the prebuilt wheel, in process) or ``"native"`` (a ``llama-server``
            process built for this CPU; see ``scripts/build_llamacpp.sh``).
        server_bin: The ``llama-server`` binary for ``engine="native"`` (default: ``$LLAMA_SERVER``,
            else a build of ``scripts/build_llamacpp.sh`` in the model cache).
        server_log: File that receives the native server's log (default: discarded).
        server_args: More ``llama-server`` flags. The default ``--no-repack`` keeps the weights in their
            file layout: on this machine's AVX-512 build that prefilled 2,048 tokens of
            Qwen2.5-Coder-1.5B-Instruct Q4_K_M at 131 tokens/s against 95 with repacking (decode 12 either
            way; llama-bench).
    """

    ENGINES = ("xllamacpp", "native")

    def __init__(
        self,
        model: str = "smollm2-135m",
        *,
        model_id: str | None = None,
        n_ctx: int | None = None,
        n_threads: int = 1,
        n_parallel: int = 1,
        chat: bool | None = None,
        default_stop: Sequence[str] | None = None,
        quiet: bool = True,
        engine: str = "xllamacpp",
        server_bin: str | None = None,
        server_log: str | None = None,
        server_args: Sequence[str] = ("--no-repack",),
    ) -> None:
        if engine not in self.ENGINES:
            raise BackendError(f"llamacpp engine {engine!r} is not one of {self.ENGINES}")
        if n_threads < 1 or n_parallel < 1:
            raise ValueError(f"n_threads and n_parallel must be >= 1, got {n_threads}, {n_parallel}")
        if model in MODELS:
            spec = get_model_spec(model)
            self.model_path = resolve_model_path(model)
            self.model_id = model_id or model
            self.chat = spec.chat if chat is None else chat
            self.default_stop = tuple(spec.default_stop if default_stop is None else default_stop)
            self.n_ctx = n_ctx or spec.n_ctx
        else:
            self.model_path = Path(model)
            if not self.model_path.is_file():
                raise BackendError(
                    f"{model!r} is neither a registered model {sorted(MODELS)} nor a GGUF file"
                )
            self.model_id = model_id or self.model_path.stem
            self.chat = True if chat is None else chat
            self.default_stop = tuple(default_stop or ())
            self.n_ctx = n_ctx or 4096
        self.n_threads = n_threads
        self.n_parallel = n_parallel
        # With several slots the server interleaves requests itself (continuous batching): episodes
        # in flight call it directly, each from its own thread. One slot would only queue them.
        self.concurrent_calls = n_parallel > 1
        self.in_flight = n_parallel  # one question per slot
        self.engine = engine
        self.last_timings: list[dict[str, Any]] = []
        self.prefix_cache = PrefixCacheStats()
        self._registry = model in MODELS
        self._server: Any = None
        self._loop_served = False  # has the in-process server's loop answered a request yet?
        self._native: LlamaServerProcess | None = None
        if engine == "native":
            self._native = LlamaServerProcess(
                self.model_path, n_ctx=self.n_ctx * n_parallel, n_parallel=n_parallel, n_threads=n_threads,
                binary=server_bin, log_path=Path(server_log) if server_log else None,
                extra_args=tuple(server_args),
            )  # fmt: skip
            # The flags change the kernels, so they are part of the numerics.
            self._build = " ".join((self._native.build, *server_args))
            return
        try:
            import xllamacpp as xlc
        except ImportError as exc:  # pragma: no cover - xllamacpp is a core dependency
            raise BackendError(
                "the llamacpp backend needs xllamacpp: pip install xllamacpp==2026.10.11549"
            ) from exc
        params = xlc.CommonParams()
        params.model.path = str(self.model_path)
        # llama.cpp splits n_ctx evenly over the slots, so give each slot a full window.
        params.n_ctx = self.n_ctx * n_parallel
        params.n_parallel = n_parallel
        params.cpuparams.n_threads = n_threads
        params.cpuparams_batch.n_threads = n_threads
        if quiet:
            params.verbosity = -1
        self._server = xlc.Server(params)
        self._build = str(getattr(xlc, "__version__", "unknown"))

    def numerics(self) -> dict[str, str] | None:
        """None for the reference (pinned xllamacpp, registry GGUF); else engine, build, weights' sha256."""
        if self.engine == "xllamacpp" and self._registry and self._build == REFERENCE_XLLAMACPP:
            return None
        return {"engine": self.engine, "build": self._build, "weights_sha256": file_sha256(self.model_path)}

    # -- tokens ---------------------------------------------------------------------------

    @property
    def tokenizer(self) -> Any:
        """The model's tokenizer, rebuilt from the GGUF (loaded on first use, then cached)."""
        return load_gguf_tokenizer(str(self.model_path))

    def count_tokens(self, text: str) -> int:
        """Exact number of tokens of ``text`` (without special tokens)."""
        return self.tokenizer.count(text)

    def prompt_tokens(self, request: GenerationRequest) -> int:
        """Prompt tokens of a request as llama.cpp will see it (chat template included)."""
        if request.messages is not None and self.chat:
            return self.tokenizer.count_chat([dict(m) for m in request.messages])
        return self.tokenizer.count_prompt(completion_prompt(request))

    def _fit(self, request: GenerationRequest) -> tuple[GenerationRequest, bool]:
        n_msgs = len(request.messages or ())
        # Cheap upper bound first: most prompts are far below the window and need no tokenizer.
        if request_chars(request) + _TEMPLATE_MARGIN + 8 * n_msgs <= self.n_ctx - request.max_tokens:
            return request, False
        fitted, _, truncated = fit_request(request, self.n_ctx, self.prompt_tokens)
        return fitted, truncated

    # -- generation -----------------------------------------------------------------------

    def _payload(self, request: GenerationRequest) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "seed": request.seed,
            "stop": list(dict.fromkeys((*request.stop, *self.default_stop))),
            "cache_prompt": True,
        }
        if request.messages is not None and self.chat:
            body["messages"] = [dict(m) for m in request.messages]
            if request.json_schema is not None:
                body["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": "output", "schema": request.json_schema, "strict": True},
                }
            return "chat", body
        body["prompt"] = completion_prompt(request)
        if request.json_schema is not None:
            body["json_schema"] = request.json_schema
        return "completion", body

    def _error(self, msg: str, start: float, tokens_in: int = 0) -> GenerationResult:
        return GenerationResult(
            text="", tokens_in=tokens_in, tokens_out=0, latency_s=time.perf_counter() - start,
            model_id=self.model_id, finish_reason="error", error=msg,
        )

    def _one(self, request: GenerationRequest) -> GenerationResult:
        start = time.perf_counter()
        try:
            request, truncated = self._fit(request)
        except ContextOverflow as exc:
            return self._error(str(exc), start)
        kind, body = self._payload(request)
        try:
            if self._native is not None:
                path = "/v1/chat/completions" if kind == "chat" else "/v1/completions"
                reply = self._native.post(path, body)
            else:
                srv = self._server
                reply = srv.handle_chat_completions(body) if kind == "chat" else srv.handle_completions(body)
        except Exception as exc:  # llama.cpp raises on malformed schemas and the like
            return self._error(f"llama.cpp {type(exc).__name__}: {exc}", start)
        latency = time.perf_counter() - start
        if not isinstance(reply, dict) or "error" in reply or not reply.get("choices"):
            err = reply.get("error", reply) if isinstance(reply, dict) else reply
            return self._error(f"llama.cpp error: {err}", start)
        self._loop_served = True
        choice = reply["choices"][0]
        text = (choice["message"].get("content") or "") if kind == "chat" else (choice.get("text") or "")
        usage = reply.get("usage", {})
        timings = reply.get("timings", {})
        self.last_timings.append(timings)
        if isinstance(timings, dict) and "prompt_n" in timings and self.prefix_cache is not None:
            # prompt_n: tokens computed; cache_n: tokens the slot's KV cache already held
            cached = int(timings.get("cache_n", 0) or 0)
            self.prefix_cache.add(int(timings["prompt_n"]) + cached, cached)
        return GenerationResult(
            text=text,
            tokens_in=int(usage.get("prompt_tokens", 0)),
            tokens_out=int(usage.get("completion_tokens", 0)),
            latency_s=latency,
            model_id=self.model_id,
            finish_reason="length" if choice.get("finish_reason") == "length" else "stop",
            truncated=truncated,
        )

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """Run the requests (concurrently over the server's slots when ``n_parallel > 1``)."""
        self.last_timings = []
        if self.n_parallel == 1 or len(requests) <= 1:
            return [self._one(r) for r in requests]
        with ThreadPoolExecutor(max_workers=self.n_parallel) as pool:
            return list(pool.map(self._one, requests))

    def close(self) -> None:
        """Drop the in-process server (freed once garbage-collected) or stop the native process."""
        if self._server is not None and not self._loop_served:
            # xllamacpp's Server returns from its constructor before its loop thread has entered the
            # request loop; a stop sent in that window is lost and the destructor joins a loop that
            # never ends (seen as a hung close right after construction on a loaded 2-core machine).
            # A one-token request is answered only by a running loop, so after it the stop lands.
            with contextlib.suppress(Exception):
                self._server.handle_completions({"prompt": " ", "max_tokens": 1, "temperature": 0.0})
        self._server = None
        if self._native is not None:
            self._native.close()
