"""int8 weights for vLLM's CPU build (scale/vllm_int8.py): the W8A8 rewrite is faithful to the bf16 weights,
vLLM runs it with its int8 kernel and answers correctly, and its calls never share keys with bf16 ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modules.backends.base import BackendError, GenerationRequest
from tests.support import load_script, need_vllm

pytestmark = [pytest.mark.vllm, pytest.mark.slow]




@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    need_vllm()
    write = load_script("check_vllm_gpu").write_random_qwen2
    return write(tmp_path_factory.mktemp("m") / "tiny-bf16", "tiny")


def test_the_rewrite_keeps_each_weight_within_half_a_step_of_its_row_scale(tiny_model) -> None:
    import torch
    from safetensors.torch import load_file

    from scale.vllm_int8 import SCHEME, w8a8_dir

    out = w8a8_dir(tiny_model)
    assert out == tiny_model.with_name("tiny-bf16-w8a8") and w8a8_dir(tiny_model) == out  # built once
    ref, q = load_file(str(tiny_model / "model.safetensors")), load_file(str(out / "model.safetensors"))
    name = "model.layers.0.mlp.down_proj"
    w, wq, scale = ref[f"{name}.weight"].float(), q[f"{name}.weight"], q[f"{name}.weight_scale"].float()
    assert wq.dtype == torch.int8 and scale.shape == (w.shape[0], 1)
    assert int(wq.abs().max()) == 127  # every row's largest weight maps to ±127
    # |W - q·s| <= s/2 plus the rounding of s itself (stored in bf16)
    assert bool(((w - wq.float() * scale).abs() <= 0.51 * scale + 1e-2 * w.abs()).all())
    cfg = json.loads((out / "config.json").read_text())["quantization_config"]
    assert cfg["quant_method"] == "compressed-tensors" and cfg["ignore"] == ["lm_head"]
    assert json.loads((out / "SOURCE.json").read_text())["scheme"] == SCHEME


def test_a_directory_without_a_model_is_named(tmp_path) -> None:
    from scale.vllm_int8 import w8a8_dir

    with pytest.raises(BackendError, match=str(tmp_path)):
        w8a8_dir(tmp_path)


def test_int8_weights_need_bf16_activations() -> None:
    need_vllm()
    from scale.vllm_offline import VLLMBackend

    with pytest.raises(BackendError, match="int8_weights=true needs dtype=bfloat16"):
        VLLMBackend("smollm2-135m", dtype="float32", int8_weights=True)


@pytest.mark.parametrize(("k", "n"), [(576, 960), (576, 3072), (1536, 576)])  # SmolLM2's qkv, gate_up, down
def test_the_int8_matmul_this_cpu_runs_matches_its_dequantised_reference(k, n) -> None:
    """vLLM's int8 linear (per-token activation quantisation, then the int8 GEMM of the CPU's kernel set:
    scale/vllm_kernels.py) against the same arithmetic in float32, at every batch size a block sees."""
    need_vllm()
    import torch
    from vllm import _custom_ops as ops
    from vllm.platforms import current_platform

    current_platform.import_kernels()
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(n, k, generator=gen) * 0.05
    w_scale = w.abs().amax(dim=1, keepdim=True) / 127
    w_q = torch.round(w / w_scale).clamp(-127, 127).to(torch.int8)
    # As vLLM holds it: the transposed view, bf16 out.
    handler = ops.create_onednn_scaled_mm(w_q.t(), w_scale, torch.bfloat16, True, False, 32)
    for m in (1, 16, 100):
        x = (torch.randn(m, k, generator=gen) * (1 + 10 * torch.rand(m, 1, generator=gen))).to(torch.bfloat16)
        x_q, x_scale, x_zp = ops.onednn_scaled_int8_quant(x, None, None, True)
        expected_q = torch.round(x.float() / (x.float().abs().amax(dim=1, keepdim=True) / 127))
        # The kernel multiplies by the reciprocal of the scale: a value on a rounding edge may go one step.
        assert float((x_q.float() - expected_q).abs().max()) <= 1
        out = torch.empty((m, n), dtype=torch.bfloat16)
        ops.onednn_scaled_mm(handler, x_q, out, x_scale, x_zp, None, None)
        ref = (x_q.float() * x_scale.float()) @ (w_q.float() * w_scale).t()
        # bf16 output: a relative error of its precision (2^-8), nowhere near a wrong kernel's.
        assert float((out.float() - ref).abs().max() / ref.abs().max()) < 2e-2


def test_smollm2_in_int8_answers_and_keys_its_calls_apart() -> None:
    """Completions with a wide margin (" Paris" leads by > 2 nats in float32, bf16 and simulated W8A8): the
    chat question "What is the capital of France?" is not one, SmolLM2 in W8A8 with bf16 activations
    answers it right or in French depending on how the CPU's kernels round (scale/vllm_kernels.py)."""
    need_vllm()
    from vllm import SamplingParams

    from scale.vllm_offline import VLLMBackend

    backend = VLLMBackend("smollm2-135m", n_ctx=1024, dtype="bfloat16", int8_weights=True)
    try:
        prompts = ["The capital of France is", "The capital of Japan is"]
        outs = backend.engine.generate(prompts, SamplingParams(temperature=0, max_tokens=4), use_tqdm=False)
        texts = [o.outputs[0].text for o in outs]
        assert "Paris" in texts[0] and "Tokyo" in texts[1], texts
        req = GenerationRequest(
            messages=({"role": "user", "content": "What is the capital of France?"},), max_tokens=24
        )
        (res,) = backend.generate([req])
        assert res.ok and res.text.strip(), res.error
        num = backend.numerics()
        assert num["quantization"] == "w8a8-int8" and num["dtype"] == "bfloat16"
    finally:
        backend.close()
