r"""``python evaluate.py routability``: could a router that sees the question beat the best fixed path?

    python evaluate.py routability --benchmark longmemeval_oracle \\
        --records results/frontier/longmemeval_oracle-test-cpu_quality-40q/records/<fingerprint>/test \\
        --k 5,10,20 --prices 0,0.05 --out results/routability/longmemeval_oracle-test-40q

Reads the fixed-path records a frontier run left (no LLM call), embeds the questions with the
router's encoder (and, with ``--context``, the evidence retrieved for them) and prints, per learner
and price, the leave-one-out router against the best fixed path in hindsight and its shuffled control
(see :mod:`evaluation.routability`).
"""

from __future__ import annotations

import argparse
import copy
import csv
import io
import itertools
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.base import SPLITS, Benchmark
from benchmarks.registry import get_benchmark
from common.atomic import atomic_write_json, atomic_write_text
from common.provenance import run_metadata
from envs.question_bank import question_bank_from
from evaluation.bootstrap import DEFAULT_N_BOOT
from evaluation.cli_options import add_option_argument, add_question_text_arguments, comma_list, parse_options
from evaluation.frontier_runner import table_metadata_path
from evaluation.routability import RoutabilityRow, load_paths, routability
from memory.encoder import get_encoder, unit_rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the command's options."""
    a = parser.add_argument
    add_question_text_arguments(parser)
    a(
        "--records",
        required=True,
        help="a frontier records dir: <frontier --out>/records/<fingerprint>/<split>",
    )
    a("--split", default=None, help="split of the records (default: the records dir's name)")
    a(
        "--paths",
        default=None,
        help="comma list of record run ids (default: every fixed-*.jsonl in --records)",
    )
    a("--k", default="5,10,20", help="comma list of neighbour counts")
    a(
        "--ridge",
        default="1,10",
        help="comma list of ridge penalties, one ridge router per input and value ('' = none)",
    )
    a("--prices", default="0", help="comma list of F1 an all-HIGH-sized cost is worth (0 = quality only)")
    a("--no-category", action="store_true", help="skip the category router")
    a(
        "--context",
        action="store_true",
        help="add kNN routers over question + retrieved evidence (rebuilds the frontier run's question bank)",
    )
    a("--permutations", type=int, default=200, help="shuffles of each learner input for its control")
    a("--n-boot", type=int, default=DEFAULT_N_BOOT, help="bootstrap replicates")
    a("--out", default=None, help="write routability.{txt,json,csv,png} here")
    add_option_argument(parser)


def question_index(bench: Benchmark, split: str) -> dict[str, tuple[str, str]]:
    """``{question_id: (question text, category)}`` of one benchmark split."""
    return {q.question_id: (q.question, str(q.category)) for s in bench.load(split) for q in s.questions}


#: Printed under the table: how to read its columns.
_LEGEND = (
    "({n} questions; leave-one-out routers: kNN question = over question embeddings, kNN context = "
    "over question + retrieved-evidence embeddings, ridge = a linear model of each path's F1 on the same "
    "input, category = the best path of the question's "
    "category; cost = module cost / the costliest path's; best fixed = the best path in hindsight on "
    "these questions; router − fixed, control and captured are in objective F1 − price·cost (= F1 at "
    "price 0), paired, 95% bootstrap CIs; control = the router with its input shuffled across "
    "questions (2.5–97.5% of the permutations), p = share of permutations scoring >= the router; "
    "captured = share of the oracle's gain over best fixed)"
)


def context_features(
    records: Path, split: str, qids: list[str], question: np.ndarray, encoder: Any, data_dir: str | None
) -> np.ndarray:
    """Per question, its embedding joined with the mean embedding of the evidence its memory retrieved.

    The evidence is the question bank of the frontier run that wrote ``records`` (its
    ``metadata.json`` config: same memory, same k), i.e. the text the first routed module gets,
    the part of a router's observation the question alone does not show. Both halves are unit
    vectors, so cosine similarity weighs question and evidence equally.

    Raises:
        SystemExit: If the frontier's ``metadata.json`` is missing or a question is not in its bank.
    """
    meta_path = table_metadata_path(records)
    if not meta_path.is_file():
        raise SystemExit(
            f"error: --context needs the frontier run's config, {meta_path} (records/<fp>/<split> of a "
            "frontier --out dir); drop --context to use the question alone"
        )
    cfg = copy.deepcopy(json.loads(meta_path.read_text(encoding="utf-8"))["config"])
    cfg["data_dir"] = data_dir  # the machine that wrote the records may keep its data elsewhere
    cfg.setdefault("question_bank", {}).update(limit=None, max_samples=None)
    items = {it.question.question_id: it for it in question_bank_from(cfg, split, encoder, progress=False)}
    lost = [q for q in qids if q not in items or not items[q].evidence]
    if lost:
        raise SystemExit(
            f"error: {len(lost)} questions have no retrieved evidence in the bank (first: {lost[:3]})"
        )
    texts = [[e.text for e in items[q].evidence] for q in qids]
    flat = unit_rows(encoder.encode([t for ts in texts for t in ts]))
    bounds = np.cumsum([0, *(len(ts) for ts in texts)])
    evidence = unit_rows(np.stack([flat[a:b].mean(axis=0) for a, b in itertools.pairwise(bounds)]))
    return np.concatenate([question, evidence], axis=1)


