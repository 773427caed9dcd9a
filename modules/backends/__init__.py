"""LLM backends behind one interface, created by name."""

from __future__ import annotations

import importlib
from typing import Any

from modules.backends.base import BackendError, GenerationRequest, GenerationResult, LLMBackend

#: name -> ``"module:Class"`` (imported on first use: an engine's imports cost only its users) or the class.
BACKENDS: dict[str, str | type[LLMBackend]] = {
    "llamacpp": "modules.backends.llamacpp:LlamaCppBackend",
    "transformers": "modules.backends.hf:TransformersBackend",
    "vllm": "scale.vllm_offline:VLLMBackend",
    "openai": "modules.backends.openai_http:OpenAIBackend",
    "fake": "modules.backends.fake:FakeBackend",
    # vllm and resilient (wraps ``inner``, retries through outages) are optional scale paths in scale/
    "resilient": "scale.resilient:ResilientBackend",
}


def backend_class(name: str) -> type[LLMBackend]:
    """Import and return the backend class registered under ``name``.

    Raises:
        KeyError: ``name`` is not a registered backend.
    """
    if name not in BACKENDS:
        raise KeyError(f"unknown LLM backend {name!r}; choose one of {sorted(BACKENDS)}")
    entry = BACKENDS[name]
    if isinstance(entry, type):
        return entry
    module_name, cls_name = entry.split(":")
    return getattr(importlib.import_module(module_name), cls_name)


def get_backend(name: str, **kwargs: Any) -> LLMBackend:
    """Create the backend registered under ``name`` with ``kwargs`` passed to its constructor.

    Args:
        name: One of ``"llamacpp"``, ``"transformers"``, ``"vllm"``, ``"openai"``, ``"fake"``.
        **kwargs: Constructor arguments of that backend (e.g. ``model="smollm2-135m"``).

    Returns:
        The backend instance.
    """
    return backend_class(name)(**kwargs)


__all__ = [
    "BACKENDS",
    "BackendError",
    "GenerationRequest",
    "GenerationResult",
    "LLMBackend",
    "backend_class",
    "get_backend",
]
