"""Choose the LLM engine by measurement: speed, share of the machine's peak, and answer agreement.

Run it in the vLLM virtualenv (it has the project and every engine; ``bash scripts/setup_vllm.sh``),
after ``bash scripts/build_llamacpp.sh`` for the native llama.cpp build::

    .venv-vllm/bin/python scripts/bench_engines.py peak
    .venv-vllm/bin/python scripts/bench_engines.py micro --model qwen2.5-1.5b
    .venv-vllm/bin/python scripts/bench_engines.py questions --limit 40      # resumable
    .venv-vllm/bin/python scripts/bench_engines.py report

Every part writes into ``--out``, by default ``results/engines/<cpu id>/`` (``common.cpu.cpu_id``: vendor,
vector ISA, AMX and a hash of the model and flags), so each CPU class keeps its own numbers: ratios are only
ever taken between engines measured on one machine. ``machine.json`` there records the CPU model and its
instruction-set flags, and every file below carries the CPU id:

* ``peak``: the machine's matmul peak in float32, bfloat16 and int8 (torch, square matrices, medians);
* ``micro``: per engine, prefill and decode tokens/s and the wall time of 8 short requests sent one
  by one (N = 1) and as one batch (N = 8); engines interleaved within each repeat, medians;
* ``questions``: the workload that costs us, the ``cpu_quality`` all-HIGH question (five HIGH
  modules and the answer) on LoCoMo validation questions, each question run by every engine in
  turn; one record per (engine, question) with wall time, F1 and the prediction. Each engine has
  its own call cache under ``--out`` so a stopped run resumes where it stopped;
* ``throughput``: many questions in flight. ``--cells xllamacpp@1,native@4,vllm-bf16@8`` names each engine
  at a concurrency N; every cell runs the same questions (``--policy all-high``, or ``random`` seeded per
  question) with N in flight (``scale.batched_rollout.map_batched``: the LLM calls of the N questions reach
  the engine as one batch; llama.cpp gets N server slots) on a call cache of its own, empty at the start, and
  records the wall time of the question loop, questions/hour, the mean batch the engine saw, prompt tokens
  computed and served from the engine's prefix cache, and each question's F1 and answer. Cells are
  interleaved within a repeat (``--repeats``); a finished cell is never run again, so a stopped run resumes.
  ``--policy paths`` runs the powered study's shape instead: every question on each of ``--paths`` (one queue
  of episodes, path after path, as ``evaluate.py frontier`` runs them), and a cell ``ENGINE@N:per-path``
  gives each path its own queue, so the two are measured side by side;
* ``report``: ``engines.md``/``engines.json``: per engine the median wall per question and its ratio
  to the reference engine measured side by side, F1 with a paired bootstrap interval against the
  reference, token F1 between engines' answers, and the micro numbers as shares of the peak.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = "xllamacpp"


#: The arithmetic each engine's matmuls run in (the peak its prefill is compared with).
ENGINE_ARITHMETIC = {
    "xllamacpp": "int8",
    "native": "int8",
    "vllm-fp32": "float32",
    "vllm-bf16": "bfloat16",
    "vllm-int8": "int8",
    "transformers-fp32": "float32",
    "transformers-bf16": "bfloat16",
}


def engine_specs(model: str, threads: int) -> dict[str, dict[str, Any]]:
    """Backend configs of the engines compared (``--engines`` picks among them)."""
    return {
        "xllamacpp": {"name": "llamacpp", "model": model, "n_threads": threads},
        "native": {"name": "llamacpp", "engine": "native", "model": model, "n_threads": threads},
        "vllm-fp32": {"name": "vllm", "model": model, "dtype": "float32"},
        "vllm-bf16": {"name": "vllm", "model": model, "dtype": "bfloat16"},
        "vllm-int8": {"name": "vllm", "model": model, "dtype": "bfloat16", "int8_weights": True},
        "transformers-fp32": {
            "name": "transformers",
            "model": model,
            "dtype": "float32",
            "n_threads": threads,
        },
        "transformers-bf16": {
            "name": "transformers",
            "model": model,
            "dtype": "bfloat16",
            "n_threads": threads,
        },
    }


def _median_time(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


# -- peak ---------------------------------------------------------------------------------------


def measure_peak(threads: int, size: int = 2048, repeats: int = 7) -> dict[str, float]:
    """Matmul throughput in GFLOP/s (GOP/s for int8) of torch on ``threads`` threads."""
    import torch

    torch.set_num_threads(threads)
    out: dict[str, float] = {}
    flops = 2 * size**3
    for name, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
        a, b = torch.randn(size, size).to(dtype), torch.randn(size, size).to(dtype)
        a @ b  # warm-up (oneDNN picks and JITs its kernel)
        out[name] = flops / _median_time(lambda a=a, b=b: a @ b, repeats) / 1e9
    a8 = torch.randint(-127, 127, (size, size), dtype=torch.int8)
    b8 = torch.randint(-127, 127, (size, size), dtype=torch.int8)
    try:
        torch._int_mm(a8, b8)
        out["int8"] = flops / _median_time(lambda: torch._int_mm(a8, b8), repeats) / 1e9
    except RuntimeError as exc:  # int8 GEMM not built for this CPU
        print(f"int8 matmul unavailable: {exc}", file=sys.stderr)
    return out


# -- micro --------------------------------------------------------------------------------------

_WORDS = [
    "moved",
    "painted",
    "garden",
    "river",
    "concert",
    "school",
    "guitar",
    "bakery",
    "marathon",
    "camping",
    "museum",
    "adopted",
    "puppy",
    "library",
    "promotion",
    "hiking",
    "wedding",
    "recipe",
    "volunteer",
    "festival",
    "pottery",
    "sunrise",
    "counseling",
    "beach",
]
_NAMES = ("Caroline", "Melanie", "Jon", "Gina", "Andrew", "Audrey", "Tim", "Nate")


ASK_SHORT = "Question: What did Caroline do in May 2023? Answer in a few words."
#: Makes every engine write past the 65-token cap, so decode speed is measured over a fixed length.
ASK_LONG = "Rewrite every line above as a numbered list, in full sentences, keeping every date."


def _long_prompt(seed: int, lines: int, ask: str = ASK_SHORT) -> str:
    rng = random.Random(seed)
    # The varying line comes first so no engine's prefix cache can reuse an earlier prompt.
    rows = [f"Conversation {seed}-{rng.random():.6f}."]
    for i in range(lines):
        words = " ".join(rng.choice(_WORDS) for _ in range(14))
        rows.append(f'[{i + 1}] ({1 + i % 28} May 2023) {rng.choice(_NAMES)} said, "{words}."')
    rows.append(ask)
    return "\n".join(rows)


def _request(text: str, max_tokens: int) -> Any:
    from modules.backends.base import GenerationRequest

    return GenerationRequest(messages=({"role": "user", "content": text},), max_tokens=max_tokens)


def measure_micro(backend: Any, repeat: int, long_lines: int) -> dict[str, float]:
    """One repeat of the micro workloads on ``backend`` (fresh prompts, so nothing is reused)."""
    base = 1000 * repeat
    (pre,) = backend.generate([_request(_long_prompt(base + 1, long_lines), 1)])
    t = time.perf_counter()
    (pre,) = backend.generate([_request(_long_prompt(base + 2, long_lines), 1)])
    prefill_s = time.perf_counter() - t
    t = time.perf_counter()
    (dec,) = backend.generate([_request(_long_prompt(base + 3, long_lines, ASK_LONG), 65)])
    decode_s = time.perf_counter() - t - prefill_s
    shorts = [_request(_long_prompt(base + 10 + i, 12), 32) for i in range(8)]
    t = time.perf_counter()
    singles = [backend.generate([r])[0] for r in shorts]
    n1 = (time.perf_counter() - t) / len(shorts)
    shorts = [_request(_long_prompt(base + 20 + i, 12), 32) for i in range(8)]
    t = time.perf_counter()
    batch = backend.generate(shorts)
    n8 = time.perf_counter() - t
    errors = [r.error for r in (pre, dec, *singles, *batch) if not r.ok]
    if errors:
        raise RuntimeError(f"{backend.model_id}: failed calls in the micro benchmark: {errors[:2]}")
    return {
        "prompt_tokens": pre.tokens_in,
        "prefill_tok_s": pre.tokens_in / prefill_s,
        "decode_tokens": dec.tokens_out,
        "decode_tok_s": max(dec.tokens_out - 1, 1) / max(decode_s, 1e-9),
        "n1_wall_s_per_request": n1,
        "n8_wall_s_batch": n8,
        "short_prompt_tokens": statistics.mean(r.tokens_in for r in singles),
    }


# -- questions ----------------------------------------------------------------------------------


def _engine_config(base: dict[str, Any], spec: dict[str, Any], cache: Path) -> dict[str, Any]:
    import copy

    cfg = copy.deepcopy(base)
    model = spec["model"]
    small = {k: v for k, v in spec.items() if k != "model"}
    # Every LLM role on this engine: SmolLM2 stays the base model (cpu_quality does not use it at
    # all-HIGH), the HIGH tiers and the answerer run the measured model.
    cfg["backend"] = {**small, "model": "smollm2-135m"}
    cfg["llms"] = {"high": {**small, "model": model}}
    cfg["answer"] = {**cfg.get("answer", {}), "backend": {**small, "model": model}}
    cfg["cache"] = {"path": str(cache), "pack": "none"}
    return cfg


def _quality_config(args: argparse.Namespace) -> dict[str, Any]:
    """The ``cpu_quality`` config of ``--benchmark`` with the ``--set`` overrides (the measured workload)."""
    from evaluation.frontier_config import resolve_config

    ns = argparse.Namespace(
        experiment="cpu_quality", config=None, set=list(args.set), benchmark=args.benchmark
    )
    return resolve_config(ns, [])


def run_questions(args: argparse.Namespace) -> None:
    """The cpu_quality all-HIGH question on every engine, interleaved, resumable."""
    from benchmarks.metrics import score_answer
    from common.cpu import cpu_id
    from envs.components import make_components
    from envs.question_bank import question_bank_from
    from evaluation.headroom import Context, evaluate_context, stratified
    from modules.tier import Tier

    base = _quality_config(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    records_path = out / "questions.jsonl"
    cpu = cpu_id()
    done = {(r["engine"], r["question_id"]) for r in _read_jsonl(records_path)}
    specs = engine_specs(args.model, args.threads)
    engines = [e for e in args.engines.split(",") if e]
    comps = {}
    for name in engines:
        print(f"loading {name} ...", flush=True)
        comps[name] = make_components(_engine_config(base, specs[name], out / f"calls-{name}.sqlite"))
    first = comps[engines[0]]
    items = stratified(
        question_bank_from(base, args.split, first.encoder), args.limit, lambda it: str(it.question.category)
    )
    context = Context("all-HIGH", "pipeline", (Tier.HIGH,) * 5)
    scorer = score_answer
    for qi, item in enumerate(items):
        for name in engines:
            if (name, item.question.question_id) in done:
                continue
            t = time.perf_counter()
            rec = evaluate_context(context, item, comps[name], "", scorer)
            rec |= {"engine": name, "wall_s": time.perf_counter() - t, "model": args.model, "cpu": cpu}
            _append_jsonl(records_path, rec)
            print(f"[{qi + 1}/{len(items)}] {name:18s} {rec['wall_s']:7.1f} s  F1 {rec['f1']:.2f}  "
                  f"{rec['prediction'][:60]!r}", flush=True)  # fmt: skip
    for c in comps.values():
        c.close()


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise SystemExit(f"{path}:{n}: not JSON ({exc.msg}); remove that line to resume") from exc
    return rows


def _append_jsonl(path: Path, row: dict[str, Any]) -> None:
    # One line per write, flushed and synced: a kill loses at most the record being written.
    with open(path, "a") as fh:
        fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


# -- throughput ---------------------------------------------------------------------------------


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

    base = _quality_config(args)
    out = Path(args.out)
    work = out / "throughput"
    work.mkdir(parents=True, exist_ok=True)
    records_path = out / "throughput.jsonl"
    done = {(row_label(r), workload_label(r), r["repeat"]) for r in _read_jsonl(records_path)}
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
            comps = make_components(_engine_config(base, spec, calls))
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
            _append_jsonl(records_path, rec)
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
                row["f1_minus_reference"] = list(_paired_ci(diffs)) if diffs else None
            table[cell] = row
        out[name] = table
    return out


# -- report -------------------------------------------------------------------------------------


def _token_f1(a: str, b: str) -> float:
    from benchmarks.metrics import token_f1

    return float(token_f1(a, b))


def _paired_ci(diffs: Sequence[float], n_boot: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    rng = random.Random(seed)
    means = sorted(statistics.fmean(rng.choices(diffs, k=len(diffs))) for _ in range(n_boot))
    return statistics.fmean(diffs), means[int(0.025 * n_boot)], means[int(0.975 * n_boot) - 1]


def build_report(out: Path) -> dict[str, Any]:
    """Summarise whatever ``peak``, ``micro`` and ``questions`` have written so far."""
    report: dict[str, Any] = {}
    machine_file = out / "machine.json"
    if machine_file.is_file():
        report["machine"] = json.loads(machine_file.read_text())
    peak_file, micro_file = out / "peak.json", out / "micro.json"
    if peak_file.is_file():
        report["peak"] = json.loads(peak_file.read_text())
    if micro_file.is_file():
        report["micro"] = json.loads(micro_file.read_text())
    throughput = _read_jsonl(out / "throughput.jsonl")
    if throughput:
        report["throughput"] = throughput_report(throughput)
    rows = _read_jsonl(out / "questions.jsonl")
    by: dict[str, dict[str, dict[str, Any]]] = {}
    for r in rows:
        by.setdefault(r["engine"], {})[r["question_id"]] = r
    if REFERENCE in by:
        ref = by[REFERENCE]
        q_rows = {}
        for name, recs in by.items():
            common = sorted(set(recs) & set(ref))
            if not common:
                continue
            ratios = [ref[q]["wall_s"] / recs[q]["wall_s"] for q in common]
            f1_mean, lo, hi = _paired_ci([recs[q]["f1"] - ref[q]["f1"] for q in common])
            q_rows[name] = {
                "questions": len(common),
                "median_wall_s": statistics.median(recs[q]["wall_s"] for q in common),
                "reference_median_wall_s": statistics.median(ref[q]["wall_s"] for q in common),
                "speedup_median": statistics.median(ratios),
                "speedup_total": sum(ref[q]["wall_s"] for q in common)
                / sum(recs[q]["wall_s"] for q in common),
                "f1": statistics.fmean(recs[q]["f1"] for q in common),
                "reference_f1": statistics.fmean(ref[q]["f1"] for q in common),
                "f1_minus_reference": [f1_mean, lo, hi],
                "answer_token_f1_vs_reference": statistics.fmean(
                    _token_f1(recs[q]["prediction"], ref[q]["prediction"]) for q in common
                ),
                "same_answer_share": statistics.fmean(
                    float(recs[q]["prediction"].strip() == ref[q]["prediction"].strip()) for q in common
                ),
            }
        report["questions"] = q_rows
    return report


def format_report(report: dict[str, Any]) -> str:
    """The report as Markdown tables."""
    lines = ["# LLM engines on this machine", ""]
    machine = report.get("machine")
    if machine:
        lines += [
            f"CPU: {machine['model']} ({machine['vendor']}, {machine.get('cores', '?')} cores; "
            f"id `{machine['id']}`); instruction-set flags: {' '.join(machine['isa_flags'])}.",
            "",
        ]
        if machine.get("note"):
            lines += [machine["note"], ""]
    peak = report.get("peak", {})
    if peak:
        lines += ["## Matmul peak (torch, 2 threads)", "", "| dtype | GFLOP/s |", "|---|---|"]
        lines += [f"| {k} | {v:.0f} |" for k, v in peak.get("gflops", {}).items()]
        lines.append("")
    micro = report.get("micro", {})
    if micro:
        params = micro.get("n_params")
        lines += [
            f"## Micro workloads ({micro.get('model')}, "
            f"medians of {micro.get('repeats')} interleaved repeats)",
            "",
            "Prefill GFLOP/s = 2 · parameters · prefill tokens/s, as a share of the matmul peak of the "
            "arithmetic the engine computes in (llama.cpp's Q4 dot products are int8).",
            "",
            "| engine | prefill tok/s | prefill GFLOP/s | share of its peak | decode tok/s | "
            "N=1 s/request | N=8 s/batch |",
            "|---|---|---|---|---|---|---|",
        ]
        gflops = peak.get("gflops", {})
        for name, m in micro.get("engines", {}).items():
            achieved = 2 * params * m["prefill_tok_s"] / 1e9 if params else float("nan")
            arith = ENGINE_ARITHMETIC.get(name, "")
            share = f"{achieved / gflops[arith]:.0%} of {arith}" if arith in gflops else "-"
            lines.append(
                f"| {name} | {m['prefill_tok_s']:.0f} | {achieved:.0f} | {share} | {m['decode_tok_s']:.1f} | "
                f"{m['n1_wall_s_per_request']:.2f} | {m['n8_wall_s_batch']:.2f} |"
            )
        lines.append("")
    q = report.get("questions", {})
    if q:
        lines += [
            "## cpu_quality all-HIGH question (five HIGH modules + answer), side by side",
            "",
            "| engine | questions | median wall s | speed-up vs xllamacpp (median, total) | F1 | "
            "F1 − xllamacpp [95% CI] | answer token F1 vs xllamacpp | same answer |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for name, r in q.items():
            d, lo, hi = r["f1_minus_reference"]
            lines.append(
                f"| {name} | {r['questions']} | {r['median_wall_s']:.1f} | "
                f"{r['speedup_median']:.2f}×, {r['speedup_total']:.2f}× | {r['f1']:.3f} | "
                f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}] | {r['answer_token_f1_vs_reference']:.2f} | "
                f"{r['same_answer_share']:.0%} |"
            )
    for name, table in report.get("throughput", {}).items():
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
    return "\n".join(lines) + "\n"


# -- CLI ----------------------------------------------------------------------------------------


def _check_machine(out: Path, machine: dict[str, Any]) -> None:
    """Write ``machine.json`` in a new ``out``; refuse to add numbers of another CPU to an old one.

    Raises:
        SystemExit: ``out`` holds numbers measured on another CPU (the message names both).
    """
    from common.atomic import atomic_write_json

    path = out / "machine.json"
    if not path.is_file():
        if any(out.glob("*.json*")):
            raise SystemExit(f"{out} holds results but no machine.json: which CPU measured them is unknown; "
                             "pass --out with a new directory")  # fmt: skip
        atomic_write_json(path, machine)
        return
    recorded = json.loads(path.read_text())
    if recorded.get("id") != machine["id"]:
        raise SystemExit(
            f"{out} holds numbers measured on {recorded.get('model')} (id {recorded.get('id')}); this CPU is "
            f"{machine['model']} (id {machine['id']}): ratios across machines mean nothing, so leave out "
            "--out (each CPU gets results/engines/<its id>/) or pass a new directory"
        )




def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run one part."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("part", choices=["peak", "micro", "questions", "throughput", "report"])
    parser.add_argument("--out", default=None, help="default: results/engines/<this CPU's id>")
    parser.add_argument("--model", default="qwen2.5-1.5b")
    parser.add_argument("--threads", type=int, default=2)
    # transformers is left out by default: with both vLLM engines loaded it does not fit in 24 GiB.
    parser.add_argument("--engines", default="xllamacpp,native,vllm-fp32,vllm-bf16")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--long-lines", type=int, default=40, help="evidence lines of the long prompt")
    parser.add_argument("--benchmark", default="locomo")
    parser.add_argument("--split", default="val")
    parser.add_argument("--limit", type=int, default=40)
    parser.add_argument("--set", action="append", default=[], help="config override for `questions`")
    parser.add_argument("--cells", default="xllamacpp@1,native@1,native@4,vllm-bf16@1,vllm-bf16@8",
                        help="`throughput`: ENGINE@N cells (N questions in flight)")  # fmt: skip
    parser.add_argument(
        "--policy", default="all-high", choices=["all-high", "random", "paths"],
        help="`throughput`: the policy every cell runs (paths: each question on every --paths)",
    )  # fmt: skip
    parser.add_argument(
        "--paths", default="all-low,all-mid,all-high,single-module",
        help="`throughput --policy paths`: fixed paths (frontier baseline names)",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=0, help="`throughput --policy random`: the policy's seed")
    args = parser.parse_args(argv)
    from common.atomic import atomic_write_json, atomic_write_text
    from common.cpu import cpu_record

    machine = cpu_record()
    out = Path(args.out) if args.out else ROOT / "results" / "engines" / str(machine["id"])
    args.out = str(out)
    out.mkdir(parents=True, exist_ok=True)
    _check_machine(out, machine)

    if args.part == "peak":
        peak = {"cpu": machine["id"], "threads": args.threads, "gflops": measure_peak(args.threads)}
        atomic_write_json(out / "peak.json", peak)
        print(json.dumps(peak, indent=2))
    elif args.part == "micro":
        from modules.backends import get_backend
        from modules.models import get_model_spec

        specs = engine_specs(args.model, args.threads)
        names = [e for e in args.engines.split(",") if e]
        backends = {}
        for name in names:
            spec = dict(specs[name])
            backends[name] = get_backend(spec.pop("name"), **spec)
        runs: dict[str, list[dict[str, float]]] = {n: [] for n in names}
        for rep in range(args.repeats):
            for name in names:  # interleaved: a slow minute of the machine hits every engine
                runs[name].append(measure_micro(backends[name], rep, args.long_lines))
                print(f"repeat {rep} {name}: {json.dumps(runs[name][-1])}", flush=True)
        for b in backends.values():
            b.close()
        micro = {
            "cpu": machine["id"],
            "model": args.model,
            "n_params": get_model_spec(args.model).n_params,
            "threads": args.threads,
            "repeats": args.repeats,
            "engines": {n: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for n, rs in runs.items()},
            "raw": runs,
        }
        atomic_write_json(out / "micro.json", micro)
    elif args.part == "questions":
        run_questions(args)
    elif args.part == "throughput":
        run_throughput(args)
    report = build_report(out)
    atomic_write_json(out / "engines.json", report)
    atomic_write_text(out / "engines.md", format_report(report))
    print(format_report(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
