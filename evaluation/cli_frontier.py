r"""``python evaluate.py frontier``: cost-quality frontier of router checkpoints vs fixed-tier baselines.

Example (a λ sweep on the LoCoMo test split)::

    python evaluate.py frontier --benchmark locomo --split test \\
        --routers 'runs/locomo__implementation__lam*__s*/router' \\
        --baselines all-low,all-mid,all-high,random,best-fixed --limit 100
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import math
import sys
from pathlib import Path
from typing import Any

from benchmarks.registry import get_benchmark
from common.atomic import atomic_write_json, remove_stale_temporaries
from common.datadir import PROJECT_ROOT
from common.provenance import data_checksums, run_metadata
from envs.components import make_components
from envs.question_bank import question_bank_from
from evaluation.aggregate import summarise
from evaluation.bootstrap import DEFAULT_ALPHA, DEFAULT_N_BOOT, DEFAULT_SEED
from evaluation.cli_options import concurrency_arg, resolve_concurrency
from evaluation.frontier_config import resolve_config
from evaluation.frontier_plot import plot_frontier
from evaluation.frontier_runner import (
    RecordStore,
    SystemSpec,
    evaluate_run,
    evaluate_systems,
    fixed_run,
    mean_of,
    record_config_differences,
    record_fingerprint,
    safe_id,
)
from evaluation.frontier_systems import baseline_systems, labelled_checkpoints, router_systems
from evaluation.headroom import stratified
from evaluation.oracle import oracle_system
from evaluation.report import (
    analyse,
    format_category_table,
    format_table,
    json_safe,
    verdict_lines,
    write_csv,
    write_json,
)
from evaluation.reproduce import compare_run, format_diffs, load_expected
from evaluation.router_metrics_report import format_router_metrics, write_router_metrics_csv
from evaluation.tier_search import SEARCH_METHODS, TierTuple, search_fixed_tiers
from modules.backends.replay import ReplayMiss
from modules.cache_pack import cache_summary_line
from modules.tier import parse_tiers, tiers_label

DEFAULT_BASELINES = "all-low,all-mid,all-high,random,best-fixed"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the frontier command's options."""
    a = parser.add_argument
    a(
        "--benchmark",
        default=None,
        help="locomo | longmemeval | longmemeval_oracle | hotpotqa | custom (default: config's)",
    )
    a("--split", default="test", help="split to evaluate on (default test)")
    a(
        "--routers",
        nargs="*",
        default=[],
        metavar="[NAME=]PATH",
        help="checkpoint dirs/zips, globs, or dirs to search; NAME= labels the systems of what it finds "
        "(run3=<dir> run6=<dir> puts two λ-conditioned runs side by side as 'run3 λ=…' and 'run6 λ=…')",
    )
    a(
        "--checkpoint-glob",
        default="*",
        help="when searching a dir: checkpoint dir names to accept (e.g. best)",
    )
    a(
        "--baselines",
        default=DEFAULT_BASELINES,
        help="comma list: all-low, all-mid, all-high, random, random:MID (LOW or MID, the action space of "
        "an actions.max_tier=MID router), best-fixed, single-module (the 10 one-module changes from "
        "all-MID, more paths for the oracle), fixed:L,M,H,M,L (separate several fixed tuples with ';')",
    )
    a(
        "--random-seeds",
        default="0",
        help="comma list of seeds of the random baseline (one system, several runs)",
    )
    a(
        "--config",
        default=None,
        help="resolved config YAML (default: first checkpoint's config, else configs/)",
    )
    a(
        "--experiment",
        default=None,
        help="configs/experiment/<name>.yaml composed into the default config (baselines-only runs; "
        "routers bring their recorded config)",
    )
    a("--set", action="append", default=[], metavar="KEY=VALUE", help="config override (repeatable)")
    a("--limit", type=int, default=None, help="evaluate at most N test questions (bank selection order)")
    a(
        "--stratified",
        action="store_true",
        help="with --limit: categories in proportion to the split, as `evaluate.py headroom --limit` "
        "chooses them (so both evaluate the same questions and share the call cache)",
    )
    a("--max-samples", type=int, default=None, help="use only the first N histories of the split")
    a("--judge", action="store_true", help="also score answers with the LLM judge (judge.enabled=true)")
    a(
        "--judge-protocol",
        default=None,
        choices=["budgetmem", "locomo", "longmemeval"],
        help="judge protocol (implies --judge; default: the config's judge.protocol, else budgetmem); "
        "the judge model is judge.backend (--set judge.backend.name=openai ...)",
    )
    a("--val-split", default="val", help="split used to choose best-fixed")
    a("--val-limit", type=int, default=50, help="validation questions for the best-fixed search")
    a("--best-fixed-search", default="greedy", choices=SEARCH_METHODS)
    a("--best-fixed-candidates", default="", help="';'-separated tuples for --best-fixed-search candidates")
    a("--best-fixed-budget", type=float, default=0.5, help="best-fixed cost budget as a fraction of all-HIGH")
    a("--quality", default="f1", choices=["f1", "em", "judge"], help="quality axis (default f1)")
    a("--cost", default="module_cost", choices=["module_cost", "total_cost"], help="cost axis")
    a("--reference", default="all-high", help="reference system for ratios and the target")
    a("--quality-frac", type=float, default=0.95, help="target share of reference quality")
    a("--cost-frac", type=float, default=0.5, help="allowed share of reference cost")
    a("--n-boot", type=int, default=DEFAULT_N_BOOT, help="bootstrap replicates")
    a("--boot-seed", type=int, default=DEFAULT_SEED, help="bootstrap seed")
    a("--alpha", type=float, default=DEFAULT_ALPHA, help="1 - confidence level of the intervals")
    a("--out", default=None, help="output dir (default runs/frontier/<benchmark>-<split>)")
    a("--chunk", type=int, default=1, help="questions evaluated between two record-cache saves")
    a(
        "--concurrency",
        type=concurrency_arg,
        default="auto",
        metavar="N|auto",
        help="episodes in flight (records are the same as with 1; engines with continuous batching or "
        "server slots turn N into throughput); auto: what the engine measured best (vLLM 8 on a CPU, "
        "llama.cpp its slots, 1 for the in-process wheel)",
    )
    a(
        "--expect",
        default=None,
        metavar="DIR",
        help="a committed frontier output dir (or its frontier.csv): after the run, compare frontier.csv "
        "and router_metrics.csv cell by cell (wall time excluded) and exit 1 on any difference",
    )
    a(
        "--replay",
        action="store_true",
        help="with --expect: answer every LLM call from the call cache with the numerics the expected table "
        "recorded, so a table computed on an engine this machine lacks (vLLM, a native build) replays "
        "without it; a call the cache lacks stops the run and is named (cache.replay=true)",
    )
    a("--no-progress", action="store_true", help="hide progress bars")


