"""The CPU this process runs on: its model and instruction-set flags, and what a build may use of them.

Two things need this, and both must agree on it:

* ``scripts/build_llamacpp.sh`` compiles llama.cpp for the CPU it runs on. It asks this file (run as a
  script with the system Python, so it imports nothing but the standard library) which GGML options the
  CPU supports, instead of hard-coding a flag set: a hard-coded ``-DGGML_AVX_VNNI=ON`` built a server that
  dies of SIGILL on AMD EPYC, which has AVX-512 VNNI but not the AVX-VNNI of Intel's cores. The build
  writes a manifest (``build.json``) saying which CPU flags the binary needs.
* :func:`modules.backends.llama_server.find_server_binary` picks a build whose needs this CPU meets (a
  home directory shared by an Intel and an AMD machine holds one build per feature set), and a build that
  does not fit is refused with the missing flags named, before it can crash.

Every performance number records :func:`cpu_record` beside it.

Usage as a script (``python3 common/cpu.py MODE``)::

    record                 -> JSON: the CPU model, vendor and ISA flags
    ggml-args auto|avx2    -> the cmake -D options for that mode on this CPU, one per line
    requires auto|avx2|native -> the CPU flags a build of that mode needs, space-separated
    key auto|avx2|native   -> a short stable name of the feature set (the build's cache directory)
    check-binary BIN FLAG... -> exit 1 (naming them) if BIN holds instructions needing other flags

``LLAMACPP_AMX=1`` in the environment lets ``auto`` and ``native`` use AMX where the CPU has it (off by
default: the vendored llama.cpp's AMX weight repacking crashed at load on Sapphire Rapids).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

#: Where the CPU's flags are read; ``$BUDGET_ROUTER_CPUINFO`` names another file (building for another
#: machine of a cluster, or testing the choice for a CPU one does not have).
CPUINFO = Path(os.environ.get("BUDGET_ROUTER_CPUINFO", "/proc/cpuinfo"))

#: The x86 instruction-set flags (``/proc/cpuinfo`` names) a compiler may use: what ``-march=native``
#: can turn on, so what a native build may need. Flags outside this list (``ht``, ``hypervisor``…)
#: say nothing about which instructions run.
X86_ISA_FLAGS: tuple[str, ...] = (
    "sse", "sse2", "pni", "ssse3", "sse4_1", "sse4_2", "popcnt", "aes", "pclmulqdq", "movbe",
    "avx", "avx2", "fma", "f16c", "bmi1", "bmi2", "lzcnt", "abm", "adx", "sha_ni", "gfni", "vaes",
    "vpclmulqdq", "avx_vnni", "avx_vnni_int8", "avx_ifma", "avx_ne_convert",
    "avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl", "avx512ifma", "avx512vbmi",
    "avx512_vbmi2", "avx512_vnni", "avx512_bitalg", "avx512_vpopcntdq", "avx512_bf16", "avx512_fp16",
    "amx_tile", "amx_int8", "amx_bf16", "amx_fp16",
)  # fmt: skip

#: GGML's x86 build options and the CPU flags each needs, all of them (ggml/CMakeLists.txt of the
#: vendored llama.cpp). Order is cmake's; an AVX-512 extension needs the AVX-512 base too.
GGML_X86_OPTIONS: dict[str, tuple[str, ...]] = {
    "GGML_SSE42": ("sse4_2",),
    "GGML_AVX": ("avx",),
    "GGML_AVX2": ("avx2",),
    "GGML_BMI2": ("bmi2",),
    "GGML_FMA": ("fma",),
    "GGML_F16C": ("f16c",),
    "GGML_AVX_VNNI": ("avx_vnni",),
    "GGML_AVX512": ("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"),
    "GGML_AVX512_VBMI": ("avx512f", "avx512vbmi"),
    "GGML_AVX512_VNNI": ("avx512f", "avx512_vnni"),
    "GGML_AVX512_BF16": ("avx512f", "avx512_bf16"),
    "GGML_AMX_TILE": ("amx_tile",),
    "GGML_AMX_INT8": ("amx_int8",),
    "GGML_AMX_BF16": ("amx_bf16",),
}
AMX_OPTIONS = ("GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16")
#: The portable ``avx2`` mode: the instruction set of the prebuilt xllamacpp wheel.
AVX2_OPTIONS = ("GGML_SSE42", "GGML_AVX", "GGML_AVX2", "GGML_BMI2", "GGML_FMA", "GGML_F16C")
#: How ``scripts/build_llamacpp.sh`` may target the CPU: its options chosen from the CPU's flags, a
#: portable AVX2 set, or the compiler's ``-march=native`` (AMX switched off unless asked for).
BUILD_MODES = ("auto", "avx2", "native")


@dataclass(frozen=True)
class CpuInfo:
    """What ``/proc/cpuinfo`` says of the first CPU.

    Attributes:
        model: The ``model name`` line, e.g. ``"AMD EPYC 9R14"``.
        vendor: The ``vendor_id`` line (``GenuineIntel``, ``AuthenticAMD``).
        flags: Every flag of the ``flags`` line.
    """

    model: str
    vendor: str
    flags: frozenset[str]

    @property
    def isa_flags(self) -> list[str]:
        """The instruction-set flags among :attr:`flags`, in :data:`X86_ISA_FLAGS` order."""
        return [f for f in X86_ISA_FLAGS if f in self.flags]


def parse_cpuinfo(text: str) -> CpuInfo:
    """Read the model, vendor and flags of the first processor block of a ``/proc/cpuinfo`` text."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break  # the first processor is enough: all cores of one machine share the flags
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return CpuInfo(
        model=fields.get("model name", platform.processor() or "unknown"),
        vendor=fields.get("vendor_id", "unknown"),
        flags=frozenset(fields.get("flags", "").split()),
    )


