"""Does each tier keep the evidence? The local (LOW/MID) ladder measured without an answerer.

For every question of a split and every strategy-option variant, the all-LOW and all-MID pipelines
run (rules and offline models only, no LLM call), and two things are measured per path:

  * **filter recall**: share of the question's gold evidence turns inside the chunks the filter
    kept (what every later module and the answerer can see), and how many chunks it kept;
  * **containment**: share of the gold answer's words in the memory text the answerer reads, and
    that text's length.

This is the cheap proxy the ``cpu_quality`` MID tier was chosen with on LoCoMo *val* (an
answerer costs ~25 s per question here); the F1 of the chosen ladder is then measured once on
test with ``evaluate.py headroom``.

Usage: python scripts/bench_ladder_evidence.py [--benchmark locomo] [--split val] [--limit N]
           [--experiment cpu_quality] [--variants 'name:key=value,key=value;...'] [--set K=V] [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.metrics import answer_containment
from common.atomic import atomic_write_json
from envs.components import make_components
from envs.question_bank import question_bank_from
from evaluation.cli_options import parse_options
from evaluation.frontier_config import resolve_config
from modules.tier import MODULE_ORDER, Tier

#: The variants behind the numbers in configs/experiment/cpu_quality.yaml.
DEFAULT_VARIANTS = (
    "threshold:keep_evidence=false;"
    "keep:keep_evidence=true;"
    "keep+retriever 0.3:keep_evidence=true,filter_retrieval_weight=0.3;"
    "keep+retriever 0.5:keep_evidence=true,filter_retrieval_weight=0.5"
)


def parse_variants(text: str) -> dict[str, dict[str, Any]]:
    """``'name:key=value,key=value;...'`` -> ``{name: strategy options}``.

    Raises:
        ValueError: A variant has no ``name:`` prefix.
    """
    out: dict[str, dict[str, Any]] = {}
    for part in (p.strip() for p in text.split(";") if p.strip()):
        name, sep, opts = part.partition(":")
        if not sep or not name.strip():
            raise ValueError(f"--variants: {part!r} is not 'name:key=value,...'")
        out[name.strip()] = parse_options([o for o in opts.split(",") if o.strip()])
    return out


def measure(cfg: dict[str, Any], split: str, limit: int | None) -> dict[str, dict[str, float]]:
    """Filter recall, kept chunks, containment and memory chars of all-LOW and all-MID."""
    components = make_components(cfg)
    try:
        items = question_bank_from(cfg, split, components.encoder, progress=False)[:limit]
        rows: dict[str, dict[str, list[float]]] = {t.name: {} for t in (Tier.LOW, Tier.MID)}
        for item in tqdm(items, desc="questions", unit="q"):
            q = item.question
            gold = set(q.evidence_ids)
            for tier in (Tier.LOW, Tier.MID):
                result = components.pipeline.run(q.question, item.evidence, [tier] * len(MODULE_ORDER))
                kept = result.outputs["filter"].value
                row = rows[tier.name]
                if gold:
                    seen = {s for ev in kept for s in ev.source_ids}
                    row.setdefault("filter_recall", []).append(len(seen & gold) / len(gold))
                row.setdefault("kept", []).append(len(kept))
                contained = answer_containment(q, result.memory_text, item.benchmark)
                row.setdefault("containment", []).append(contained)
                row.setdefault("chars", []).append(len(result.memory_text))
        return {t: {k: float(np.mean(v)) for k, v in r.items()} | {"n": len(items)} for t, r in rows.items()}
    finally:
        components.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", default="locomo")
    parser.add_argument("--split", default="val")
    parser.add_argument("--limit", type=int, default=None, help="first N questions of the bank")
    parser.add_argument("--experiment", default="cpu_quality", help="configs/experiment/NAME, or 'none'")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override")
    parser.add_argument("--variants", default=DEFAULT_VARIANTS, help="'name:key=value,...;...'")
    parser.add_argument("--out", default="runs/ladder_evidence")
    args = parser.parse_args(argv)
    try:
        variants = parse_variants(args.variants)
    except ValueError as exc:
        parser.error(str(exc))
    base = argparse.Namespace(
        experiment=None if args.experiment == "none" else args.experiment,
        config=None,
        set=args.set,
        benchmark=args.benchmark,
        strategy=None,
    )
    results: dict[str, Any] = {}
    for name, opts in variants.items():
        cfg = resolve_config(base, [])
        cfg["question_bank"]["limit"] = None
        cfg["strategy"]["options"] = {**(cfg["strategy"].get("options") or {}), **opts}
        print(f"variant {name}: {opts}")
        results[name] = measure(cfg, args.split, args.limit)

    print(f"\n{args.benchmark} / {args.split}, experiment {args.experiment}")
    print("| variant | path | questions | filter recall | chunks kept | containment | memory chars |")
    print("|---|---|---|---|---|---|---|")
    for name, paths in results.items():
        for path, m in paths.items():
            print(
                f"| {name} | all-{path} | {m['n']} | {m.get('filter_recall', float('nan')):.3f} "
                f"| {m['kept']:.2f} | {m['containment']:.3f} | {m['chars']:.0f} |"
            )
    out = Path(args.out) / f"{args.benchmark}_{args.split}.json"
    atomic_write_json(out, {"args": vars(args), "results": results})
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