# ------------------------------------------------------------------------------------------
# Main
# ------------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    """Evaluate, aggregate, print and write the frontier; returns the exit code."""
    labels = labelled_checkpoints(args.routers, args.checkpoint_glob) if args.routers else {}
    routers, ckpts, router_cfgs = router_systems(list(labels), labels) if labels else ([], [], [])
    cfg = resolve_config(args, router_cfgs)
    qb = cfg.setdefault("question_bank", {})
    # A training config may restrict histories (max_samples) for speed; evaluation uses the whole
    # split unless asked otherwise.
    qb["max_samples"] = args.max_samples
    if args.judge or args.judge_protocol:
        cfg["judge"] = {**(cfg.get("judge") or {}), "enabled": True}
        if args.judge_protocol:
            cfg["judge"]["protocol"] = args.judge_protocol
    if args.replay:
        if not args.expect:
            raise SystemExit("error: --replay replays the table named by --expect; give --expect DIR")
        numerics = recorded_numerics(args.expect)
        cfg["cache"] = {**(cfg.get("cache") or {}), "replay": True, "replay_numerics": numerics}
    _warn_config_mismatch(router_cfgs, ckpts)
    components = make_components(cfg)
    try:
        items = test_items(args, cfg, components)
        return run_with(
            args, cfg, components, items, routers, ckpts, lambda: _val_items(args, cfg, components)
        )
    except ReplayMiss as exc:  # bad input (a pack not imported), not a bug: the message names the call
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        components.close()


