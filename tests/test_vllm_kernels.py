"""Which of vLLM's CPU kernel sets a CPU runs (scale/vllm_kernels.py): one class per set, named from the CPU's
flags as vLLM picks its library, so calls of different classes never share a key."""

from __future__ import annotations

import pytest

from common.cpu import CpuInfo
from scale.vllm_kernels import REFERENCE, kernels_of, vllm_cpu_kernels

AVX512 = {"avx2", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni"}


def _cpu(*flags: str) -> CpuInfo:
    return CpuInfo(model="test", vendor="test", flags=frozenset(flags))


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ({*AVX512, "avx512_bf16"}, "avx512_bf16"),  # AMD EPYC Zen 4/5: vLLM's _C, oneDNN int8
        ({*AVX512, "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16"}, "avx512_bf16+amx"),  # Sapphire Rapids
        (AVX512, "avx512"),  # Ice Lake, Cascade Lake: _C_AVX512, bf16 emulated
        ({"avx2", "fma"}, "avx2"),
    ],
)
def test_each_x86_cpu_class_gets_the_kernel_set_vllm_loads_there(flags, expected) -> None:
    assert vllm_cpu_kernels(_cpu(*flags), machine="x86_64") == expected


def test_another_architecture_is_its_own_class() -> None:
    assert vllm_cpu_kernels(_cpu("asimd"), machine="aarch64") == "aarch64"


def test_recorded_numerics_name_their_class_the_reference_one_by_omission() -> None:
    cpu = {"engine": "vllm", "device": "cpu", "dtype": "bfloat16"}
    assert kernels_of(cpu) == REFERENCE  # every call keyed before the field: the study's tables
    assert kernels_of({**cpu, "kernels": "avx512"}) == "avx512"
    assert kernels_of({**cpu, "device": "cuda"}) is None
    assert kernels_of({"engine": "llamacpp-native"}) is None and kernels_of(None) is None
