"""Benchmark registry: ``get_benchmark("locomo")`` instead of if/else chains."""

from __future__ import annotations

import difflib
import importlib
import inspect
import os
from typing import Any, TypeVar

from benchmarks.base import Benchmark
from common.config_error import ConfigError

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
        ConfigError: For an option the loader does not take (the message lists the ones it does).
    """
    _load_builtins()
    if name not in BENCHMARKS:
        raise KeyError(f"unknown benchmark {name!r}: expected one of {', '.join(sorted(BENCHMARKS))}")
    cls = BENCHMARKS[name]
    params = inspect.signature(cls.__init__).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    named_kinds = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    known = [k for k, p in params.items() if k not in ("self", "data_dir") and p.kind in named_kinds]
    unknown = [k for k in opts if k not in known]
    if unknown and not takes_any:
        close = {k: difflib.get_close_matches(k, known, n=1) for k in unknown}
        named = ", ".join(f"{k!r}" + (f" (did you mean {c[0]!r}?)" if c else "") for k, c in close.items())
        raise ConfigError(
            f"benchmark.options for {name!r}: unknown option {named}; {name!r} takes "
            f"{', '.join(known) or 'no options'}"
        )
    return cls(data_dir=data_dir, **opts)