def format_rows(rows: list[RoutabilityRow], n: int) -> str:
    """The printed table, one line per (learner, price), then each row's path mix."""
    head = (
        f"{'learner':<26} {'price':>6}  {'router F1 [CI]':<22} {'cost':>6}  "
        f"{'best fixed':<10} {'F1':>6} {'cost':>6}  {'router − fixed [CI]':<24} {'+/−':>6}  "
        f"{'shuffled control':<22} {'p':>5}  {'oracle':>6}  captured"
    )
    lines = [head]
    for r in rows:
        lines.append(
            f"{r.learner:<26} {r.price:>6g}  {_ci(r.router.mean, r.router.lo, r.router.hi):<22} "
            f"{r.router_cost_share:>6.3f}  {r.fixed_path:<10} {r.fixed.mean:>6.3f} "
            f"{r.fixed_cost_share:>6.3f}  "
            f"{_ci(r.diff.mean, r.diff.lo, r.diff.hi, signed=True):<24} {f'{r.better}/{r.worse}':>6}  "
            f"{_ci(r.control_mean, r.control_lo, r.control_hi):<22} {r.control_p:>5.2f}  "
            f"{r.oracle_f1:>6.3f}  {r.captured:+.2f}"
        )
    lines.append(_LEGEND.format(n=n))
    for r in rows:
        mix = ", ".join(f"{label} ×{c}" for label, c in r.router_paths.items())
        lines.append(f"{r.learner} price={r.price:g}: router paths {mix}")
    return "\n".join(lines)


def _ci(mean: float, lo: float, hi: float, signed: bool = False) -> str:
    f = "{:+.3f}" if signed else "{:.3f}"
    return f"{f.format(mean)} [{f.format(lo)},{f.format(hi)}]"


def verdict(rows: list[RoutabilityRow]) -> str:
    """One plain sentence per price: does the question embedding carry a signal, and is it worth it?"""
    out = []
    for price in dict.fromkeys(r.price for r in rows):
        at = [r for r in rows if r.price == price]
        wins = ", ".join(r.learner for r in at if r.beats_fixed and r.signal)
        signal = ", ".join(r.learner for r in at if r.signal)
        best = min(at, key=lambda r: r.control_p)
        # Each learner is one test: with m of them, about 0.05·m pass p < 0.05 by chance alone.
        strict = 0.05 / len(at)
        multiple = (
            f" ({len(at)} learners tested: Bonferroni keeps only p < {strict:.4f}"
            f"{', which ' + best.learner + ' meets' if best.control_p < strict else ', which none meets'})"
        )
        d = best.diff
        detail = (
            f"best: {best.learner}, router − fixed {d.mean:+.3f} [{d.lo:+.3f}, {d.hi:+.3f}], "
            f"control p = {best.control_p:.2f}"
        )
        if wins:
            text = (
                f"{wins} beats both its shuffled control (p < 0.05) and the best "
                f"fixed path ({best.fixed_path}): the question tells these questions apart, so a router "
                "that stays at a fixed path leaves quality behind." + multiple
            )
        elif signal:
            text = (
                f"{signal} beats its shuffled control (p < 0.05) but not the best "
                f"fixed path ({best.fixed_path}) with its whole interval ({detail}): a signal, too weak "
                "here to pay for a router." + multiple
            )
        else:
            text = (
                f"no learner beats its shuffled control ({detail}): on these questions nothing the learners "
                "see says anything detectable about which path pays."
            )
        out.append(f"price {price:g}: {text}")
    return "\n".join(out)


