"""The question bank: every question of a split with its retrieved evidence, built once."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.base import Benchmark
from benchmarks.chunking import ChunkingConfig
from benchmarks.memory_builder import MemoryBuildConfig, build_memory, retrieve_evidence
from benchmarks.registry import benchmark_names, get_benchmark
from benchmarks.types import Question, Sample
from common.atomic import atomic_write_json
from common.config_error import ConfigError
from common.datadir import PROJECT_ROOT
from common.provenance import sha256_file
from envs.config_schema import EnvConfig, check_choice, parse
from memory.config import MemoryConfig
from memory.encoder import Encoder
from modules.types import Evidence

#: How a bank's memories are built: the build recipe (chunking, mode, capacities as fractions),
#: an explicit memory config, or None for the defaults. Its class name is part of the cache key.
BankMemoryConfig = MemoryBuildConfig | MemoryConfig | None

#: Bump when the bank's content for the same inputs changes meaning (selection, retrieval).
BANK_VERSION = "bank-v2"  # v2: hybrid BM25 + dense retrieval

#: Environment variable overriding the bank cache directory.
BANK_CACHE_ENV = "BUDGET_ROUTER_BANK_CACHE"


@dataclass(frozen=True)
class QuestionItem:
    """One question and the evidence the memory retrieved for it.

    Attributes:
        question: The benchmark question (gold answer, category, ...).
        sample_id: The sample (history) it belongs to.
        benchmark: Benchmark name (selects the answer prompt and the metric variant).
        evidence: Top-k retrieved chunks, best first.
    """

    question: Question
    sample_id: str
    benchmark: str
    evidence: tuple[Evidence, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (inverse of :meth:`from_dict`)."""
        q = dataclasses.asdict(self.question)
        return {
            "question": q,
            "sample_id": self.sample_id,
            "benchmark": self.benchmark,
            "evidence": [dataclasses.asdict(e) for e in self.evidence],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> QuestionItem:
        """Rebuild an item from :meth:`to_dict` output."""
        q = dict(data["question"])
        q["evidence_ids"] = tuple(q.get("evidence_ids", ()))
        q["extra"] = dict(q.get("extra") or {})
        ev = []
        for e in data["evidence"]:
            e = dict(e)
            e["source_ids"] = tuple(e.get("source_ids", ()))
            ev.append(Evidence(**e))
        return cls(
            question=Question(**q),
            sample_id=str(data["sample_id"]),
            benchmark=str(data["benchmark"]),
            evidence=tuple(ev),
        )


def default_cache_dir() -> Path:
    """``$BUDGET_ROUTER_BANK_CACHE`` or ``<project>/.cache/question_bank``."""
    return Path(os.environ.get(BANK_CACHE_ENV) or PROJECT_ROOT / ".cache" / "question_bank").expanduser()


def select_questions(
    samples: Sequence[Sample], *, limit: int | None, seed: int, max_samples: int | None = None
) -> list[tuple[Sample, Question]]:
    """Pick questions: per-sample seeded shuffle, round-robin across samples, cut at ``limit``.

    Args:
        samples: Samples in data order.
        limit: Maximum number of questions (None = all).
        seed: Seed of the per-sample shuffle.
        max_samples: Keep only the first ``max_samples`` samples (None = all).

    Returns:
        ``(sample, question)`` pairs in bank order.

    Raises:
        ValueError: On a non-positive ``limit`` or ``max_samples``.
    """
    if limit is not None and limit <= 0:
        raise ValueError(f"question bank limit must be > 0 or None, got {limit}")
    if max_samples is not None and max_samples <= 0:
        raise ValueError(f"question bank max_samples must be > 0 or None, got {max_samples}")
    chosen = list(samples[:max_samples] if max_samples is not None else samples)
    queues: list[list[Question]] = []
    for i, sample in enumerate(chosen):
        qs = list(sample.questions)
        # A per-sample RNG keyed by the sample's position keeps the order independent of the other samples.
        random.Random(f"{seed}:{i}:{sample.sample_id}").shuffle(qs)
        queues.append(qs)
    out: list[tuple[Sample, Question]] = []
    depth = 0
    while any(depth < len(q) for q in queues):
        for sample, qs in zip(chosen, queues, strict=True):
            if depth < len(qs):
                out.append((sample, qs[depth]))
                if limit is not None and len(out) >= limit:
                    return out
        depth += 1
    return out


def _memory_config_dict(memory_config: BankMemoryConfig | Mapping[str, Any]) -> dict[str, Any] | None:
    if memory_config is None:
        return None
    if dataclasses.is_dataclass(memory_config) and not isinstance(memory_config, type):
        # The class name is part of the key: a build config and an explicit config differ.
        return {"type": type(memory_config).__name__, **dataclasses.asdict(memory_config)}
    if isinstance(memory_config, Mapping):
        return dict(memory_config)
    raise TypeError(
        f"memory_config must be a MemoryConfig dataclass, a dict or None, got {type(memory_config)}"
    )


def bank_key(
    *,
    benchmark: str,
    benchmark_opts: Mapping[str, Any],
    split: str,
    data_files: Sequence[Path],
    memory_config: BankMemoryConfig | Mapping[str, Any],
    encoder_name: str,
    k: int,
    limit: int | None,
    max_samples: int | None,
    seed: int,
) -> tuple[str, dict[str, Any]]:
    """Return ``(hex key, the dict it hashes)`` identifying a bank's content."""
    ident = {
        "version": BANK_VERSION,
        "benchmark": benchmark,
        "benchmark_opts": dict(sorted(benchmark_opts.items())),
        "split": split,
        "data_sha256": {Path(p).name: sha256_file(p) for p in data_files},
        "memory_config": _memory_config_dict(memory_config),
        "encoder": encoder_name,
        "k": int(k),
        "limit": limit,
        "max_samples": max_samples,
        "seed": int(seed),
    }
    blob = json.dumps(ident, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:24], ident


def build_question_bank(
    benchmark: str,
    split: str,
    *,
    data_dir: str | os.PathLike[str] | None = None,
    encoder: Encoder,
    memory_config: BankMemoryConfig = None,
    k: int = 5,
    limit: int | None = None,
    seed: int = 0,
    max_samples: int | None = None,
    benchmark_opts: Mapping[str, Any] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    use_cache: bool = True,
    progress: bool = True,
) -> list[QuestionItem]:
    """Build (or load from the disk cache) the question bank of one benchmark split.

    Args:
        benchmark: Registered benchmark name (``"locomo"``, ``"longmemeval"``, ``"hotpotqa"``, ...).
        split: ``"train"``, ``"val"``, ``"test"`` or ``"all"``.
        data_dir: Data directory (default: ``$BUDGET_ROUTER_DATA`` or ``../shared/data``).
        encoder: The sentence encoder used for memory and retrieval (normally ``get_encoder("minilm")``).
        memory_config: A ``benchmarks.memory_builder.MemoryBuildConfig`` (chunking, mode and
            capacities as fractions of each history's size), an explicit
            :class:`memory.MemoryConfig` (the same capacities for every history), or None
            (the memory builder's default).
        k: Evidence chunks retrieved per question.
        limit: Maximum number of questions (None = all; order: docs/design/envs.md).
        seed: Seed of the question selection order.
        max_samples: Use only the first ``max_samples`` samples of the split.
        benchmark_opts: Extra loader options passed to ``get_benchmark``.
        cache_dir: Where banks are cached (default :func:`default_cache_dir`).
        use_cache: Read/write the disk cache (False always rebuilds and writes nothing).
        progress: Show a tqdm bar while building memories.

    Returns:
        The bank, in selection order.

    Raises:
        KeyError: Unknown benchmark name.
        ValueError: Bad split, ``k``, ``limit`` or ``max_samples``; or an empty bank.
    """
    if int(k) <= 0:
        raise ValueError(f"question bank k must be > 0, got {k}")
    opts = dict(benchmark_opts or {})
    bench = get_benchmark(benchmark, data_dir=data_dir, **opts)
    key, ident = bank_key(
        benchmark=benchmark,
        benchmark_opts=opts,
        split=split,
        data_files=bench.data_files(),
        memory_config=memory_config,
        encoder_name=str(encoder.name),
        k=k,
        limit=limit,
        max_samples=max_samples,
        seed=seed,
    )
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    path = root / f"{benchmark}-{split}-{key}.json"
    if use_cache:
        cached = _read_bank(path)
        if cached is not None:
            return cached
        from filelock import FileLock

        root.mkdir(parents=True, exist_ok=True)
        # The lock makes a second process wait for the first build instead of duplicating it.
        with FileLock(str(path) + ".lock"):
            cached = _read_bank(path)
            if cached is not None:
                return cached
            items = _build(
                bench, benchmark, split, encoder, memory_config, k, limit, seed, max_samples, progress
            )
            atomic_write_json(path, {"ident": ident, "items": [it.to_dict() for it in items]}, indent=None)
            return items
    return _build(bench, benchmark, split, encoder, memory_config, k, limit, seed, max_samples, progress)


def _read_bank(path: Path) -> list[QuestionItem] | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return [QuestionItem.from_dict(d) for d in data["items"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        # Writes are atomic, so this means a foreign or outdated file: say so, then rebuild.
        import warnings

        warnings.warn(f"ignoring unreadable question bank cache {path}: {exc}", stacklevel=3)
        return None


def _build(
    bench: Benchmark,
    benchmark: str,
    split: str,
    encoder: Encoder,
    memory_config: BankMemoryConfig,
    k: int,
    limit: int | None,
    seed: int,
    max_samples: int | None,
    progress: bool,
) -> list[QuestionItem]:
    from tqdm.auto import tqdm

    samples = bench.load(split)
    picked = select_questions(samples, limit=limit, seed=seed, max_samples=max_samples)
    if not picked:  # a data or config matter, found before any run directory is written
        raise ConfigError(
            f"config: the {split!r} split of benchmark {benchmark!r} has no questions with these settings "
            f"(limit={limit}, question_bank.max_samples={max_samples}); check the data's splits and "
            "benchmark.options"
        )
    by_sample: dict[str, list[int]] = {}
    for i, (sample, _) in enumerate(picked):
        by_sample.setdefault(sample.sample_id, []).append(i)
    samples_by_id = {s.sample_id: s for s in samples}
    items: list[QuestionItem | None] = [None] * len(picked)
    bar = tqdm(
        by_sample.items(), desc=f"question bank {benchmark}/{split}", unit="history", disable=not progress
    )
    for sample_id, idxs in bar:
        # One memory per history, shared by all of its questions.
        if isinstance(memory_config, MemoryBuildConfig):
            memory = build_memory(samples_by_id[sample_id], encoder, build=memory_config)
        else:
            memory = build_memory(samples_by_id[sample_id], encoder, memory_config)
        for i in idxs:
            question = picked[i][1]
            evidence = tuple(retrieve_evidence(memory, question, k))
            items[i] = QuestionItem(
                question=question, sample_id=sample_id, benchmark=benchmark, evidence=evidence
            )
    return [it for it in items if it is not None]


def memory_build_config(memory: Mapping[str, Any]) -> MemoryBuildConfig | None:
    """The config's ``memory`` section as a build config; None when empty (the builder's defaults).

    The section holds :class:`benchmarks.memory_builder.MemoryBuildConfig` fields and an optional
    ``chunking`` dict (:class:`benchmarks.chunking.ChunkingConfig` fields). Capacities are fractions
    of each history's chunk count, so one config fits LoCoMo and LongMemEval histories alike.

    Raises:
        ConfigError: On a field MemoryBuildConfig/ChunkingConfig does not have or a bad value.
    """
    if not memory:
        return None  # None, not MemoryBuildConfig(): the bank cache keys of earlier banks stay
    mem = dict(memory)
    try:
        if mem.get("chunking") is not None:
            mem["chunking"] = ChunkingConfig(**dict(mem["chunking"]))
        return MemoryBuildConfig(**mem)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"config section 'memory': {exc}") from exc


def question_bank_from(
    cfg: Mapping[str, Any], split: str, encoder: Any, *, progress: bool = True
) -> list[QuestionItem]:
    """Build (or load from cache) the question bank a config describes, for ``split``.

    Reads the ``benchmark``, ``memory``, ``question_bank`` and ``data_dir`` keys of ``cfg``
    (:class:`envs.config_schema.EnvConfig`), the same config ``make_components`` is built from.

    Raises:
        ConfigError: On an unknown key, a value of the wrong type or an unknown benchmark.
    """
    env = parse(EnvConfig, cfg)
    check_choice("benchmark.name", env.benchmark.name, tuple(benchmark_names()))
    qb = env.question_bank
    return build_question_bank(
        env.benchmark.name,
        split,
        data_dir=env.data_dir,
        encoder=encoder,
        memory_config=memory_build_config(env.memory),
        k=qb.k,
        limit=qb.limit,
        seed=qb.seed,
        max_samples=qb.max_samples,
        benchmark_opts=env.benchmark.options,
        cache_dir=qb.cache_dir,
        progress=progress,
    )
