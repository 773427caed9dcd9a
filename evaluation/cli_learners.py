r"""``python evaluate.py learners``: routers fitted to outcome tables, guarded on validation, judged on test.

    python evaluate.py learners --benchmark locomo \\
        --val-records results/outcomes/locomo-val/records/<fingerprint>/val \\
        --test-records results/outcomes/locomo-test/records/<fingerprint>/test \\
        --k 5,10,20 --ridge 1,10 --ppo-seeds 0,1,2,3,4 --prices 0,0.05 --out results/learners/locomo

No LLM call: the fixed-path records of both splits (``scripts/powered_study.py``) are the outcome tables, the
questions are embedded with the router's encoder (see :mod:`evaluation.outcome_learners`). PPO trains on the
tables (:mod:`policies.table_ppo`), one router per seed and setting; the report gives each seed's row and,
per setting, the spread over the seeds.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.registry import get_benchmark
from common.atomic import atomic_write_json, atomic_write_text
from common.provenance import run_metadata
from evaluation.bootstrap import DEFAULT_N_BOOT
from evaluation.cli_options import add_option_argument, add_question_text_arguments, comma_list, parse_options
from evaluation.cli_routability import question_index
from evaluation.frontier_runner import table_metadata_path
from evaluation.learner_export import ExportError, export_shipped
from evaluation.learners_report import format_report
from evaluation.outcome_learners import (
    KNN,
    AnyLearner,
    BestFixed,
    OutcomeTable,
    PlugIn,
    Shipped,
    common_paths,
    learn_and_judge,
    ref_cost_of,
)
from memory.encoder import get_encoder
from policies.table_ppo import TablePPO, TablePPOSettings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the command's options."""
    a = parser.add_argument
    add_question_text_arguments(parser)
    a("--val-records", required=True, help="validation records dir: <frontier --out>/records/<fp>/<split>")
    a("--test-records", required=True, help="test records dir (the same paths, or more)")
    a("--val-split", default="val", help="split of the validation records")
    a("--test-split", default="test", help="split of the test records")
    a("--k", default="5,10,20", help="comma list of kNN neighbour counts ('' = no kNN)")
    a("--ridge", default="1,10", help="comma list of plug-in ridge penalties ('' = none)")
    a("--ppo-seeds", default="0,1,2,3,4", help="comma list of PPO seeds ('' = no PPO)")
    a(
        "--ppo",
        choices=("both", "per-price", "conditioned"),
        default="both",
        help="PPO settings: one router per price, one λ-conditioned router for every price, or both",
    )
    a("--ppo-timesteps", type=int, default=TablePPOSettings.timesteps, help="questions PPO draws per router")
    a(
        "--prices",
        default="0",
        help="comma list of F1 a costliest-path-sized cost is worth (0 = quality only)",
    )
    a("--folds", type=int, default=5, help="cross-fitting folds of the validation guard")
    a("--n-boot", type=int, default=DEFAULT_N_BOOT, help="bootstrap replicates")
    a("--out", default=None, help="write learners.{txt,json} here")
    a("--export", default=None, help="write what ships at --export-price here, as a router (Router.load)")
    a("--export-price", type=float, default=None, help="the price --export ships at (default: the first)")
    add_option_argument(parser)


def ppo_learners(args: argparse.Namespace) -> list[AnyLearner]:
    """The PPO routers ``--ppo-seeds``, ``--ppo`` and ``--ppo-timesteps`` ask for.

    Raises:
        SystemExit: A timestep budget below 1, naming it.
    """
    seeds = comma_list(args.ppo_seeds, "ppo-seeds", int) if args.ppo_seeds.strip() else []
    try:
        settings = TablePPOSettings(timesteps=args.ppo_timesteps)
    except ValueError as exc:
        raise SystemExit(f"error: --ppo-timesteps: {exc}") from None
    modes = {"both": (False, True), "per-price": (False,), "conditioned": (True,)}[args.ppo]
    return [TablePPO(seed, conditioned, settings) for conditioned in modes for seed in seeds]


