"""``python evaluate.py describe --benchmark NAME``: counts of a benchmark's data per split."""

from __future__ import annotations

import argparse
import json
from typing import Any

from benchmarks.base import SPLITS
from benchmarks.registry import benchmark_names, get_benchmark
from common.atomic import atomic_write_json
from evaluation.cli_options import add_option_argument, parse_options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the command's options."""
    parser.add_argument("--benchmark", required=True, choices=benchmark_names())
    parser.add_argument("--data-dir", default=None, help="benchmark data directory")
    parser.add_argument(
        "--include-adversarial", action="store_true", help="LoCoMo: also count category 5 (adversarial)"
    )
    parser.add_argument("--json", default=None, help="also write the counts to this JSON file")
    add_option_argument(parser)


def format_table(info: dict[str, Any]) -> str:
    """Render :meth:`Benchmark.describe` output as a text table."""
    cols = ("samples", "questions", "sessions", "turns", "with_evidence", "abstention")
    lines = [f"benchmark: {info['benchmark']}", f"{'split':<7}" + "".join(f"{c:>15}" for c in cols)]
    for split in SPLITS:
        row = info["splits"][split]
        lines.append(f"{split:<7}" + "".join(f"{row[c]:>15,}" for c in cols))
    lines.append("categories (all):")
    for cat, n in info["splits"]["all"]["categories"].items():
        per_split = ", ".join(
            f"{s} {info['splits'][s]['categories'].get(cat, 0)}" for s in ("train", "val", "test")
        )
        lines.append(f"  {cat:<28}{n:>6}   ({per_split})")
    for split, ids in info.get("missing", {}).items():
        if ids:
            lines.append(f"missing from the file ({split}): {', '.join(ids)}")
    lines.append("files:")
    lines.extend(f"  {name}  sha256 {digest}" for name, digest in info["checksums"].items())
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Print the counts; returns 0."""
    opts: dict[str, Any] = {"include_adversarial": True} if args.include_adversarial else {}
    opts.update(parse_options(args.option))
    if args.include_adversarial and args.benchmark != "locomo":
        raise SystemExit("--include-adversarial applies to --benchmark locomo only")
    bench = get_benchmark(args.benchmark, data_dir=args.data_dir, **opts)
    info = bench.describe()
    missing = getattr(bench, "missing", None)
    if missing:
        info["missing"] = {k: v for k, v in missing.items() if v}
    print(format_table(info))
    if args.json:
        atomic_write_json(args.json, info)
        print(json.dumps({"wrote": args.json}))
    return 0
