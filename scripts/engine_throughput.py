"""``scripts/bench_engines.py throughput``: many questions in flight, engine by engine.

Every cell (``ENGINE@N``: an engine at a concurrency) runs the same questions with N in flight on a call
cache of its own, empty at the start; cells are interleaved within a repeat and a finished cell never runs
again, so a stopped run resumes. The report groups the records by workload (a policy on a number of
questions) and takes ratios only within one repeat, measured side by side.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from engine_bench_common import (
    append_jsonl,
    engine_config,
    engine_specs,
    paired_ci,
    quality_config,
    read_jsonl,
)

DISPATCHES = ("direct", "lockstep")
#: ``per-path``: with ``--policy paths``, one queue per path (each path's questions drain before the next
#: path's start) instead of one queue for all (``evaluation.frontier_runner.evaluate_runs``).
QUEUES = ("per-path",)


def parse_cells(text: str) -> list[tuple[str, int, str | None, str]]:
    """``"xllamacpp@1,native@4:lockstep"`` -> ``[("xllamacpp", 1, None, "shared"), ("native", 4, "lockstep",
    "shared")]``.

    A cell may force the lockstep barrier (``:lockstep``) on an engine that takes concurrent calls
    (llama.cpp slots); without it each engine gets its own default (``LLMBackend.concurrent_calls``).
    ``:per-path`` runs a ``--policy paths`` workload one path after the other, each path its own queue.

    Raises:
        SystemExit: A cell that is not ``ENGINE@N[:DISPATCH][:per-path]`` with a known engine and N >= 1.
    """
    cells: list[tuple[str, int, str | None, str]] = []
    known = engine_specs("qwen2.5-1.5b", 1)
    for part in (p.strip() for p in text.split(",") if p.strip()):
        head, *mods = part.split(":")
        engine, _, n = head.partition("@")
        dispatch = [m for m in mods if m in DISPATCHES]
        queue = [m for m in mods if m in QUEUES]
        if (
            engine not in known or not n.isdigit() or int(n) < 1
            or len(dispatch) + len(queue) != len(mods) or len(dispatch) > 1 or len(queue) > 1
        ):  # fmt: skip
            raise SystemExit(
                f"--cells {part!r}: expected ENGINE@N[:DISPATCH][:per-path] with N >= 1, ENGINE one of "
                f"{sorted(known)} and DISPATCH one of {DISPATCHES}"
            )
        cells.append((engine, int(n), dispatch[0] if dispatch else None, queue[0] if queue else "shared"))
    return cells


#: Engines whose backend takes concurrent calls at N > 1 (llama.cpp with N slots); rows written before
#: the dispatch was recorded ran them behind the lockstep barrier.
_DIRECT_ENGINES = ("xllamacpp", "native")


def cell_label(engine: str, n: int, dispatch: str, queue: str = "shared") -> str:
    """How a cell is named in the records and the table: ``native@4``, or ``native@4:lockstep`` where
    an engine that takes concurrent calls was put behind the barrier (N > 1 only: at N = 1 both are one),
    and ``:per-path`` where a paths workload ran one queue per path."""
    label = f"{engine}@{n}"
    if dispatch == "lockstep" and n > 1 and engine in _DIRECT_ENGINES:
        label += ":lockstep"
    return label + (f":{queue}" if queue != "shared" else "")


def row_label(row: dict[str, Any]) -> str:
    """The cell label of a throughput record (older records, without ``dispatch``, ran lockstep)."""
    return cell_label(
        row["engine"], int(row["concurrency"]), row.get("dispatch", "lockstep"), row.get("queue", "shared")
    )


def workload(policy: str, limit: int) -> str:
    """A workload's name: a policy on a number of questions (per path). Cells compare only within one
    workload: a paths workload of 16 questions at N = 16 fills every batch on either queue, one of 24 does
    not."""
    return f"{policy} on {limit} questions"


def workload_label(row: dict[str, Any]) -> str:
    """The :func:`workload` a throughput record measured (older records, without ``limit``, count their
    distinct questions)."""
    return workload(row["policy"], row.get("limit") or len({q["question_id"] for q in row["per_question"]}))


def workload_runs(policy: str, paths: str, seed: int) -> list[Any]:
    """The run specs every cell evaluates on each question: all-HIGH, the seeded random policy, or the
    fixed ``paths`` (frontier baseline names, e.g. the powered study's ``all-low,all-mid,all-high,
    single-module``)."""
    from evaluation.frontier_runner import fixed_run, random_run
    from evaluation.frontier_systems import fixed_path_runs
    from modules.tier import MODULE_ORDER, Tier

    if policy == "all-high":
        return [fixed_run((Tier.HIGH,) * len(MODULE_ORDER))]
    if policy == "random":
        return [random_run(seed)]
    try:
        return fixed_path_runs(paths)
    except ValueError as exc:
        raise SystemExit(f"--paths: {exc}") from None


def run_throughput(args: argparse.Namespace) -> None:
    """Every cell (engine at a concurrency) over the same questions, interleaved, resumable."""
    from common.cpu import cpu_id
    from envs.components import make_components
    from envs.question_bank import question_bank_from
    from envs.rollout import run_episode
    from evaluation.headroom import stratified
    from scale.batched_rollout import map_batched
    from scale.batching import BatchStats

    base = quality_config(args)
    out = Path(args.out)
    work = out / "throughput"
    work.mkdir(parents=True, exist_ok=True)
    records_path = out / "throughput.jsonl"
    done = {(row_label(r), workload_label(r), r["repeat"]) for r in read_jsonl(records_path)}
    cells = parse_cells(args.cells)
    specs = engine_specs(args.model, args.threads)
    runs = workload_runs(args.policy, args.paths, args.seed)
    policy = f"paths:{args.paths}" if args.policy == "paths" else args.policy
    measured = workload(policy, args.limit)
    if any(queue != "shared" for *_, queue in cells) and len(runs) < 2:
        raise SystemExit("--cells ...:per-path needs --policy paths (one queue per path of several)")
    items = None
    cpu = cpu_id()
    for rep in range(args.repeats):
        for engine, n, forced, queue in cells:
            spec = dict(specs[engine])
            dispatch = forced or ("direct" if engine in _DIRECT_ENGINES and n > 1 else "lockstep")
            cell = cell_label(engine, n, dispatch, queue)
            if (cell, measured, rep) in done:
                continue
            if spec["name"] == "llamacpp":
                spec["n_parallel"] = n  # llama.cpp serves N requests at once only from N slots
            calls = work / f"calls-{cell}-{args.policy}-r{rep}.sqlite"
            for stale in work.glob(f"{calls.name}*"):  # a cell stopped midway starts again, cold
                stale.unlink()
            print(f"loading {cell} (repeat {rep}) ...", flush=True)
            comps = make_components(engine_config(base, spec, calls))
            if items is None:
                bank = question_bank_from(base, args.split, comps.encoder)
                items = stratified(bank, args.limit, lambda it: str(it.question.category))
            backends = {id(llm.backend): llm.backend for llm in comps.llms.values()}
            if dispatch == "lockstep":
                for backend in backends.values():
                    backend.concurrent_calls = False
            if dispatch == "direct" and not all(b.concurrent_calls for b in backends.values()):
                raise SystemExit(f"{cell}: {engine} takes no concurrent calls; use {engine}@{n}:lockstep")
            stats = BatchStats()
            # One queue of (path, question) episodes, path after path (what `frontier` runs), or a queue
            # per path.
            tasks = [(run, it) for run in runs for it in items]
            step = len(tasks) if queue == "shared" else len(items)
            queues = [tasks[i : i + step] for i in range(0, len(tasks), step)]
            t = time.perf_counter()
            records = [
                rec
                for q in queues
                for rec in map_batched(
                    lambda task, comps=comps: run_episode(task[1], task[0].decide_for(task[1]), comps), q, n,
                    progress=True, desc=cell, stats=stats,
                )
            ]  # fmt: skip
            wall = time.perf_counter() - t
            caches = [b.prefix_cache for b in backends.values() if getattr(b, "prefix_cache", None)]
            rec = {
                "cell": cell, "engine": engine, "concurrency": n, "dispatch": dispatch, "queue": queue,
                "policy": policy, "limit": args.limit, "repeat": rep,
                "questions": len(records), "wall_s": wall, "q_per_hour": 3600 * len(records) / wall,
                "mean_batch": stats.mean_batch, "batches": stats.batches,
                "prompt_tokens": sum(c.prompt for c in caches),
                "cached_tokens": sum(c.cached for c in caches),
                "f1": statistics.fmean(r.f1 for r in records), "model": args.model, "cpu": cpu,
                "per_question": [
                    {"question_id": r.question_id, "f1": r.f1, "prediction": r.prediction,
                     "failures": r.failures} | ({"path": run.run_id} if len(runs) > 1 else {})
                    for (run, _), r in zip(tasks, records, strict=True)
                ],
            }  # fmt: skip
            append_jsonl(records_path, rec)
            print(f"[repeat {rep}] {cell:18s} {wall:8.1f} s  {rec['q_per_hour']:6.1f} q/h  batch "
                  f"{stats.mean_batch:.2f}  F1 {rec['f1']:.3f}", flush=True)  # fmt: skip
            comps.close()


def throughput_report(rows: list[dict[str, Any]], reference: str = "xllamacpp@1") -> dict[str, Any]:
    """Per workload (policy and questions, :func:`workload_label`) and cell: median wall and q/h over
    repeats, speed-up against ``reference`` (median of the per-repeat ratios: measured side by side), mean
    batch, prefix-cache share, F1 and its paired interval against the reference on the same questions (and
    paths). A workload whose cells lack ``reference`` (a paths workload, too dear for the wheel) is compared
    with its first cell; each row names its reference."""
    by_workload: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_workload.setdefault(workload_label(r), []).append(r)
    out: dict[str, Any] = {}
    for name, mine in sorted(by_workload.items()):
        labels = [row_label(r) for r in mine]
        ref_cell = reference if reference in labels else labels[0]
        ref = {r["repeat"]: r for r in mine if row_label(r) == ref_cell}
        table = {}
        for cell in dict.fromkeys(row_label(r) for r in mine):
            runs = [r for r in mine if row_label(r) == cell]
            ratios = [ref[r["repeat"]]["wall_s"] / r["wall_s"] for r in runs if r["repeat"] in ref]
            prompt = sum(r["prompt_tokens"] for r in runs)
            row: dict[str, Any] = {
                "repeats": len(runs),
                "questions": runs[0]["questions"],
                "median_wall_s": statistics.median(r["wall_s"] for r in runs),
                "q_per_hour": statistics.median(r["q_per_hour"] for r in runs),
                "speedup_vs_reference": statistics.median(ratios) if ratios else None,
                "mean_batch": statistics.fmean(r["mean_batch"] for r in runs),
                "cached_share": sum(r["cached_tokens"] for r in runs) / prompt if prompt else None,
                "f1": statistics.fmean(r["f1"] for r in runs),
                "reference": ref_cell,
            }  # fmt: skip
            if ref:
                # A paths workload's records are (path, question) episodes.
                first = next(iter(ref.values()))["per_question"]
                ref_f1 = {(q.get("path"), q["question_id"]): q["f1"] for q in first}
                diffs = [q["f1"] - ref_f1[q.get("path"), q["question_id"]] for q in runs[0]["per_question"]
                         if (q.get("path"), q["question_id"]) in ref_f1]  # fmt: skip
                row["f1_minus_reference"] = list(paired_ci(diffs)) if diffs else None
            table[cell] = row
        out[name] = table
    return out


def format_throughput(throughput: dict[str, Any]) -> list[str]:
    """The :func:`throughput_report` as Markdown: one table per workload."""
    lines: list[str] = []
    for name, table in throughput.items():
        ref = next(iter(table.values())).get("reference", "xllamacpp@1")
        unit = "episodes" if name.startswith("paths:") else "questions"  # (path, question) pairs
        policy, _, size = name.rpartition(" on ")
        lines += [
            "",
            f"## Many questions in flight: `{policy}` policy on {size} "
            "(cells interleaved, medians over repeats)",
            "",
            f"| engine@N | repeats | {unit} | median wall s | {unit}/hour | speed-up vs {ref} | "
            f"mean batch | prompt tokens from prefix cache | F1 | F1 − {ref} [95% CI] |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for cell, r in table.items():
            ci = r.get("f1_minus_reference")
            ci_text = f"{ci[0]:+.3f} [{ci[1]:+.3f}, {ci[2]:+.3f}]" if ci else "-"
            speed = f"{r['speedup_vs_reference']:.2f}×" if r["speedup_vs_reference"] else "-"
            share = f"{r['cached_share']:.0%}" if r["cached_share"] is not None else "-"
            lines.append(
                f"| {cell} | {r['repeats']} | {r['questions']} | {r['median_wall_s']:.0f} | "
                f"{r['q_per_hour']:.1f} | {speed} | {r['mean_batch']:.2f} | {share} | {r['f1']:.3f} | "
                f"{ci_text} |"
            )
    return lines
