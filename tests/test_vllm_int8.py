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


def test_smollm2_in_int8_answers_and_keys_its_calls_apart() -> None:
    need_vllm()
    from scale.vllm_offline import VLLMBackend

    backend = VLLMBackend("smollm2-135m", n_ctx=1024, dtype="bfloat16", int8_weights=True)
    try:
        req = GenerationRequest(
            messages=({"role": "user", "content": "What is the capital of France?"},), max_tokens=24
        )
        (res,) = backend.generate([req])
        assert res.ok, res.error
        assert "paris" in res.text.lower(), res.text
        num = backend.numerics()
        assert num["quantization"] == "w8a8-int8" and num["dtype"] == "bfloat16"
    finally:
        backend.close()