def cpu_info(path: Path = CPUINFO) -> CpuInfo:
    """This machine's :class:`CpuInfo` (an empty flag set where ``/proc/cpuinfo`` cannot be read)."""
    try:
        return parse_cpuinfo(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return CpuInfo(model=platform.processor() or "unknown", vendor="unknown", flags=frozenset())


def cpu_record(info: CpuInfo | None = None) -> dict[str, object]:
    """What every performance number is recorded with: model, vendor, ISA flags and core count."""
    info = info or cpu_info()
    return {
        "id": cpu_id(info),
        "model": info.model,
        "vendor": info.vendor,
        "isa_flags": info.isa_flags,
        "cores": os.cpu_count(),
    }


def cpu_id(info: CpuInfo | None = None) -> str:
    """A short name of this CPU class for result files.

    Vendor, widest vector ISA, AMX, and a hash of the model and ISA flags (e.g.
    ``intel-avx512-amx-3f2a9c``, ``amd-avx512-71be04``).
    """
    info = info or cpu_info()
    vendor = {"GenuineIntel": "intel", "AuthenticAMD": "amd"}.get(info.vendor, "cpu")
    flags = set(info.isa_flags)
    level = "avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else "sse"
    digest = hashlib.sha256(f"{info.model}|{' '.join(info.isa_flags)}".encode()).hexdigest()[:6]
    return "-".join([vendor, level, *(["amx"] if "amx_int8" in flags else []), digest])


def amx_requested(env: Mapping[str, str] = os.environ) -> bool:
    """Whether the user opted into AMX kernels (``LLAMACPP_AMX=1``)."""
    return env.get("LLAMACPP_AMX", "0").strip().lower() in {"1", "on", "true", "yes"}


def ggml_options(mode: str, info: CpuInfo, *, amx: bool = False) -> dict[str, bool]:
    """GGML's x86 options for ``mode`` on ``info``'s CPU: each on only where the CPU has its flags.

    Args:
        mode: ``auto`` (everything the CPU supports) or ``avx2`` (the portable set, whatever the CPU).
        info: The CPU the build is for.
        amx: Let ``auto`` use AMX where the CPU has it.

    Raises:
        ValueError: An unknown mode, or ``native`` (which leaves the choice to the compiler).
    """
    if mode == "avx2":
        return {opt: opt in AVX2_OPTIONS for opt in GGML_X86_OPTIONS}
    if mode != "auto":
        raise ValueError(f"ggml options are chosen for mode 'auto' or 'avx2', not {mode!r}")
    return {
        opt: all(f in info.flags for f in needs) and (amx or opt not in AMX_OPTIONS)
        for opt, needs in GGML_X86_OPTIONS.items()
    }


def build_requires(mode: str, info: CpuInfo, *, amx: bool = False) -> list[str]:
    """The CPU flags a build of ``mode`` made on ``info``'s CPU may execute, so needs where it runs.

    A native build may use any instruction set the compiler sees on the building CPU, so it needs all
    of them (less AMX unless ``amx``); an ``auto``/``avx2`` build needs what its GGML options need.
    """
    if mode not in BUILD_MODES:
        raise ValueError(f"build mode must be one of {', '.join(BUILD_MODES)}, not {mode!r}")
    if mode == "native":
        return [f for f in info.isa_flags if amx or not f.startswith("amx_")]
    needed: set[str] = set()
    for opt, on in ggml_options(mode, info, amx=amx).items():
        if on:
            needed.update(GGML_X86_OPTIONS[opt])
    return [f for f in X86_ISA_FLAGS if f in needed]


def feature_key(mode: str, requires: Iterable[str]) -> str:
    """A short stable name for a build's feature set, readable and unique.

    E.g. ``auto-avx512-avx512vnni-avx512bf16-cd3586af``; the hash covers the full list.
    """
    flags = sorted(requires)
    digest = hashlib.sha256(f"{mode}:{' '.join(flags)}".encode()).hexdigest()[:8]
    level = "avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else "sse"
    extras = [f for f in ("avx_vnni", "avx512_vnni", "avx512_bf16", "amx_int8") if f in flags]
    tags = "-".join([level, *(e.replace("_", "") for e in extras)])
    return f"{mode}-{tags}-{digest}"


def missing_flags(requires: Iterable[str], info: CpuInfo) -> list[str]:
    """The flags of ``requires`` that ``info``'s CPU lacks (empty: a build needing them runs here)."""
    return [f for f in requires if f not in info.flags]


#: Instructions of objdump's AT&T listing and the CPU flag each needs: the ISAs that differ between the
#: x86 machines this project runs on. GCC encodes a 256-bit VNNI dot product as VEX (AVX-VNNI, printed
#: ``{vex}``) whenever -mavxvnni is on, even where AVX-512 VNNI's EVEX form would do: that is the SIGILL.
_INSTRUCTION_FLAGS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\{vex\}\s+vpdp(?:bu|ws)sds?\b"), "avx_vnni"),
    (re.compile(r"(?<!\} )\bvpdp(?:bu|ws)sds?\b"), "avx512_vnni"),
    (re.compile(r"\b(?:ldtilecfg|sttilecfg|tileloadd|tileloaddt1|tilestored|tilezero|tilerelease)\b"),
     "amx_tile"),
    (re.compile(r"\btdpb[su][su]d\b"), "amx_int8"),
    (re.compile(r"\btdpbf16ps\b"), "amx_bf16"),
    (re.compile(r"\b(?:vdpbf16ps|vcvtne2ps2bf16)\b|(?<!\} )\bvcvtneps2bf16\b"), "avx512_bf16"),
    (re.compile(r"\b(?:vpermb|vpermi2b|vpermt2b|vpmultishiftqb)\b"), "avx512vbmi"),
    (re.compile(r"%zmm"), "avx512f"),
)


