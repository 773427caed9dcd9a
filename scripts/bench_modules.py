"""Benchmark every module x tier of a tiering strategy on real LoCoMo questions.

For each question the evidence is retrieved from the conversation's hierarchical memory
(``benchmarks.memory_builder``, MiniLM, top-k). Each module is measured in isolation on the
input it would see in a pipeline whose upstream modules run at MID (so every tier of a module
gets the same input). Three passes:

* cold: empty caches (the in-process LRU is cleared before every call, the persistent
  CallCache starts empty); calls whose input repeats an earlier one are excluded from the
  cold median (reported as ``dup``);
* warm: a new-process situation -- LRU cleared once, results replayed from the persistent
  CallCache (what repeated epochs and lambda sweeps see);
* hot: replayed from the in-process LRU (LLM calls still go through the CallCache).

Usage:
    .venv/bin/python scripts/bench_modules.py                       # implementation, 20 questions
    .venv/bin/python scripts/bench_modules.py --strategy reasoning --n-questions 5
    .venv/bin/python scripts/bench_modules.py --strategy capacity   # needs gemma/qwen installed
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.memory_builder import build_memory, retrieve_evidence
from benchmarks.registry import get_benchmark
from common.atomic import atomic_write_json
from common.provenance import run_metadata
from memory.encoder import get_encoder
from modules.backends import get_backend
from modules.base import ModuleInput, ModuleOutput
from modules.cache import CachedLLM, CallCache
from modules.local_tier import LRU
from modules.pipeline import build_pipeline
from modules.pricing import CostModel
from modules.tier import MODULE_ORDER, Tier

#: Model keys per LLM role, by strategy.
LLM_ROLES: dict[str, dict[str, str]] = {
    "implementation": {"high": "smollm2-135m"},
    "reasoning": {"default": "smollm2-135m"},
    "capacity": {"low": "smollm2-135m", "mid": "gemma3-270m", "high": "qwen2.5-1.5b"},
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--strategy", default="implementation", choices=sorted(LLM_ROLES))
    p.add_argument("--n-questions", type=int, default=20)
    p.add_argument("--conversation", type=int, default=0, help="index into locomo10.json (0 = conv-26)")
    p.add_argument("--k", type=int, default=5, help="retrieved chunks per question")
    p.add_argument("--threads", type=int, default=1, help="llama.cpp threads")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--out", default="runs/bench_modules", help="directory for the JSON result")
    return p.parse_args(argv)


def reference_inputs(pipe, query: str, evidence, question_date) -> dict[str, ModuleInput]:
    """The input of every module when upstream modules run at MID."""
    run = pipe.begin(query, evidence, question_date)
    inputs = {}
    while not run.done:
        inputs[run.next_module] = run.current_input()
        run.step(Tier.MID)
    return inputs


def timed(pipe, inp: ModuleInput, tier: Tier) -> tuple[float, ModuleOutput]:
    t0 = time.perf_counter()
    out = pipe.modules[inp.module].run(inp, tier)
    return time.perf_counter() - t0, out


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    bench = get_benchmark("locomo", data_dir=args.data_dir)
    sample = bench.load("all")[args.conversation]
    questions = [q for q in sample.questions if q.category != "5"]
    step = max(1, len(questions) // args.n_questions)  # spread over the conversation
    questions = questions[::step][: args.n_questions]

    t0 = time.perf_counter()
    encoder = get_encoder("minilm")
    memory = build_memory(sample, encoder)
    evidence = {q.question_id: retrieve_evidence(memory, q, args.k) for q in questions}
    print(f"memory of {sample.sample_id}: {len(memory)} chunks, built in {time.perf_counter() - t0:.1f} s")

    backends = {
        role: get_backend("llamacpp", model=key, n_threads=args.threads)
        for role, key in LLM_ROLES[args.strategy].items()
    }
    cost_model = CostModel("gflops")
    # Reference inputs come from an uncached implementation pipeline (MID is non-LLM there),
    # so every strategy is measured on the same inputs.
    ref_pipe = build_pipeline(
        "implementation", {"high": CachedLLM(next(iter(backends.values())))}, cost_model, encoder
    )
    inputs = {
        q.question_id: reference_inputs(ref_pipe, q.question, evidence[q.question_id], q.question_date)
        for q in tqdm(questions, desc="reference inputs")
    }

    tmp = Path(tempfile.mkdtemp(prefix="bench_modules_"))
    cache = CallCache(tmp / "calls.sqlite")
    llms = {role: CachedLLM(b, cache) for role, b in backends.items()}
    pipe = build_pipeline(args.strategy, llms, cost_model, encoder, cache)

    rows: dict[tuple[str, Tier], dict] = {}
    jobs = [(q.question_id, m, t) for q in questions for m in MODULE_ORDER for t in Tier]
    for phase in ("cold", "warm", "hot"):
        LRU.clear()
        for qid, module, tier in tqdm(jobs, desc=phase):
            if phase == "cold":
                LRU.clear()
            dt, out = timed(pipe, inputs[qid][module], tier)
            r = rows.setdefault(
                (module, tier),
                {"cold": [], "warm": [], "hot": [], "cost": [], "tin": [], "tout": []}
                | {"pf": 0, "deg": 0, "dup": 0},
            )
            if phase == "cold":
                repeated = out.cached or out.cost.cache_hits > 0
                if repeated:
                    r["dup"] += 1
                else:
                    r["cold"].append(dt)
                r["cost"].append(out.cost.value)
                r["tin"].append(out.cost.tokens_in)
                r["tout"].append(out.cost.tokens_out)
                r["pf"] += out.parse_failures
                r["deg"] += int(out.degraded)
                tags = [n.split("=", 1)[1] for n in out.notes if n.startswith(("method=", "model="))]
                r["method"] = tags[0] if tags else ""
            else:
                r[phase].append(dt)

    table = []
    for (module, tier), r in rows.items():
        cold, warm, hot = median(r["cold"]), median(r["warm"]), median(r["hot"])
        table.append(
            {
                "module": module,
                "tier": tier.name,
                "method": r.get("method", ""),
                "n": len(r["cost"]),
                "dup": r["dup"],
                "cold_median_s": cold,
                "warm_median_s": warm,
                "hot_median_s": hot,
                "speedup_warm": cold / warm if warm > 0 else float("inf"),
                "speedup_hot": cold / hot if hot > 0 else float("inf"),
                "cost_median_gflops": median(r["cost"]),
                "tokens_in_median": median(r["tin"]),
                "tokens_out_median": median(r["tout"]),
                "parse_failures": r["pf"],
                "degraded": r["deg"],
            }
        )
    total = {phase: sum(sum(r[phase]) for r in rows.values()) for phase in ("cold", "warm", "hot")}
    hdr = (
        "| module | tier | method | n | cold s | warm s | hot s | warm x | hot x | GFLOPs | tok in/out "
        "| pf | deg |"
    )
    print(f"\nstrategy={args.strategy}, {len(questions)} questions of {sample.sample_id}, k={args.k}\n")
    print(hdr)
    print("|" + "---|" * 13)
    for row in table:
        print(
            f"| {row['module']} | {row['tier']} | {row['method']} | {row['n']} | "
            f"{row['cold_median_s']:.4f} | "
            f"{row['warm_median_s']:.5f} | {row['hot_median_s']:.6f} | {row['speedup_warm']:.0f} | "
            f"{row['speedup_hot']:.0f} | {row['cost_median_gflops']:.4g} | "
            f"{row['tokens_in_median']:.0f}/{row['tokens_out_median']:.0f} | {row['parse_failures']} | "
            f"{row['degraded']} |"
        )
    print(
        f"\nall calls: cold {total['cold']:.1f} s, warm {total['warm']:.3f} s "
        f"({total['cold'] / max(total['warm'], 1e-9):.0f}x), hot {total['hot']:.3f} s "
        f"({total['cold'] / max(total['hot'], 1e-9):.0f}x)"
    )
    config = {
        **vars(args),
        "questions": [q.question_id for q in questions],
        "models": LLM_ROLES[args.strategy],
    }
    out = Path(args.out) / f"bench_modules_{args.strategy}.json"
    atomic_write_json(
        out, {"rows": table, "totals_s": total, "meta": run_metadata(config, bench.data_files())}
    )
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
