"""Retrieval ablation: which lever raises evidence recall, measured with ``evaluate.py retrieval``.

Every variant runs the same command (``evaluation.cli_retrieval``) on the same split with the
same chunk vectors (embedding cache), so rows differ only in the lever named:

  * ``dense (old default)``: hierarchical memory, dense ranking only (``--lexical-weight 0``);
  * ``bm25 only``: the BM25 channel alone (``--lexical-weight 1``);
  * ``hybrid, no dates``: dense + BM25 fused, session dates not indexed;
  * ``hybrid (default)``: dense + BM25 fused with session dates indexed (the new default);
  * ``hybrid, turn units``: the default with one chunk per dialogue turn;
  * ``hybrid, no reranker``: the default without the bi-encoder reranker stage.

Build ms = memory build per history (ingest + BM25 index; vectors given), query ms = one
retrieval with the query vector given (query encoding is the same for every variant).

Usage: python scripts/bench_retrieval_ablation.py [--benchmark locomo] [--split test]
           [--variants 'all' | 'name;name;...'] [--out runs/retrieval_ablation]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evaluation import cli_retrieval

VARIANTS: dict[str, list[str]] = {
    "dense (old default)": ["--lexical-weight", "0"],
    "bm25 only": ["--lexical-weight", "1"],
    "hybrid, no dates": ["--no-lexical-dates"],
    "hybrid (default)": [],
    "hybrid, turn units": ["--granularity", "turn"],
    "hybrid, no reranker": ["--reranker", "none"],
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", default="locomo")
    parser.add_argument("--split", default="test")
    parser.add_argument("--mode", default="full", help="memory mode of every variant")
    parser.add_argument("--variants", default="all", help="';'-separated variant names, or 'all'")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--out", default="runs/retrieval_ablation")
    args = parser.parse_args(argv)
    wanted = [v.strip() for v in args.variants.split(";") if v.strip()]
    names = list(VARIANTS) if args.variants == "all" else wanted
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; known: {list(VARIANTS)}")

    rows = []
    for i, name in enumerate(names):
        out = Path(args.out) / f"{args.benchmark}_{args.split}" / f"v{i}"
        sub = argparse.ArgumentParser()
        cli_retrieval.add_arguments(sub)
        cli_args = ["--benchmark", args.benchmark, "--split", args.split, "--modes", args.mode]
        cli_args += ["--out", str(out), *VARIANTS[name]]
        if args.limit is not None:
            cli_args += ["--limit", str(args.limit)]
        cli_retrieval.run(sub.parse_args(cli_args))
        summary = json.loads(sorted(out.glob("*/summary.json"))[-1].read_text(encoding="utf-8"))
        rec = summary["recall"][args.mode]
        timing = summary["mode_timings"][args.mode]
        rows.append((name, rec, timing, summary["questions_with_evidence"], summary["chunks"]["total"]))

    print(f"\n{args.benchmark} / {args.split}, mode {args.mode}")
    print("| variant | questions | chunks | recall@5 | hit@5 | recall@10 | hit@10 | build ms | query ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, rec, timing, n_q, n_c in rows:
        r5, r10 = rec.get("k=5", {}), rec.get("k=10", {})
        print(
            f"| {name} | {n_q} | {n_c} | {r5.get('recall', float('nan')):.3f} "
            f"| {r5.get('hit', float('nan')):.3f} "
            f"| {r10.get('recall', float('nan')):.3f} | {r10.get('hit', float('nan')):.3f} "
            f"| {timing['build_ms_per_history']:.0f} | {timing['retrieve_ms_per_query']:.2f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
