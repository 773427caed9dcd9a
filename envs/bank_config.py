"""The question bank a config describes: the ``memory`` and ``question_bank`` sections.

:func:`question_bank_from` is how training, evaluation and the benchmark scripts build (or load
from the on-disk cache, see :mod:`envs.question_bank`) the bank of one split from the same
config dict that :func:`envs.components.make_components` reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from benchmarks.chunking import ChunkingConfig
from benchmarks.memory_builder import MemoryBuildConfig
from envs.components import BENCHMARK_NAMES, ConfigError, named_section, section


def memory_config_from(cfg: Mapping[str, Any]) -> Any:
    """Build a ``benchmarks.memory_builder.MemoryBuildConfig`` from the ``memory`` section.

    The section holds MemoryBuildConfig fields (``mode``, ``l1_fraction``, ``l2_fraction``,
    ``min_l1``, ``entity_patterns``, ``encode_batch_size``, ``gate_threshold``) and an optional
    ``chunking`` sub-dict (``max_tokens``, ``granularity``). Capacities are fractions of each
    history's chunk count, so one config fits LoCoMo and LongMemEval histories alike.

    Returns:
        The build config, or None when the section is empty (the builder's defaults).

    Raises:
        ConfigError: On a field MemoryBuildConfig/ChunkingConfig does not have or a bad value.
    """
    mem = section(cfg, "memory")
    if not mem:
        return None

    try:
        chunking = mem.pop("chunking", None)
        if chunking is not None:
            mem["chunking"] = ChunkingConfig(**dict(chunking))
        return MemoryBuildConfig(**mem)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"config section 'memory': {exc}") from exc


def question_bank_from(
    cfg: Mapping[str, Any], split: str, encoder: Any, *, progress: bool = True
) -> list[Any]:
    """Build (or load from cache) the question bank a config describes, for ``split``."""
    from envs.question_bank import build_question_bank

    bench, extra = named_section(cfg, "benchmark", BENCHMARK_NAMES)
    qb = section(cfg, "question_bank")
    return build_question_bank(
        bench,
        split,
        data_dir=cfg.get("data_dir"),
        encoder=encoder,
        memory_config=memory_config_from(cfg),
        k=int(qb.get("k", 5)),
        limit=qb.get("limit"),
        seed=int(qb.get("seed", 0)),
        max_samples=qb.get("max_samples"),
        benchmark_opts=dict(extra.get("options") or {}),
        cache_dir=qb.get("cache_dir"),
        progress=progress,
    )
