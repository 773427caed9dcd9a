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
* ``throughput`` (``scripts/engine_throughput.py``): many questions in flight. ``--cells
  xllamacpp@1,native@4,vllm-bf16@8`` names each engine at a concurrency N; every cell runs the same
  questions (``--policy all-high``, or ``random`` seeded per question) with N in flight
  (``scale.batched_rollout.map_batched``: the LLM calls of the N questions reach the engine as one batch;
  llama.cpp gets N server slots) on a call cache of its own, empty at the start, and records the wall time
  of the question loop, questions/hour, the mean batch the engine saw, prompt tokens computed and served
  from the engine's prefix cache, and each question's F1 and answer. Cells are interleaved within a repeat
  (``--repeats``); a finished cell is never run again, so a stopped run resumes. ``--policy paths`` runs the
  powered study's shape instead: every question on each of ``--paths`` (one queue of episodes, path after
  path, as ``evaluate.py frontier`` runs them), and a cell ``ENGINE@N:per-path`` gives each path its own
  queue, so the two are measured side by side;
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(1, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from engine_bench_common import (
    append_jsonl,
    engine_config,
    engine_specs,
    paired_ci,
    quality_config,
    read_jsonl,
)
from engine_throughput import format_throughput, run_throughput, throughput_report

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


def run_questions(args: argparse.Namespace) -> None:
    """The cpu_quality all-HIGH question on every engine, interleaved, resumable."""
    from benchmarks.metrics import score_answer
    from common.cpu import cpu_id
    from envs.components import make_components
    from envs.question_bank import question_bank_from
    from evaluation.headroom import Context, evaluate_context, stratified
    from modules.tier import Tier

    base = quality_config(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    records_path = out / "questions.jsonl"
    cpu = cpu_id()
    done = {(r["engine"], r["question_id"]) for r in read_jsonl(records_path)}
    specs = engine_specs(args.model, args.threads)
    engines = [e for e in args.engines.split(",") if e]
    comps = {}
    for name in engines:
        print(f"loading {name} ...", flush=True)
        comps[name] = make_components(engine_config(base, specs[name], out / f"calls-{name}.sqlite"))
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
            append_jsonl(records_path, rec)
            print(f"[{qi + 1}/{len(items)}] {name:18s} {rec['wall_s']:7.1f} s  F1 {rec['f1']:.2f}  "
                  f"{rec['prediction'][:60]!r}", flush=True)  # fmt: skip
    for c in comps.values():
        c.close()


# -- report -------------------------------------------------------------------------------------


def _token_f1(a: str, b: str) -> float:
    from benchmarks.metrics import token_f1

    return float(token_f1(a, b))


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
    throughput = read_jsonl(out / "throughput.jsonl")
    if throughput:
        report["throughput"] = throughput_report(throughput)
    rows = read_jsonl(out / "questions.jsonl")
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
            f1_mean, lo, hi = paired_ci([recs[q]["f1"] - ref[q]["f1"] for q in common])
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
    lines += format_throughput(report.get("throughput", {}))
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
