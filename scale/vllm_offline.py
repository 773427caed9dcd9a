"""vLLM offline engine backend (GPU): real batching of a whole request list in one call.

vLLM is an optional extra (``pip install 'budget-router[vllm]'``) imported only when this
backend is built. Prompts are tokenised here with the engine's own tokenizer (chat template
for chat models, the shared truncation rule for long prompts) and handed to ``LLM.generate``
as ``{"prompt_token_ids": ...}``, so the template is applied exactly once and no second BOS
is added. JSON schemas use ``StructuredOutputsParams(json=...)`` (vLLM >= 0.10.2) or, on
older versions, ``GuidedDecodingParams(json=...)``.

The reported latency of each request is the batch's wall time divided by the batch size
(its amortised share), since one ``generate`` call serves them all.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from modules.backends.base import BackendError, GenerationRequest, GenerationResult, LLMBackend
from modules.backends.gguf_tokenizer import load_gguf_tokenizer
from modules.backends.prompting import ContextOverflow, completion_prompt, fit_request
from modules.models import MODELS, get_model_spec, resolve_model_path


def _vllm_api() -> tuple[Any, Any, Any]:
    """Import vLLM lazily: returns ``(LLM, SamplingParams, make_schema_kwargs)``."""
    try:
        import vllm
    except ImportError as exc:
        raise BackendError(
            "the vllm backend needs vLLM (a CUDA machine): pip install 'budget-router[vllm]' (or 'vllm>=0.6')"
        ) from exc
    from vllm import sampling_params as sp

    if hasattr(sp, "StructuredOutputsParams"):

        def schema_kwargs(schema: dict[str, Any]) -> dict[str, Any]:
            return {"structured_outputs": sp.StructuredOutputsParams(json=schema)}
    elif hasattr(sp, "GuidedDecodingParams"):

        def schema_kwargs(schema: dict[str, Any]) -> dict[str, Any]:
            return {"guided_decoding": sp.GuidedDecodingParams(json=schema)}
    else:  # pragma: no cover - very old vLLM

        def schema_kwargs(schema: dict[str, Any]) -> dict[str, Any]:
            raise BackendError(f"vLLM {getattr(vllm, '__version__', '?')} has no structured-output support")

    return vllm.LLM, vllm.SamplingParams, schema_kwargs


class VLLMBackend(LLMBackend):
    """Generate with vLLM's offline ``LLM`` engine.

    Args:
        model: Registry key (its GGUF, with our converted tokenizer), a GGUF path, or an HF
            model directory / name available locally.
        model_id: Id for results and pricing (default: the registry key or the model's name).
        n_ctx: Context window (``max_model_len``); default: the registry's, else 4096.
        chat: Use the chat template (default: the registry's, else True).
        default_stop: Stop strings added to every request (default: the registry's).
        engine: A ready engine (for tests or sharing); otherwise one is built.
        **engine_kwargs: Passed to ``vllm.LLM`` (``gpu_memory_utilization``,
            ``tensor_parallel_size``, ``dtype``, ...).
    """

    def __init__(
        self,
        model: str = "smollm2-135m",
        *,
        model_id: str | None = None,
        n_ctx: int | None = None,
        chat: bool | None = None,
        default_stop: Sequence[str] | None = None,
        engine: Any = None,
        **engine_kwargs: Any,
    ) -> None:
        llm_cls, self._sampling_cls, self._schema_kwargs = _vllm_api()
        spec = get_model_spec(model) if model in MODELS else None
        default_id = spec.key if spec else (Path(model).stem if model.endswith(".gguf") else model)
        self.model_id = model_id or default_id
        self.n_ctx = n_ctx or (spec.n_ctx if spec else 4096)
        self.chat = (spec.chat if spec else True) if chat is None else chat
        if default_stop is None:
            default_stop = spec.default_stop if spec else ()
        self.default_stop = tuple(default_stop)
        if engine is None:
            path = str(resolve_model_path(model)) if spec else model
            kwargs: dict[str, Any] = {"max_model_len": self.n_ctx, "seed": 0, **engine_kwargs}
            if path.endswith(".gguf"):
                # vLLM reads GGUF weights but wants an HF tokenizer: use our converted one.
                kwargs.setdefault("tokenizer", str(load_gguf_tokenizer(path).directory))
            engine = llm_cls(model=path, **kwargs)
        self.engine = engine
        self.tokenizer = engine.get_tokenizer()

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` without special tokens."""
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def prompt_ids(self, request: GenerationRequest) -> list[int]:
        """Prompt token ids exactly as sent to the engine."""
        if request.messages is not None and self.chat:
            ids = self.tokenizer.apply_chat_template(
                [dict(m) for m in request.messages], add_generation_prompt=True, tokenize=True
            )
            return list(ids["input_ids"] if hasattr(ids, "keys") else ids)
        return list(self.tokenizer.encode(completion_prompt(request)))

    def sampling_params(self, request: GenerationRequest) -> Any:
        """The ``SamplingParams`` of one request."""
        kwargs: dict[str, Any] = {
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "seed": request.seed,
            "stop": list(dict.fromkeys((*request.stop, *self.default_stop))) or None,
        }
        if request.json_schema is not None:
            kwargs.update(self._schema_kwargs(request.json_schema))
        return self._sampling_cls(**kwargs)

    @staticmethod
    def _error(model_id: str, msg: str, latency: float = 0.0) -> GenerationResult:
        return GenerationResult(
            text="", tokens_in=0, tokens_out=0, latency_s=latency, model_id=model_id,
            finish_reason="error", error=msg,
        )

    def _run(self, prompts: list[dict[str, Any]], params: list[Any]) -> list[Any]:
        return list(self.engine.generate(prompts, params, use_tqdm=False))

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """Translate the batch, run it in one ``LLM.generate`` call and translate the outputs back."""
        results: list[GenerationResult | None] = [None] * len(requests)
        prompts: list[dict[str, Any]] = []
        params: list[Any] = []
        slots: list[tuple[int, bool]] = []
        for i, request in enumerate(requests):
            try:
                fitted, _, truncated = fit_request(request, self.n_ctx, lambda r: len(self.prompt_ids(r)))
                params.append(self.sampling_params(fitted))
            except (ContextOverflow, BackendError, ValueError, TypeError) as exc:
                results[i] = self._error(self.model_id, f"{type(exc).__name__}: {exc}")
                continue
            prompts.append({"prompt_token_ids": self.prompt_ids(fitted)})
            slots.append((i, truncated))
        if prompts:
            start = time.perf_counter()
            try:
                outputs = self._run(prompts, params)
            except Exception as exc:  # one bad request fails the batch: isolate it
                outputs = []
                for p, sp_ in zip(prompts, params, strict=True):
                    try:
                        outputs.extend(self._run([p], [sp_]))
                    except Exception as one_exc:
                        outputs.append(f"vLLM {type(one_exc).__name__}: {one_exc} (batch error: {exc})")
            share = (time.perf_counter() - start) / len(prompts)
            for (i, truncated), out in zip(slots, outputs, strict=True):
                results[i] = self._translate(out, share, truncated)
        assert all(r is not None for r in results)
        return [r for r in results if r is not None]

    def _translate(self, out: Any, latency: float, truncated: bool) -> GenerationResult:
        if isinstance(out, str):
            return self._error(self.model_id, out, latency)
        if not out.outputs:
            return self._error(self.model_id, "vLLM returned no completion", latency)
        best = out.outputs[0]
        return GenerationResult(
            text=best.text,
            tokens_in=len(out.prompt_token_ids or ()),
            tokens_out=len(best.token_ids),
            latency_s=latency,
            model_id=self.model_id,
            finish_reason="length" if best.finish_reason == "length" else "stop",
            truncated=truncated,
        )
