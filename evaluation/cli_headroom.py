"""``python evaluate.py headroom``: answer quality per context (gold, raw top-k, fixed tier paths).

Example (the default config; add ``--set`` overrides or ``--experiment cpu_quality``)::

    python evaluate.py headroom --benchmark locomo --split test --limit 24
    python evaluate.py headroom --benchmark locomo --split test --limit 100 --experiment cpu_quality
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path
from typing import Any

from benchmarks.metrics import score_answer
from benchmarks.registry import get_benchmark
from common.atomic import atomic_write_csv, atomic_write_json
from common.datadir import PROJECT_ROOT
from common.provenance import data_checksums, run_metadata
from envs.components import make_components
from envs.question_bank import question_bank_from
from envs.rollout import map_in_flight
from evaluation.bootstrap import DEFAULT_ALPHA, DEFAULT_N_BOOT, DEFAULT_SEED
from evaluation.cli_options import add_option_argument, concurrency_arg, parse_options, resolve_concurrency
from evaluation.frontier_config import resolve_config
from evaluation.frontier_runner import RecordStore, record_fingerprint, safe_id
from evaluation.headroom import (
    Context,
    evaluate_context,
    format_categories,
    format_headroom,
    format_ladder,
    gold_texts,
    known_contexts,
    plot_headroom,
    select_contexts,
    stratified,
    summarise_headroom,
    summarise_ladder,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the headroom command's options."""
    a = parser.add_argument
    a(
        "--benchmark",
        default=None,
        help="locomo | longmemeval | longmemeval_oracle | hotpotqa (default: config's)",
    )
    a("--split", default="test", help="split (default test)")
    a("--limit", type=int, default=None, help="at most N questions, stratified by category")
    a("--contexts", default="all", help="comma list of contexts (default all; see --list-contexts)")
    a("--no-single-module", action="store_true", help="skip the ten single-module changes from all-MID")
    a("--list-contexts", action="store_true", help="print the context names and exit")
    a(
        "--cached-only",
        action="store_true",
        help="answer nothing: summarise the questions that every context already has records for "
        "(the progress of a long run, e.g. one split over several sittings)",
    )
    a("--experiment", default=None, help="configs/experiment/<name>.yaml applied before --set")
    a("--config", default=None, help="resolved config YAML (default: configs/)")
    a("--set", action="append", default=[], metavar="KEY=VALUE", help="config override (repeatable)")
    add_option_argument(parser)
    a("--max-samples", type=int, default=None, help="use only the first N histories of the split")
    a("--n-boot", type=int, default=DEFAULT_N_BOOT, help="bootstrap replicates")
    a("--boot-seed", type=int, default=DEFAULT_SEED, help="bootstrap seed")
    a("--alpha", type=float, default=DEFAULT_ALPHA, help="1 - confidence level of the intervals")
    a("--out", default=None, help="output dir (default runs/headroom/<benchmark>-<split>[-<experiment>])")
    a("--no-progress", action="store_true", help="hide progress bars")
    a(
        "--concurrency",
        type=concurrency_arg,
        default="auto",
        metavar="N|auto",
        help="questions in flight (the same records as 1); auto: what the engine measured best (vLLM 8 on "
        "a CPU, llama.cpp its slots, 1 for the in-process wheel)",
    )


def run(args: argparse.Namespace) -> int:
    """Evaluate every context on the selected questions, then print and write the table."""
    if args.list_contexts:
        for c in known_contexts():
            print(c.name)
        return 0
    try:
        contexts = select_contexts(args.contexts, single_module=not args.no_single_module)
    except ValueError as exc:  # a usage error: one line, not a traceback
        raise SystemExit(f"error: --contexts: {exc}") from None
    cfg = resolve_config(args, [])
    if args.option:  # loader options (e.g. file=hotpot_dev_distractor_v1.json) on top of the config's
        bench_cfg = cfg["benchmark"] if isinstance(cfg.get("benchmark"), dict) else {"name": cfg["benchmark"]}
        bench_cfg["options"] = {**(bench_cfg.get("options") or {}), **parse_options(args.option)}
        cfg["benchmark"] = bench_cfg
    cfg.setdefault("question_bank", {})["max_samples"] = args.max_samples
    cfg["question_bank"]["limit"] = None
    components = make_components(cfg)
    args.concurrency = resolve_concurrency(args.concurrency, components)
    try:
        bench_name = str(components.benchmark)
        items = question_bank_from(cfg, args.split, components.encoder, progress=not args.no_progress)
        items = stratified(items, args.limit, lambda it: str(it.question.category))
        return _run_with(args, cfg, components, items, contexts, bench_name)
    finally:
        components.close()


