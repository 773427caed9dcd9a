"""Benchmark registry: ``get_benchmark("locomo")`` instead of if/else chains."""

from __future__ import annotations

import importlib
import os
from typing import Any, TypeVar

from benchmarks.base import Benchmark

B = TypeVar("B", bound=type[Benchmark])

#: name -> Benchmark subclass (filled by :func:`register`).
BENCHMARKS: dict[str, type[Benchmark]] = {}

#: Modules that define the built-in benchmarks (imported on first lookup).
_BUILTIN_MODULES = ("benchmarks.locomo", "benchmarks.longmemeval", "benchmarks.hotpotqa", "benchmarks.custom")


def register(cls: B) -> B:
    """Class decorator adding a :class:`Benchmark` subclass under its ``name``.

    Raises:
        ValueError: If another class already holds the name.
    """
    existing = BENCHMARKS.get(cls.name)
    if existing is not None and existing is not cls:
        raise ValueError(f"benchmark name {cls.name!r} already registered by {existing.__qualname__}")
    BENCHMARKS[cls.name] = cls
    return cls


def _load_builtins() -> None:
    for module in _BUILTIN_MODULES:
        importlib.import_module(module)


def benchmark_names() -> list[str]:
    """Sorted names of all registered benchmarks."""
    _load_builtins()
    return sorted(BENCHMARKS)


def get_benchmark(name: str, data_dir: str | os.PathLike[str] | None = None, **opts: Any) -> Benchmark:
    """Build a benchmark loader by name.

    Args:
        name: ``"locomo"``, ``"longmemeval"`` (the S file), ``"longmemeval_oracle"``, ``"hotpotqa"`` or
            ``"custom"`` (your own data, see :mod:`benchmarks.custom`).
        data_dir: Data directory (default: ``$BUDGET_ROUTER_DATA`` or ``../shared/data``).
        **opts: Loader options (e.g. ``include_adversarial=True`` for LoCoMo, ``file=...`` for
            HotpotQA, ``path=...`` for custom).

    Raises:
        KeyError: For an unknown name (the message lists the known ones).
    """
    _load_builtins()
    if name not in BENCHMARKS:
        raise KeyError(f"unknown benchmark {name!r}: expected one of {', '.join(sorted(BENCHMARKS))}")
    return BENCHMARKS[name](data_dir=data_dir, **opts)
