"""HTM-EAR hierarchical memory: two HNSW levels, importance-aware eviction, gated hybrid retrieval."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: public name -> submodule that defines it.
_EXPORTS: dict[str, str] = {
    name: module
    for module, names in {
        "memory.encoder": ("Encoder", "get_encoder", "register_encoder", "HashingEncoder", "MiniLMEncoder"),
        "memory.config": ("MemoryConfig", "MODES"),
        "memory.hierarchical": ("HierarchicalMemory", "RetrievedItem"),
        "memory.persistence": ("MemoryLoadError",),
        "memory.entities": ("EntityExtractor", "PATTERN_SETS"),
        "memory.rerank": ("get_reranker", "Reranker"),
        "memory.calibration": ("calibrate_gate_threshold",),
    }.items()
    for name in names
}

__all__ = [
    "MODES",
    "PATTERN_SETS",
    "Encoder",
    "EntityExtractor",
    "HashingEncoder",
    "HierarchicalMemory",
    "MemoryConfig",
    "MemoryLoadError",
    "MiniLMEncoder",
    "Reranker",
    "RetrievedItem",
    "calibrate_gate_threshold",
    "get_encoder",
    "get_reranker",
    "register_encoder",
]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from memory.calibration import calibrate_gate_threshold
    from memory.config import MODES, MemoryConfig
    from memory.encoder import Encoder, HashingEncoder, MiniLMEncoder, get_encoder, register_encoder
    from memory.entities import PATTERN_SETS, EntityExtractor
    from memory.hierarchical import HierarchicalMemory, RetrievedItem
    from memory.persistence import MemoryLoadError
    from memory.rerank import Reranker, get_reranker


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'memory' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # cache: later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
