"""Hugging Face ``transformers`` backend (CPU/GPU torch), for HF model directories or GGUF files."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from modules.backends.base import BackendError, GenerationRequest, GenerationResult, LLMBackend
from modules.backends.gguf_tokenizer import load_gguf_tokenizer
from modules.backends.prompting import ContextOverflow, completion_prompt, fit_request
from modules.backends.weights import file_sha256
from modules.models import MODELS, get_model_spec, resolve_model_path

log = logging.getLogger(__name__)


class TransformersBackend(LLMBackend):
    """Generate with a ``transformers`` causal LM.

    Args:
        model: Registry key (its GGUF is dequantised), a GGUF file path, or an HF model directory.
        model_id: Id for results and pricing (default: the registry key or the path's name).
        n_ctx: Context window (default: the registry's, else the model config's, capped at 4096).
        chat: Use the chat template (default: the registry's, else whether the tokenizer has one).
        default_stop: Stop strings added to every request (default: the registry's).
        device: Torch device.
        dtype: Torch dtype name for the weights.
        n_threads: If set, ``torch.set_num_threads(n_threads)``.
    """

    def __init__(
        self,
        model: str = "smollm2-135m",
        *,
        model_id: str | None = None,
        n_ctx: int | None = None,
        chat: bool | None = None,
        default_stop: Sequence[str] | None = None,
        device: str = "cpu",
        dtype: str = "float32",
        n_threads: int | None = None,
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if n_threads is not None:
            torch.set_num_threads(n_threads)
        spec = get_model_spec(model) if model in MODELS else None
        path = resolve_model_path(model) if spec else Path(model)
        if not path.exists():
            raise BackendError(
                f"{model!r} is neither a registered model {sorted(MODELS)} nor an existing path"
            )
        load_kw: dict[str, Any] = {"dtype": getattr(torch, dtype)}
        if path.is_file():  # a GGUF: the tokenizer comes from our converted cache
            tok_dir = load_gguf_tokenizer(str(path)).directory
            load_kw["gguf_file"] = path.name
            self.model = _load_model(AutoModelForCausalLM, path.parent, load_kw)
        else:
            tok_dir = path
            self.model = _load_model(AutoModelForCausalLM, path, load_kw)
        self.tokenizer = AutoTokenizer.from_pretrained(str(tok_dir))
        self.model.to(device).eval()
        self.device = device
        self.model_id = model_id or (spec.key if spec else path.stem if path.is_file() else path.name)
        has_template = self.tokenizer.chat_template is not None
        self.chat = (spec.chat if spec else has_template) if chat is None else chat
        if default_stop is None:
            default_stop = spec.default_stop if spec else ()
        self.default_stop = tuple(default_stop)
        config_ctx = int(getattr(self.model.config, "max_position_embeddings", 4096) or 4096)
        self.n_ctx = n_ctx or (spec.n_ctx if spec else min(config_ctx, 4096))
        self._warned_schema = False
        import transformers

        self._numerics = {
            "engine": "transformers",
            "version": str(transformers.__version__),
            "device": device,
            "dtype": dtype,
            # a GGUF by content; an HF directory by its resolved path (its files are the user's)
            "weights": file_sha256(path) if path.is_file() else str(path.resolve()),
        }

    def numerics(self) -> dict[str, str]:
        """Engine, version, device, dtype and the weights (a GGUF's sha256 or the directory)."""
        return dict(self._numerics)

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` without special tokens."""
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _input_ids(self, request: GenerationRequest) -> list[int]:
        if request.messages is not None and self.chat:
            ids = self.tokenizer.apply_chat_template(
                [dict(m) for m in request.messages], add_generation_prompt=True, tokenize=True
            )
            if isinstance(ids, Mapping):  # newer transformers return a BatchEncoding
                return list(ids["input_ids"])
            return list(cast(list[int], ids))  # tokenize=True on one conversation: its token ids
        return list(self.tokenizer(completion_prompt(request))["input_ids"])

    def _error(self, msg: str, start: float) -> GenerationResult:
        return GenerationResult(
            text="", tokens_in=0, tokens_out=0, latency_s=time.perf_counter() - start,
            model_id=self.model_id, finish_reason="error", error=msg,
        )

    def _one(self, request: GenerationRequest) -> GenerationResult:
        import torch

        start = time.perf_counter()
        if request.json_schema is not None and not self._warned_schema:
            log.warning("transformers backend: json_schema is not enforced; generating unconstrained")
            self._warned_schema = True
        try:
            request, n_in, truncated = fit_request(request, self.n_ctx, lambda r: len(self._input_ids(r)))
        except ContextOverflow as exc:
            return self._error(str(exc), start)
        stops = list(dict.fromkeys((*request.stop, *self.default_stop)))
        ids = torch.tensor([self._input_ids(request)], device=self.device)
        gen_kw: dict[str, Any] = {"max_new_tokens": request.max_tokens, "do_sample": request.temperature > 0}
        if request.temperature > 0:
            gen_kw["temperature"] = request.temperature
            torch.manual_seed(request.seed)
        if stops:
            # Our own criterion rather than transformers' ``stop_strings``, which needs a
            # BPE-style vocabulary and fails on some tokenizers.
            gen_kw["stopping_criteria"] = [_StopOnStrings(self.tokenizer, stops, ids.shape[1])]
        pad = self.tokenizer.pad_token_id
        gen_kw["pad_token_id"] = pad if pad is not None else self.tokenizer.eos_token_id
        try:
            with torch.no_grad():
                out = self.model.generate(ids, attention_mask=torch.ones_like(ids), **gen_kw)
        except Exception as exc:  # e.g. out of memory; reported, not raised
            return self._error(f"transformers {type(exc).__name__}: {exc}", start)
        new = out[0, ids.shape[1] :].tolist()
        text = cast(str, self.tokenizer.decode(new, skip_special_tokens=True))  # one sequence: one str
        cut = [text.find(s) for s in stops if s and s in text]
        hit_eos = bool(new) and new[-1] in _eos_ids(self.model, self.tokenizer)
        finish = "stop" if cut or hit_eos or len(new) < request.max_tokens else "length"
        return GenerationResult(
            text=text[: min(cut)] if cut else text,
            tokens_in=n_in,
            tokens_out=len(new),
            latency_s=time.perf_counter() - start,
            model_id=self.model_id,
            finish_reason=finish,
            truncated=truncated,
        )

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """Run the requests one after another (greedy decoding is exact without padding)."""
        return [self._one(r) for r in requests]


class _StopOnStrings:
    """Stop when the decoded continuation contains a stop string (single-sequence batches)."""

    def __init__(self, tokenizer: Any, stops: list[str], prompt_len: int) -> None:
        self.tokenizer, self.stops, self.prompt_len = tokenizer, stops, prompt_len

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        text = self.tokenizer.decode(input_ids[0, self.prompt_len :], skip_special_tokens=True)
        done = any(s in text for s in self.stops)
        return torch.full((input_ids.shape[0],), done, dtype=torch.bool, device=input_ids.device)


def _load_model(auto_cls: Any, directory: Path, kwargs: dict[str, Any]) -> Any:
    try:
        return auto_cls.from_pretrained(str(directory), **kwargs)
    except (ImportError, ValueError) as exc:
        if "accelerate" in str(exc) or "gguf" in str(exc).lower():
            raise BackendError(
                f"loading {directory} needs extra packages: "
                f"pip install 'accelerate>=1.0,<2' 'gguf>=0.17,<0.20' ({exc})"
            ) from exc
        raise


def _eos_ids(model: Any, tokenizer: Any) -> set[int]:
    eos = getattr(model.generation_config, "eos_token_id", None)
    ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    return ids
