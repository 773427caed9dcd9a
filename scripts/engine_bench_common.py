"""What every engine measurement of ``scripts/bench_engines.py`` shares: the engines compared, the measured
workload's config, the JSONL records a stopped run resumes from, and the paired interval of two engines'
F1."""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def engine_specs(model: str, threads: int) -> dict[str, dict[str, Any]]:
    """Backend configs of the engines compared (``--engines`` picks among them)."""
    return {
        "xllamacpp": {"name": "llamacpp", "model": model, "n_threads": threads},
        "native": {"name": "llamacpp", "engine": "native", "model": model, "n_threads": threads},
        "vllm-fp32": {"name": "vllm", "model": model, "dtype": "float32"},
        "vllm-bf16": {"name": "vllm", "model": model, "dtype": "bfloat16"},
        "vllm-int8": {"name": "vllm", "model": model, "dtype": "bfloat16", "int8_weights": True},
        "transformers-fp32": {
            "name": "transformers",
            "model": model,
            "dtype": "float32",
            "n_threads": threads,
        },
        "transformers-bf16": {
            "name": "transformers",
            "model": model,
            "dtype": "bfloat16",
            "n_threads": threads,
        },
    }


def engine_config(base: dict[str, Any], spec: dict[str, Any], cache: Path) -> dict[str, Any]:
    import copy

    cfg = copy.deepcopy(base)
    model = spec["model"]
    small = {k: v for k, v in spec.items() if k != "model"}
    # Every LLM role on this engine: SmolLM2 stays the base model (cpu_quality does not use it at
    # all-HIGH), the HIGH tiers and the answerer run the measured model.
    cfg["backend"] = {**small, "model": "smollm2-135m"}
    cfg["llms"] = {"high": {**small, "model": model}}
    cfg["answer"] = {**cfg.get("answer", {}), "backend": {**small, "model": model}}
    cfg["cache"] = {"path": str(cache), "pack": "none"}
    return cfg


def quality_config(args: argparse.Namespace) -> dict[str, Any]:
    """The ``cpu_quality`` config of ``--benchmark`` with the ``--set`` overrides (the measured workload)."""
    from evaluation.frontier_config import resolve_config

    ns = argparse.Namespace(
        experiment="cpu_quality", config=None, set=list(args.set), benchmark=args.benchmark
    )
    return resolve_config(ns, [])


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise SystemExit(f"{path}:{n}: not JSON ({exc.msg}); remove that line to resume") from exc
    return rows


def append_jsonl(path: Path, row: dict[str, Any]) -> None:
    # One line per write, flushed and synced: a kill loses at most the record being written.
    with open(path, "a") as fh:
        fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def paired_ci(diffs: Sequence[float], n_boot: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    rng = random.Random(seed)
    means = sorted(statistics.fmean(rng.choices(diffs, k=len(diffs))) for _ in range(n_boot))
    return statistics.fmean(diffs), means[int(0.025 * n_boot)], means[int(0.975 * n_boot) - 1]