def engines_of(components: Any) -> dict[str, dict[str, Any]]:
    """Per LLM role, the model id and the numerics its calls are keyed with (what ``--replay`` needs)."""
    return {
        role: {"model_id": llm.model_id, "numerics": llm.numerics}
        for role, llm in (getattr(components, "llms", None) or {}).items()
    }


def refuse_other_numerics(out: Path, fingerprint: str, engines: dict[str, dict[str, Any]]) -> None:
    """Stop before a run adds records computed with other numerics to a table (one table, one engine).

    The same config on another engine (a vLLM CPU kernel set of another CPU class, another version or
    weights) keys its calls apart but writes records under the same fingerprint: without this, a table
    continued on another machine would mix the two silently.

    Raises:
        SystemExit: ``out/metadata.json`` is of this fingerprint and records other engines; the file, role
            and both numerics are named.
    """
    path = out / "metadata.json"
    if not path.is_file():
        return
    meta = json.loads(path.read_text())
    if meta.get("record_fingerprint") != fingerprint:
        return
    now = json.loads(json.dumps(json_safe(engines)))  # as the metadata stores it
    for role, engine in (meta.get("engines") or {}).items():
        if role in now and now[role] != engine:
            raise SystemExit(
                f"error: {path}: the table's {role} calls were computed with {engine}; this engine is "
                f"{now[role]}. A table holds one engine's outputs: continue it on a machine of that engine "
                "(for vLLM on a CPU, the same `kernels`: scale/vllm_kernels.py), or give another --out"
            )


def recorded_numerics(expected: str | Path) -> dict[str, Any]:
    """Model id -> numerics, from the ``engines`` of a frontier output dir's ``metadata.json``.

    A table written before engines were recorded was computed on the reference engine: no entries.

    Raises:
        SystemExit: The metadata is missing, or two roles of one model recorded different numerics.
    """
    exp = Path(expected)
    path = (exp.parent if exp.is_file() else exp) / "metadata.json"
    if not path.is_file():
        raise SystemExit(f"error: --replay: {path} not found (it names the engines a table was made on)")
    out: dict[str, Any] = {}
    for role, engine in (json.loads(path.read_text()).get("engines") or {}).items():
        model_id, numerics = str(engine["model_id"]), engine.get("numerics")
        if model_id in out and out[model_id] != numerics:
            raise SystemExit(
                f"error: --replay: {path} records two numerics for model {model_id} (role {role}: "
                f"{numerics}, another role: {out[model_id]}); replay it with cache.replay_numerics by hand"
            )
        out[model_id] = numerics
    return out


def test_items(args: argparse.Namespace, cfg: dict[str, Any], components: Any) -> list[Any]:
    """The evaluated questions: the first ``--limit`` of the bank, or a stratified ``--limit``."""
    test_cfg = copy.deepcopy(cfg)
    test_cfg["question_bank"]["limit"] = None if args.stratified else args.limit
    items = question_bank_from(test_cfg, args.split, components.encoder, progress=not args.no_progress)
    if args.stratified:
        items = stratified(items, args.limit, lambda it: str(it.question.category))
    return list(items)