def _embed(encoder: Any, bench: Any, split: str, qids: list[str], what: str) -> np.ndarray:
    index = question_index(bench, split)
    missing = [q for q in qids if q not in index]
    if missing:
        raise SystemExit(
            f"error: {len(missing)} of the {len(qids)} {what} question ids are not in {split} "
            f"(first: {missing[:3]}); wrong --benchmark or split?"
        )
    return np.asarray(encoder.encode([index[q][0] for q in qids]), dtype=np.float64)


def export(
    args: argparse.Namespace,
    shipped: list[Shipped],
    learners: list[AnyLearner],
    x_val: np.ndarray,
    val: OutcomeTable,
    encoder: Any,
) -> None:
    """``--export``: write what ships at ``--export-price`` as a router, with the table's pipeline config.

    Raises:
        SystemExit: A price not among ``--prices``, or a router that cannot be exported, naming why.
    """
    price = shipped[0].price if args.export_price is None else float(args.export_price)
    verdict = next((s for s in shipped if s.price == price), None)
    if verdict is None:
        raise SystemExit(f"error: --export-price {price:g} is not among --prices {args.prices}")
    table_meta = table_metadata_path(args.val_records)
    meta: dict[str, Any] = {
        "encoder": getattr(encoder, "name", args.encoder),
        # Router.config: the pipeline the tables were made with, so make_components rebuilds it
        "config": json.loads(table_meta.read_text()).get("config") if table_meta.is_file() else None,
        "run_name": f"learners-{args.benchmark}-price{price:g}",
        "val_records": str(args.val_records),
    }
    try:
        dest = export_shipped(verdict, learners, x_val, val, ref_cost_of(val), encoder.dim, args.export, meta)
    except ExportError as exc:
        raise SystemExit(f"error: --export: {exc}") from None
    what = verdict.router or f"the fixed path {verdict.fixed_path}"
    print(f"exported {what} (price {price:g}) to {dest}: Router.load reads it")


def run(args: argparse.Namespace) -> int:
    """Load both tables, embed, learn, guard, judge, print and write; returns 0."""
    t0 = time.perf_counter()
    try:
        val, test = OutcomeTable.load(args.val_records), OutcomeTable.load(args.test_records)
        paths = common_paths(val, test)
        if len(paths) < 2:
            raise ValueError(f"the validation and test tables share {len(paths)} paths; need 2 or more")
        val, test = val.restricted(paths), test.restricted(paths)
    except (FileNotFoundError, ValueError) as exc:
        raise SystemExit(f"error: {exc}") from None
    bench = get_benchmark(args.benchmark, data_dir=args.data_dir, **parse_options(args.option))
    encoder = get_encoder(args.encoder)
    x_val = _embed(encoder, bench, args.val_split, val.qids, "validation")
    x_test = _embed(encoder, bench, args.test_split, test.qids, "test")
    learners: list[AnyLearner] = [BestFixed()]
    learners += [KNN(k) for k in (comma_list(args.k, "k", int) if args.k.strip() else [])]
    learners += [PlugIn(a) for a in (comma_list(args.ridge, "ridge", float) if args.ridge.strip() else [])]
    learners += ppo_learners(args)
    rows, shipped = learn_and_judge(
        learners,
        x_val,
        val,
        x_test,
        test,
        prices=comma_list(args.prices, "prices", float),
        folds=args.folds,
        n_boot=args.n_boot,
    )
    report = format_report(rows, shipped, len(val.qids), len(test.qids), paths)
    print(report)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out / "learners.txt", report + "\n")
        meta = {
            **run_metadata(data_files=bench.data_files()),
            "options": {k: v for k, v in vars(args).items() if k != "func"},
            "paths": paths,
            "val_questions": val.qids,
            "test_questions": test.qids,
            "seconds": time.perf_counter() - t0,
        }
        rows_json = [r.as_dict() for r in rows]
        atomic_write_json(
            out / "learners.json", {"rows": rows_json, "shipped": [s.as_dict() for s in shipped], **meta}
        )
        print(f"wrote {out}/: learners.txt, learners.json")
    if args.export:
        export(args, shipped, learners, x_val, val, encoder)
    return 0
