"""int8 weights for vLLM's CPU build: a Hugging Face directory rewritten as a W8A8 compressed-tensors model.

vLLM runs a compressed-tensors ``W8A8`` model on a CPU through oneDNN's int8 matmul (the VNNI dot products
AVX-512 CPUs have; on a CPU with AMX, vLLM's own AMX kernel): weights int8 with one scale per output channel,
activations quantised to int8 per token at run time. The activations around those matmuls are bf16, which
each CPU class's kernels round their own way (:mod:`scale.vllm_kernels`): a small model's answers can change
with the class. Nothing needs calibration, so the conversion is a pure function
of the bf16 weights: ``scale = max |W_row| / 127``, ``W_int8 = round(W / scale)``. The ``lm_head`` stays
bf16. Half the weight bytes of bf16 and, where a CPU has no AMX (AMD EPYC), twice its matmul peak
(``scripts/bench_engines.py peak``): the lever for prefill and decode on such a CPU.

The directory is built once per source directory under ``<source>-w8a8/`` (beside the bf16 rebuild of a
GGUF, :func:`modules.backends.weights.hf_dir_from_gguf`), in a child process, under a lock, written to a
temporary sibling and renamed: a crash never leaves a half-written model.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from modules.backends.base import BackendError
from modules.backends.weights import build_model_dir_once

#: The one int8 scheme built here (the name recorded in a call's numerics and in the directory's name).
SCHEME = "w8a8-int8"


def w8a8_dir(hf_dir: str | os.PathLike[str]) -> Path:
    """The W8A8 int8 rewrite of the bfloat16 model directory ``hf_dir`` (built once, cached beside it).

    Raises:
        BackendError: ``hf_dir`` is not a model directory, or the conversion failed (compressed-tensors,
            which vLLM installs, is needed).
    """
    src = Path(hf_dir)
    if not (src / "config.json").is_file():
        raise BackendError(f"int8 weights: {src} is not a Hugging Face model directory (no config.json)")
    out = src.with_name(f"{src.name}-w8a8")
    build_model_dir_once(out, ["scale.vllm_int8", str(src), str(out)], f"rewriting {src} with int8 weights")
    return out


def _convert(src: Path, out: Path) -> None:
    import torch
    from compressed_tensors.compressors import ModelCompressor
    from compressed_tensors.quantization import (
        QuantizationConfig,
        QuantizationScheme,
        QuantizationStatus,
        apply_quantization_config,
    )
    from compressed_tensors.quantization.quant_scheme import PRESET_SCHEMES
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(src), dtype=torch.bfloat16)
    scheme = QuantizationScheme(targets=["Linear"], **PRESET_SCHEMES["W8A8"])
    config = QuantizationConfig(
        config_groups={"group_0": scheme},
        ignore=["lm_head"],
        quantization_status=QuantizationStatus.INITIALIZED,
    )
    apply_quantization_config(model, config)
    quantised = 0
    with torch.no_grad():
        for module in model.modules():
            target: Any = getattr(module, "weight_scale", None)
            if target is None:
                continue
            weight: Any = module.weight
            # Symmetric per output channel: the row's largest magnitude maps to 127 (a zero row: scale 1e-8).
            scale = (weight.float().abs().amax(dim=1, keepdim=True) / 127.0).clamp(min=1e-8)
            target.copy_(scale.reshape(target.shape).to(target.dtype))
            zero_point: Any = getattr(module, "weight_zero_point", None)
            if zero_point is not None:
                zero_point.zero_()
            quantised += 1
    if not quantised:
        raise BackendError(f"{src}: no linear layer to quantise")
    compressor = ModelCompressor.from_pretrained_model(model, quantization_format="int-quantized")
    compressor.compress_model(model)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        model.save_pretrained(str(tmp))
        compressor.update_config(str(tmp))
        AutoTokenizer.from_pretrained(str(src)).save_pretrained(str(tmp))
        for extra in ("chat_template.jinja", "generation_config.json"):
            if (src / extra).is_file() and not (tmp / extra).is_file():
                shutil.copy2(src / extra, tmp / extra)
        source = json.loads((src / "SOURCE.json").read_text()) if (src / "SOURCE.json").is_file() else {}
        (tmp / "SOURCE.json").write_text(
            json.dumps({**source, "from": str(src), "scheme": SCHEME, "linear_layers": quantised})
        )
        tmp.chmod(0o755)  # mkdtemp makes it private; the model cache may be shared
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":  # the child of w8a8_dir: SRC OUT
    try:
        _convert(Path(sys.argv[1]), Path(sys.argv[2]))
    except (BackendError, ImportError, OSError, ValueError) as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