def _run_with(
    args: argparse.Namespace,
    cfg: dict[str, Any],
    components: Any,
    items: list[Any],
    contexts: list[Context],
    bench: str,
) -> int:
    benchmark = get_benchmark(
        bench, data_dir=cfg.get("data_dir"), **dict((cfg["benchmark"] or {}).get("options") or {})
    )
    checksums = data_checksums(benchmark.data_files())
    gold = gold_texts(benchmark.load(args.split)) if any(c.kind == "gold" for c in contexts) else {}
    fp = record_fingerprint(cfg, checksums)
    # Gold and raw contexts never run the modules: their records do not depend on the strategy or
    # its LLMs, so ladders that differ only there share them (and a new ladder re-answers nothing).
    fp_no_modules = record_fingerprint({**cfg, "strategy": None, "llms": None}, checksums)
    suffix = f"-{args.experiment}" if args.experiment else ""
    out = Path(args.out or PROJECT_ROOT / "runs" / "headroom" / f"{bench}-{args.split}{suffix}")
    qids = [str(it.question.question_id) for it in items]
    scorer = components.scorer or score_answer
    stores: dict[str, RecordStore] = {}
    # Context by context (not question by question): consecutive calls of one context share the
    # answer prompt's prefix, and a finished context is complete even if the run stops later.
    for ctx in contexts:
        ctx_fp = fp if ctx.kind in ("pipeline", "gold_filter") else fp_no_modules
        store = RecordStore(out / "records" / ctx_fp / args.split / f"{safe_id(ctx.name)}.jsonl")
        stores[ctx.name] = store
        if args.cached_only:
            continue
        missing = set(store.missing(qids))
        todo = [it for it in items if str(it.question.question_id) in missing]

        def keep(_index: int, record: dict[str, Any], store: RecordStore = store) -> None:
            store.add([record])  # each finished question at once: a stop loses nothing that finished
            store.save()

        def answer(it: Any, ctx: Context = ctx) -> dict[str, Any]:
            return evaluate_context(ctx, it, components, gold.get(it.question.question_id, ""), scorer)

        map_in_flight(
            answer, todo, concurrency=args.concurrency, on_result=keep, progress=not args.no_progress,
            desc=ctx.name,
        )  # fmt: skip
    n_selected = len(qids)
    if args.cached_only:
        qids = [q for q in qids if all(q in s.records for s in stores.values())]
        if not qids:
            # A usage error, not a bug: one line, exit status 1.
            raise SystemExit(
                f"error: --cached-only: none of the {n_selected} selected questions has a record in every "
                f"context under {out / 'records'} yet"
            )
    records = {name: s.get(qids) for name, s in stores.items()}

    rows = summarise_headroom(records, qids, n_boot=args.n_boot, seed=args.boot_seed, alpha=args.alpha)
    ladder = summarise_ladder(records, qids, n_boot=args.n_boot, seed=args.boot_seed, alpha=args.alpha)
    meta = {
        **run_metadata(cfg),
        "benchmark": bench,
        "split": args.split,
        "limit": args.limit,
        "experiment": args.experiment,
        "n_questions": len(qids),
        "n_selected": n_selected,
        "cached_only": bool(args.cached_only),
        "question_ids_sha256": hashlib.sha256("\n".join(qids).encode()).hexdigest(),
        "data_checksums": checksums,
        "record_fingerprint": fp,
        "record_fingerprint_gold_raw": fp_no_modules,
        "answer_model": getattr(components.answerer.llm, "model_id", None),
        "bootstrap": {"n_boot": args.n_boot, "seed": args.boot_seed, "alpha": args.alpha, "paired": True},
    }
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "headroom.json", {"rows": rows, "ladder": ladder, "metadata": meta})
    nan = {"mean": float("nan"), "lo": float("nan"), "hi": float("nan")}
    diffs = [r.get("vs_low", {}).get("f1", nan) for r in rows]
    table = [
        {
            "context": r["context"],
            "n": r["n"],
            "f1": r["f1"]["mean"],
            "f1_lo": r["f1"]["lo"],
            "f1_hi": r["f1"]["hi"],
            "df1_vs_low": d["mean"],
            "df1_lo": d["lo"],
            "df1_hi": d["hi"],
            "em": r["em"]["mean"],
            "containment": r["containment"]["mean"],
            "context_chars": r["context_chars"],
            **{m: r[m]["mean"] for m in ("context_tokens", "module_cost", "answer_cost")},
            "failures": r["failures"],
        }
        for r, d in zip(rows, diffs, strict=True)
    ]
    atomic_write_csv(out / "headroom.csv", table)
    title = f"{bench} / {args.split}: {len(qids)} questions" + (
        f" ({args.experiment})" if args.experiment else ""
    )
    if args.cached_only:
        title += f" (cached only: {len(qids)} of {n_selected} selected questions done in every context)"
    plot_headroom(rows, out / "headroom.png", title)
    print(f"\n{title}; answerer {meta['answer_model']}\n")
    print(format_headroom(rows))
    print()
    print(format_categories(rows))
    if ladder:
        print("\nTier ladder (paired; 'ordered' = the dearer context is not worse within noise):\n")
        print(format_ladder(ladder))
    print(f"\nwrote {out}/: headroom.csv, headroom.json, headroom.png")
    return 0