def instructions_outside(binary: Path, allowed: Iterable[str]) -> dict[str, str]:
    """Instructions of ``binary`` that need a CPU flag outside ``allowed``: ``{flag: first such line}``.

    Disassembles with ``objdump -d`` (binutils), so what a build *contains* is checked, not what its
    flags meant to produce: a build that would die of SIGILL on a CPU is caught on any machine.

    Raises:
        OSError: objdump is missing or cannot read the file.
    """
    allowed_set = set(allowed)
    found: dict[str, str] = {}
    checks = [(pattern, flag) for pattern, flag in _INSTRUCTION_FLAGS if flag not in allowed_set]
    with subprocess.Popen(
        ["objdump", "-d", "--no-show-raw-insn", str(binary)], stdout=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            for pattern, flag in checks:
                if flag not in found and pattern.search(line):
                    found[flag] = line.strip()
    if proc.returncode != 0:
        raise OSError(f"objdump -d {binary} exited with code {proc.returncode}")
    return found


def _main(argv: list[str]) -> int:
    if "BUDGET_ROUTER_CPUINFO" in os.environ and not CPUINFO.is_file():
        print(f"common/cpu.py: BUDGET_ROUTER_CPUINFO={CPUINFO}: no such file", file=sys.stderr)
        return 2
    info = cpu_info()
    if not info.isa_flags and argv[:1] != ["record"]:
        # No flags line (no /proc, another OS): a build from them would be plain x86-64.
        print(f"common/cpu.py: no instruction-set flags in {CPUINFO}; building without SIMD options "
              "(LLAMACPP_FLAGS=native lets the compiler detect them)", file=sys.stderr)  # fmt: skip
    amx = amx_requested()
    if argv[:1] == ["record"]:
        print(json.dumps(cpu_record(info)))
        return 0
    if len(argv) == 2 and argv[0] in {"ggml-args", "requires", "key"}:
        what, mode = argv
        try:
            if what == "ggml-args":
                opts = ggml_options(mode, info, amx=amx)
                print("\n".join(f"-D{opt}={'ON' if on else 'OFF'}" for opt, on in opts.items()))
            elif what == "requires":
                print(" ".join(build_requires(mode, info, amx=amx)))
            else:
                print(feature_key(mode, build_requires(mode, info, amx=amx)))
        except ValueError as exc:
            print(f"common/cpu.py: {exc}", file=sys.stderr)
            return 2
        return 0
    if len(argv) >= 2 and argv[0] == "check-binary":
        outside = instructions_outside(Path(argv[1]), argv[2:])
        for flag, line in outside.items():
            print(f"{argv[1]}: uses {flag}, which its build does not require: {line}", file=sys.stderr)
        return 1 if outside else 0
    print(
        "usage: python3 common/cpu.py record | ggml-args MODE | requires MODE | key MODE"
        " | check-binary BINARY [FLAG ...]",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