def write_outputs(out: Path, rows: list[RoutabilityRow], meta: dict[str, Any], report: str) -> list[str]:
    """``routability.json`` (rows + metadata), ``.csv``, ``.png`` and ``.txt`` (the printed report)."""
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "routability.txt", report + "\n")
    dicts = [r.as_dict() for r in rows]
    atomic_write_json(out / "routability.json", {"rows": dicts, **meta})
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(dicts[0]))
    writer.writeheader()
    for d in dicts:
        writer.writerow({k: json.dumps(v) if isinstance(v, dict) else v for k, v in d.items()})
    atomic_write_text(out / "routability.csv", buf.getvalue())
    _plot(out / "routability.png", rows, meta)
    return ["routability.json", "routability.csv", "routability.png", "routability.txt"]


def _plot(path: Path, rows: list[RoutabilityRow], meta: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for p in meta["paths"]:
        ax.scatter(p["cost_share"], p["f1"], marker="s", color="grey")
        ax.annotate(
            p["label"], (p["cost_share"], p["f1"]), fontsize=7, xytext=(3, 3), textcoords="offset points"
        )
    for learner in dict.fromkeys(r.learner for r in rows):
        at = [r for r in rows if r.learner == learner]
        ax.errorbar(
            [r.router_cost_share for r in at],
            [r.router.mean for r in at],
            yerr=[[r.router.mean - r.router.lo for r in at], [r.router.hi - r.router.mean for r in at]],
            fmt="o-",
            capsize=3,
            label=f"{learner} router",
        )
    ax.scatter(
        [r.oracle_cost_share for r in rows], [r.oracle_f1 for r in rows], marker="*", s=90, label="oracle"
    )
    ax.scatter(
        [r.router_cost_share for r in rows],
        [r.control_mean for r in rows],
        marker="x",
        color="black",
        label="shuffled control (at the router's cost)",
    )
    ax.set_xscale("symlog", linthresh=1e-3)
    ax.set_xlabel("module cost / costliest path")
    ax.set_ylabel("F1")
    ax.set_title(f"Routability: {meta['benchmark']} {meta['split']} ({meta['n_questions']} questions)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run(args: argparse.Namespace) -> int:
    """Load records and questions, embed, compare, print and write; returns 0."""
    t0 = time.perf_counter()
    records = Path(args.records)
    split = args.split or (records.name if records.name in SPLITS else None)
    if split is None:
        raise SystemExit(f"--split is needed: the records dir {records} is not named after a split {SPLITS}")
    names = comma_list(args.paths, "paths", str) if args.paths else None
    try:
        qids, paths = load_paths(records, names)
    except (FileNotFoundError, ValueError) as exc:  # bad input: the message names file and field
        raise SystemExit(f"error: {exc}") from None
    bench = get_benchmark(args.benchmark, data_dir=args.data_dir, **parse_options(args.option))
    index = question_index(bench, split)
    missing = [q for q in qids if q not in index]
    if missing:
        raise SystemExit(
            f"error: {len(missing)} of the {len(qids)} record question ids are not in "
            f"{args.benchmark}/{split} (first: {missing[:3]}); wrong --benchmark or --split?"
        )
    encoder = get_encoder(args.encoder)
    inputs = {"question": unit_rows(encoder.encode([index[q][0] for q in qids]))}
    if args.context:
        inputs["context"] = context_features(records, split, qids, inputs["question"], encoder, args.data_dir)
    ks = comma_list(args.k, "k", int)
    rows = routability(
        paths,
        inputs,
        ks=ks,
        ridge_alphas=comma_list(args.ridge, "ridge", float) if args.ridge.strip() else (),
        categories=None if args.no_category else [index[q][1] for q in qids],
        prices=comma_list(args.prices, "prices", float),
        n_permutations=args.permutations,
        n_boot=args.n_boot,
    )
    ref = max(float(p.cost.mean()) for p in paths)
    report = "\n".join(
        [
            f"{len(qids)} questions × {len(paths)} fixed paths from {records}:",
            *(f"  {p.label}  F1 {p.f1.mean():.3f}  cost share {p.cost.mean() / ref:.4f}" for p in paths),
            format_rows(rows, len(qids)),
            verdict(rows),
        ]
    )
    print(report)
    if args.out:
        meta = {
            **run_metadata(data_files=bench.data_files()),
            "options": vars(args),
            "benchmark": args.benchmark,
            "split": split,
            "records": str(records),
            "encoder": args.encoder,
            "n_questions": len(qids),
            "question_ids": qids,
            "paths": [
                {
                    "name": p.name,
                    "label": p.label,
                    "f1": float(p.f1.mean()),
                    "cost_share": float(p.cost.mean() / ref),
                }
                for p in paths
            ],
            "seconds": time.perf_counter() - t0,
        }
        written = write_outputs(Path(args.out), rows, meta, report)
        print(f"wrote {args.out}/: {', '.join(written)}")
    return 0
