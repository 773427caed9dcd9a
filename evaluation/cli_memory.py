"""``python evaluate.py memory``: the HTM-EAR benchmark (synthetic scenarios A/B/C and BGL_2k).

Example::

    python evaluate.py memory --scenario B --modes full,no_ce,no_gate,lru,oracle_unbounded --seeds 42,43
    python evaluate.py memory --scenario bgl
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from common.atomic import atomic_write_csv, atomic_write_json, atomic_write_with
from common.datadir import data_file
from common.provenance import run_metadata
from evaluation.cli_options import comma_list
from memory.bench import run_modes
from memory.config import MODES, MemoryConfig
from memory.encoder import get_encoder
from memory.scenarios import SCENARIOS, generate_synthetic, load_bgl

SYNTHETIC = ("A", "B", "C")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the command's options on ``parser``."""
    parser.add_argument("--scenario", default="B", choices=[*SYNTHETIC, "bgl"], help="synthetic A/B/C or bgl")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated modes")
    parser.add_argument("--seeds", default="42", help="comma-separated seeds (synthetic data / BGL queries)")
    parser.add_argument("--encoder", default="minilm", help="encoder registry name")
    parser.add_argument("--n", type=int, default=None, help="override the number of synthetic facts")
    parser.add_argument("--l1", type=int, default=None, help="override L1 capacity")
    parser.add_argument("--l2", type=int, default=None, help="override L2 capacity")
    parser.add_argument(
        "--fallback", default="merge", choices=["merge", "replace"], help="gate fallback rule"
    )
    parser.add_argument(
        "--reranker", default="bi_encoder", help="reranker used by mode full ('none' disables)"
    )
    parser.add_argument(
        "--gate-threshold", type=float, default=None, help="override the calibrated threshold"
    )
    parser.add_argument("--k", type=int, default=5, help="MRR cut-off")
    parser.add_argument("--bgl-queries", type=int, default=200, help="number of evaluated BGL lines")
    parser.add_argument("--data-dir", default=None, help="benchmark data directory")
    parser.add_argument(
        "--out", default=None, help="output dir (default runs/memory/<scenario>-<encoder>-<fallback>)"
    )
    parser.add_argument("--no-cache", action="store_true", help="do not cache fact embeddings on disk")


def run(args: argparse.Namespace) -> int:
    """Run the benchmark; returns the exit code."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from tqdm import tqdm

    modes = comma_list(args.modes, "modes", str)
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise SystemExit(f"error: unknown mode(s) {unknown}; known: {list(MODES)}")
    seeds = comma_list(args.seeds, "seeds", int)
    data_files: list[Path] = []
    if args.scenario == "bgl":
        l1, l2, patterns = 500, 5000, "bgl"
        bgl_path = data_file("BGL_2k.log", args.data_dir)
        data_files.append(bgl_path)
    else:
        sc = SCENARIOS[args.scenario]
        l1, l2, patterns = sc.l1_capacity, sc.l2_capacity, "synthetic"
    base = MemoryConfig(
        l1_capacity=args.l1 or l1,
        l2_capacity=args.l2 or l2,
        fallback=args.fallback,
        reranker=None if args.reranker == "none" else args.reranker,
        gate_threshold=args.gate_threshold,
        entity_patterns=patterns,
    )
    out = Path(args.out or f"runs/memory/{args.scenario}-{args.encoder}-{args.fallback}")
    out.mkdir(parents=True, exist_ok=True)
    cache_dir = None if args.no_cache else Path("runs/memory/cache")
    encoder = get_encoder(args.encoder)

    rows: list[dict[str, Any]] = []
    bar = tqdm(total=len(seeds) * len(modes), desc=f"memory {args.scenario}", unit="run")
    for seed in seeds:
        if args.scenario == "bgl":
            data = load_bgl(bgl_path, seed=seed, n_queries=args.bgl_queries)
        else:
            data = generate_synthetic(args.n or SCENARIOS[args.scenario].n, seed)

        def progress(mode: str, seed: int = seed) -> None:
            bar.set_postfix_str(f"seed={seed} mode={mode}")
            bar.update(0 if mode == modes[0] else 1)

        for row in run_modes(data, encoder, base, modes, k=args.k, cache_dir=cache_dir, progress=progress):
            rows.append({"seed": seed, **row})
        bar.update(1)
    bar.close()

    summary = summarise(rows)
    atomic_write_csv(out / "results.csv", rows, lineterminator="\n")
    atomic_write_csv(out / "summary.csv", summary, lineterminator="\n")
    plot(
        summary,
        out / "mrr.png",
        title=f"HTM-EAR {args.scenario} ({args.encoder}, {args.fallback}, seeds {seeds})",
    )
    config = {
        "command": "memory",
        **vars(args),
        "memory_config": dataclasses.asdict(base),
        "encoder_dim": encoder.dim,
    }
    atomic_write_json(out / "run_metadata.json", run_metadata(config, data_files))
    print(format_table(summary))
    print(f"\nwrote {out}/results.csv, summary.csv, mrr.png, run_metadata.json")
    return 0


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Average per-seed rows into one row per mode (MRR columns per eval set)."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[r["mode"]].append(r)
    out = []
    for mode, rs in groups.items():
        row: dict[str, Any] = {"mode": mode, "n_seeds": len({r["seed"] for r in rs})}
        for set_name in dict.fromkeys(r["eval_set"] for r in rs):
            row[f"{set_name}_mrr"] = float(np.mean([r["mrr"] for r in rs if r["eval_set"] == set_name]))
        for key in (
            "essential_lost",
            "pruned_total",
            "latency_ms",
            "latency_p50_ms",
            "retrieve_ms",
            "retrieve_p50_ms",
        ):
            row[key] = float(np.mean([r[key] for r in rs]))
        row["gate_fallback_rate"] = float(np.mean([r["gate_fallback_rate"] for r in rs]))
        out.append(row)
    return out


def format_table(summary: list[dict[str, Any]]) -> str:
    """Render the summary as a fixed-width text table."""
    if not summary:
        return "(no results)"
    cols = list(summary[0])
    cells = [
        [f"{v:.3f}" if isinstance(v, float) else str(v) for v in (r.get(c, "") for c in cols)]
        for r in summary
    ]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    head = "  ".join(c.rjust(w) for c, w in zip(cols, widths, strict=True))
    body = ["  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join([head, *body])


def plot(summary: list[dict[str, Any]], path: Path, title: str) -> None:
    """Bar chart of MRR per mode and eval set, latency in the labels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sets = [c for c in summary[0] if c.endswith("_mrr")]
    modes = [r["mode"] for r in summary]
    x = np.arange(len(modes))
    width = 0.8 / max(1, len(sets))
    fig, ax = plt.subplots(figsize=(1.6 * len(modes) + 3, 4.5))
    for i, s in enumerate(sets):
        ax.bar(x + i * width - 0.4 + width / 2, [r[s] for r in summary], width, label=s.removesuffix("_mrr"))
    ax.set_xticks(
        x, [f"{r['mode']}\n{r['latency_ms']:.1f} ms\nlost {r['essential_lost']:.0f}" for r in summary]
    )
    ax.set_ylabel("MRR@5")
    ax.set_ylim(0, 1.05)
    ax.set_title(title, fontsize=10)
    ax.legend()
    fig.tight_layout()

    def save(tmp: Path) -> None:
        fig.savefig(tmp, format="png", dpi=110)

    atomic_write_with(path, save)
    plt.close(fig)
