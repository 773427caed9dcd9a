"""Replay: a stand-in for an LLM engine that answers only from the call cache.

A table computed on a fast engine (vLLM on a CPU, a native llama.cpp build, a GPU) is committed with its
calls in packs; whoever replays it should not need that engine. With ``cache.replay=true`` every backend
of a run is replaced by a :class:`ReplayBackend`: it builds the same prompts (the same model id, context
window and token counts, so every call has the key it had when it was computed), keys them with the
*recorded* engine's numerics (``cache.replay_numerics``; ``evaluate.py frontier --replay`` reads them from
the table it checks), and never computes: a call the cache lacks stops the run with
:class:`ReplayMiss`, naming the call, instead of being answered by a different engine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from modules.backends.base import BackendError, GenerationRequest, GenerationResult, LLMBackend
from modules.models import MODELS, get_model_spec, resolve_model_path

#: Backends with no engine to load: the replay builds them as configured and only forbids computing.
_LIGHT = frozenset({"fake", "openai"})


class ReplayMiss(BackendError):
    """A replayed run asked for a call that the call cache does not hold."""


class ReplayBackend(LLMBackend):
    """Answers nothing itself; :class:`modules.cache.CachedLLM` serves every call from the cache.

    Args:
        model_id: The recorded engine's model id (a part of every key).
        n_ctx: Its context window (prompts are fitted to it before they are keyed).
        count: Its token counter (module prompts are budgeted in tokens before they are keyed).
        recorded_numerics: The numerics the calls were computed with (None: the reference engine).
        engine: What it stands in for, for messages (``vllm qwen2.5-coder-1.5b``).
    """

    #: :class:`modules.cache.CachedLLM` raises :class:`ReplayMiss` instead of calling :meth:`generate`.
    computes = False

    def __init__(
        self,
        model_id: str,
        n_ctx: int,
        count: Any,
        recorded_numerics: Mapping[str, str] | None,
        engine: str,
    ) -> None:
        self.model_id = model_id
        self.n_ctx = int(n_ctx)
        self._count = count
        self._numerics = dict(recorded_numerics) if recorded_numerics is not None else None
        self.engine = engine

    @classmethod
    def stand_in(
        cls, name: str, spec: Mapping[str, Any], numerics_by_model: Mapping[str, Any]
    ) -> ReplayBackend:
        """The replay stand-in for backend ``name`` built with options ``spec``.

        Args:
            name: The configured backend (``llamacpp``, ``vllm``, ``transformers``, ``openai``, ``fake``,
                ``resilient``).
            spec: Its constructor options.
            numerics_by_model: Recorded numerics per model id (a model missing: the reference engine's).

        Raises:
            BackendError: The backend's prompts cannot be rebuilt without its engine (a model that is
                neither registered nor a light backend).
        """
        from modules.backends import get_backend

        spec = dict(spec)
        if name == "resilient":  # retries change nothing a replay sees: stand in for what it wraps
            inner = dict(spec.get("inner") or {})
            return cls.stand_in(str(inner.pop("name", "")), inner, numerics_by_model)
        if name in _LIGHT:
            backend = get_backend(name, **spec)
            model_id, n_ctx, count = backend.model_id, backend.n_ctx, backend.count_tokens
        else:
            model = str(spec.get("model", ""))
            if model not in MODELS:
                raise BackendError(
                    f"replay: backend {name!r} with model {model!r}: a replay rebuilds prompts with a "
                    f"registered model's tokenizer ({sorted(MODELS)}); run without cache.replay"
                )
            from modules.backends.gguf_tokenizer import load_gguf_tokenizer

            tokenizer = load_gguf_tokenizer(str(resolve_model_path(model)))
            model_id = str(spec.get("model_id") or model)
            n_ctx = int(spec.get("n_ctx") or get_model_spec(model).n_ctx)
            count = tokenizer.count
        return cls(model_id, n_ctx, count, numerics_by_model.get(model_id), f"{name} {model_id}")

    def numerics(self) -> dict[str, str] | None:
        """The recorded engine's numerics, so every key is the one it was stored under."""
        return dict(self._numerics) if self._numerics is not None else None

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` as the recorded engine counted them."""
        return int(self._count(text))

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """Never computes (the cache answers; :class:`modules.cache.CachedLLM` reports a miss)."""
        raise ReplayMiss(f"replay of {self.engine}: {len(requests)} call(s) are not in the call cache")