def _warn_config_mismatch(router_cfgs: list[dict[str, Any]], ckpts: list[dict[str, Any]]) -> None:
    """Warn when routers were trained with different pipelines (they are all evaluated with one).

    The warning names the config every router is evaluated with (the first checkpoint's, as
    :func:`evaluation.frontier_config.resolve_config` picks it) and, per other router, the keys
    that differ from it, so a reader can tell a benign difference (``benchmark.name`` of a
    transfer run) from one that changes what the router was trained to see.
    """
    # one config per checkpoint file, but one record per (checkpoint, λ) for a λ-conditioned router
    paths = list(dict.fromkeys(c["path"] for c in ckpts))
    known = [(c, path) for c, path in zip(router_cfgs, paths, strict=True) if c]
    if not known:
        return
    (first, first_path), others = known[0], known[1:]
    lines = []
    for cfg, path in others:
        diffs = record_config_differences(first, cfg)
        if diffs:
            shown = ", ".join(diffs[:8]) + (f", … ({len(diffs)} keys)" if len(diffs) > 8 else "")
            lines.append(f"  {path}: {shown}")
    if not lines:
        return
    print(
        "warning: the routers were trained with different pipelines; every router is evaluated with the "
        f"config recorded by {first_path} (then --benchmark/--set). Keys that differ from it:\n"
        + "\n".join(lines)
    )


def _val_items(args: argparse.Namespace, cfg: dict[str, Any], components: Any) -> list[Any]:
    val_cfg = copy.deepcopy(cfg)
    val_cfg["question_bank"]["limit"] = args.val_limit
    return question_bank_from(val_cfg, args.val_split, components.encoder, progress=not args.no_progress)


def _data_checksums(cfg: dict[str, Any], benchmark: str) -> dict[str, str]:
    try:
        named = cfg.get("benchmark")
        opts = dict((named.get("options") or {}) if isinstance(named, dict) else {})
        return data_checksums(get_benchmark(benchmark, data_dir=cfg.get("data_dir"), **opts).data_files())
    except (KeyError, ValueError, FileNotFoundError):
        return {}  # e.g. the synthetic test benchmark, which has no data files


