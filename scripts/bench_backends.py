"""Measure a local backend: prompt and generation speed, and cold vs warm call-cache time.

Usage::

    OMP_NUM_THREADS=1 .venv/bin/python scripts/bench_backends.py --model smollm2-135m --repeats 5

Prompt/generation tokens per second come from llama.cpp's own timings; the cache figures
are wall-clock times of ``CachedLLM.generate`` for the same request on a cold cache (a real
model call) and on a warm one (an SQLite lookup). Medians over ``--repeats`` distinct prompts.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from modules.backends import get_backend
from modules.backends.base import GenerationRequest
from modules.cache import CachedLLM, CallCache

_EVIDENCE = (
    "Caroline said, \"I went to the LGBTQ support group yesterday and it was so powerful.\" "
    "Melanie said, \"That's great! I painted a sunrise over the lake last week.\" "
    "Caroline said, \"I'm planning to study counseling and mental health next year.\" "
)


def _request(i: int, max_tokens: int) -> GenerationRequest:
    # The varying part comes first so that llama.cpp's prefix cache cannot reuse earlier prompts.
    text = f"Conversation #{i}.\n" + _EVIDENCE * 3 + "\nList the people mentioned and what each one did."
    return GenerationRequest(messages=({"role": "user", "content": text},), max_tokens=max_tokens)


def main(argv: list[str] | None = None) -> int:
    """Run the measurement and print a JSON summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=48)
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    backend = get_backend("llamacpp", model=args.model, n_threads=args.threads, n_ctx=2048)
    load_s = time.perf_counter() - t0
    prompt_tps, gen_tps, cold, warm, tokens_in, tokens_out = [], [], [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        llm = CachedLLM(backend, CallCache(Path(tmp) / "calls.sqlite"))
        for i in range(args.repeats):
            req = _request(i, args.max_tokens)
            t = time.perf_counter()
            (first,) = llm.generate([req], tags={"bench": "cold"})
            cold.append(time.perf_counter() - t)
            timing = backend.last_timings[-1]  # type: ignore[attr-defined]
            prompt_tps.append(timing["prompt_per_second"])
            gen_tps.append(timing["predicted_per_second"])
            tokens_in.append(first.tokens_in)
            tokens_out.append(first.tokens_out)
            t = time.perf_counter()
            (again,) = llm.generate([req], tags={"bench": "cold"})
            warm.append(time.perf_counter() - t)
            assert again.cached and again.text == first.text
    med = statistics.median
    print(json.dumps({
        "model": args.model, "threads": args.threads, "repeats": args.repeats, "load_s": round(load_s, 2),
        "median_tokens_in": med(tokens_in), "median_tokens_out": med(tokens_out),
        "prompt_tok_per_s": round(med(prompt_tps), 1), "gen_tok_per_s": round(med(gen_tps), 1),
        "cold_call_s": round(med(cold), 3), "warm_cache_call_s": round(med(warm), 5),
        "warm_cache_speedup": round(med(cold) / med(warm), 1),
    }, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
