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

``--tiers LOW,MID,HIGH`` adds the HIGH path (Qwen calls, replayed from the call cache after a
headroom run on the same questions); ``--filter-only`` runs only the filter step, so a HIGH row costs
one LLM call per question and no other module's. Rows ``retriever top-k`` give the recall of the
retriever's own ranking, the bar a filter's selection has to clear. ``--stratified`` takes the
questions ``evaluate.py headroom --limit N`` takes (stratified by category) instead of the first N.

Usage: python scripts/bench_ladder_evidence.py [--benchmark locomo] [--split val] [--limit N] [--stratified]
           [--experiment cpu_quality] [--variants 'name:key=value,key=value;...'] [--tiers LOW,MID]
           [--filter-only] [--set K=V] [--out DIR]
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
from benchmarks.recall import evidence_recall
from common.atomic import atomic_write_json
from envs.components import make_components
from envs.question_bank import question_bank_from
from evaluation.cli_options import parse_options
from evaluation.frontier_config import script_config
from evaluation.headroom import stratified as stratified_items
from modules.tier import MODULE_ORDER, Tier

#: Retriever ranks whose recall is reported next to the filters' (``None``: all retrieved).
RANK_CUTS: tuple[int | None, ...] = (2, 5, None)

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


def measure(
    cfg: dict[str, Any],
    split: str,
    limit: int | None,
    *,
    tiers: tuple[Tier, ...] = (Tier.LOW, Tier.MID),
    filter_only: bool = False,
    stratified: bool = False,
) -> dict[str, dict[str, float]]:
    """Filter recall and kept chunks per uniform path (and containment and memory chars unless
    ``filter_only``), plus the recall of the retriever's top-k (rows ``retriever top-k``)."""
    components = make_components(cfg)
    try:
        # The bank built with a limit is the first `limit` questions of the whole bank (select_questions
        # cuts one order), so only their histories are built and retrieved; a stratified pick needs them all.
        bank = {**cfg["question_bank"], "limit": None if stratified else limit}
        items = question_bank_from({**cfg, "question_bank": bank}, split, components.encoder, progress=False)
        if stratified and limit:
            items = stratified_items(items, limit, lambda it: str(it.question.category))
        names = [f"all-{t.name}" for t in tiers] + [f"retriever top-{k or 'all'}" for k in RANK_CUTS]
        rows: dict[str, dict[str, list[float]]] = {n: {} for n in names}
        for item in tqdm(items, desc="questions", unit="q"):
            q = item.question
            gold = set(q.evidence_ids)
            for k in RANK_CUTS if gold else ():
                rows[f"retriever top-{k or 'all'}"].setdefault("filter_recall", []).append(
                    evidence_recall(q.evidence_ids, item.evidence[:k])
                )
            for tier in tiers:
                row = rows[f"all-{tier.name}"]
                if filter_only:
                    run = components.pipeline.begin(q.question, item.evidence, q.question_date)
                    kept = run.step(tier).value
                else:
                    result = components.pipeline.run(q.question, item.evidence, [tier] * len(MODULE_ORDER))
                    kept = result.outputs["filter"].value
                    contained = answer_containment(q, result.memory_text, item.benchmark)
                    row.setdefault("containment", []).append(contained)
                    row.setdefault("chars", []).append(len(result.memory_text))
                if gold:
                    row.setdefault("filter_recall", []).append(evidence_recall(q.evidence_ids, kept))
                row.setdefault("kept", []).append(len(kept))
        return {n: {k: float(np.mean(v)) for k, v in r.items()} | {"n": len(items)} for n, r in rows.items()}
    finally:
        components.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", default="locomo")
    parser.add_argument("--split", default="val")
    parser.add_argument("--limit", type=int, default=None, help="first N questions of the bank")
    parser.add_argument("--stratified", action="store_true", help="--limit N stratified as headroom does")
    parser.add_argument("--tiers", default="LOW,MID", help="uniform paths to measure, e.g. LOW,MID,HIGH")
    parser.add_argument("--filter-only", action="store_true", help="run only the filter step")
    parser.add_argument("--experiment", default="cpu_quality", help="configs/experiment/NAME, or 'none'")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override")
    parser.add_argument("--variants", default=DEFAULT_VARIANTS, help="'name:key=value,...;...'")
    parser.add_argument("--out", default="runs/ladder_evidence")
    args = parser.parse_args(argv)
    try:
        variants = parse_variants(args.variants)
        tiers = tuple(Tier[t.strip().upper()] for t in args.tiers.split(",") if t.strip())
    except ValueError as exc:
        parser.error(str(exc))
    except KeyError as exc:
        parser.error(f"--tiers: unknown tier {exc} (LOW, MID, HIGH)")
    results: dict[str, Any] = {}
    for name, opts in variants.items():
        cfg = script_config(args.experiment, args.set, args.benchmark)
        cfg["strategy"]["options"] = {**(cfg["strategy"].get("options") or {}), **opts}
        print(f"variant {name}: {opts}")
        results[name] = measure(
            cfg, args.split, args.limit, tiers=tiers, filter_only=args.filter_only, stratified=args.stratified
        )

    print(f"\n{args.benchmark} / {args.split}, experiment {args.experiment}")
    print("| variant | path | questions | filter recall | chunks kept | containment | memory chars |")
    print("|---|---|---|---|---|---|---|")
    for name, paths in results.items():
        for path, m in paths.items():
            print(
                f"| {name} | {path} | {m['n']} | {m.get('filter_recall', float('nan')):.3f} "
                f"| {m.get('kept', float('nan')):.2f} | {m.get('containment', float('nan')):.3f} "
                f"| {m.get('chars', float('nan')):.0f} |"
            )
    out = Path(args.out) / f"{args.benchmark}_{args.split}.json"
    atomic_write_json(out, {"args": vars(args), "results": results})
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