def run_with(
    args: argparse.Namespace,
    cfg: dict[str, Any],
    components: Any,
    items: list[Any],
    routers: list[SystemSpec],
    ckpts: list[dict[str, Any]],
    val_items: Any,
) -> int:
    """Everything after the components and the test bank exist (tests call this with fakes)."""
    args.concurrency = resolve_concurrency(args.concurrency, components)
    bench = str(components.benchmark)
    out = Path(args.out or PROJECT_ROOT / "runs" / "frontier" / f"{bench}-{args.split}")
    # Read the expected tables before anything runs: a bad path fails now, and --expect may be --out.
    expected = load_expected(args.expect) if args.expect else None
    checksums = _data_checksums(cfg, bench)
    fp = record_fingerprint(cfg, checksums)
    refuse_other_numerics(out, fp, engines_of(components))
    # A run killed mid-write (kill -9) left its temporary record files: remove those of dead writers.
    for path in remove_stale_temporaries(out / "records"):
        print(f"removed the stale temporary {path} (its writer is gone)")
    qids = [str(it.question.question_id) for it in items]
    if len(set(qids)) != len(qids):
        raise ValueError(f"question bank of {bench}/{args.split} has duplicate question ids")
    progress = not args.no_progress

    def search() -> Any:
        vitems = val_items()
        store_dir = out / "records" / fp / args.val_split

        def evaluate(tiers: TierTuple) -> tuple[float, float]:
            fr = fixed_run(tiers)
            recs = evaluate_run(
                fr,
                vitems,
                components,
                RecordStore(store_dir / f"{safe_id(fr.run_id)}.jsonl"),
                chunk=args.chunk,
                progress=progress,
                desc=f"val {tiers_label(tiers)}",
                concurrency=args.concurrency,
            )
            return mean_of(recs, args.quality), mean_of(recs, args.cost)

        cands = [parse_tiers(c) for c in args.best_fixed_candidates.split(";") if c.strip()]
        return search_fixed_tiers(
            evaluate, budget_frac=args.best_fixed_budget, method=args.best_fixed_search, candidates=cands
        )

    # Fail in a second, not after the baselines: every router must fit these components
    # (encoder, observation spec).
    for spec in routers:
        for run in spec.runs:
            if run.check is not None:
                run.check(components)
    systems = [*routers, *baseline_systems(args, search)]
    runs = evaluate_systems(
        systems, items, components, out / "records" / fp / args.split, chunk=args.chunk, progress=progress,
        concurrency=args.concurrency,
    )  # fmt: skip
    record_commits = sorted(
        {str(r.get("git_commit", "unknown")) for sr in runs for run in sr.runs for r in run.records}
    )
    runs.append(oracle_system(runs, qids, quality=args.quality, cost=args.cost))
    summaries = [summarise(s, qids, n_boot=args.n_boot, seed=args.boot_seed, alpha=args.alpha) for s in runs]
    report = analyse(
        summaries,
        quality=args.quality,
        cost=args.cost,
        reference=args.reference,
        quality_frac=args.quality_frac,
        cost_frac=args.cost_frac,
        alpha=args.alpha,
    )
    judge = components.judge
    judge_hash = getattr(judge, "prompt_hash", None) if judge is not None else None
    judge_protocol = getattr(getattr(judge, "protocol", None), "name", None)
    meta = {
        **run_metadata(cfg),
        "benchmark": bench,
        "split": args.split,
        "limit": args.limit,
        "n_questions": len(qids),
        "question_ids_sha256": hashlib.sha256("\n".join(qids).encode()).hexdigest(),
        # The table's questions, in its order: records beyond them (a study block still running) are not its.
        "question_ids": list(qids),
        "data_checksums": checksums,
        "record_fingerprint": fp,
        "record_commits": record_commits,
        "checkpoints": ckpts,
        "engines": engines_of(components),
        "judge_prompt_hash": judge_hash,
        "judge_protocol": judge_protocol,
        "cache_pack": "; ".join(r.line({p.pack.name for p in packs}) for r in packs)
        if (packs := getattr(components, "cache_pack", None))
        else None,
        "bootstrap": {
            "n_boot": args.n_boot,
            "seed": args.boot_seed,
            "alpha": args.alpha,
            "method": "percentile; hierarchical over seeds then questions; paired across systems",
        },
        "options": {k: v for k, v in vars(args).items() if k != "func"},
    }
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "metadata.json", json_safe(meta))
    write_csv(report, out / "frontier.csv")
    if report.router_metrics is not None:
        write_router_metrics_csv(report.router_metrics, out / "router_metrics.csv")
    write_json(report, out / "frontier.json", meta)
    title = f"{bench} / {args.split}: {len(qids)} questions" + (
        f" ({'stratified ' if args.stratified else ''}limit {args.limit})" if args.limit else ""
    )
    plot_frontier(report, out / "frontier.png", title=title)
    print(f"\n{title}\n")
    print(format_table(report))
    print()
    print(format_category_table(report))
    print()
    if judge is not None:
        # F1 and the judge side by side, per category, with the verdicts that failed counted.
        print(format_category_table(report, "judge"))
        print(
            f"judge protocol {judge_protocol} (prompt {judge_hash}); failed verdicts (share): "
            + ", ".join(f"{s.name} {s.metrics['judge_failed'].mean:.1%}" for s in summaries)
        )
        print()
    if report.router_metrics is not None:
        print("\n".join(format_router_metrics(report.router_metrics)))
        print()
    print("\n".join(verdict_lines(report)))
    print(f"\nwrote {out}/: frontier.csv, router_metrics.csv, frontier.json, frontier.png, metadata.json")
    print(cache_summary_line(getattr(components, "cache", None)))
    bad = [s.name for s in summaries if not math.isfinite(s.metrics[args.quality].mean)]
    if bad:
        print(f"warning: no {args.quality} values for {bad} (is the judge enabled?)")
    if expected is None:
        return 0
    diffs = compare_run(expected, out)
    print("\n".join(format_diffs(diffs, args.expect)))
    return int(not all(d.ok for d in diffs))
