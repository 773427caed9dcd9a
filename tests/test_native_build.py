"""The native llama.cpp build targets the CPU it is built for, and a build for another CPU never runs.

An AMD EPYC has AVX-512 VNNI but not Intel's AVX-VNNI; a build that assumed AVX-VNNI died of SIGILL there.
The CPU is read from ``/proc/cpuinfo`` (``$BUDGET_ROUTER_CPUINFO`` in these tests: one Sapphire Rapids and
one EPYC 9R14 text under tests/data), each build records what it needs, and the backend checks it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from common.cpu import (
    build_requires,
    cpu_id,
    cpu_info,
    cpu_record,
    feature_key,
    ggml_options,
    instructions_outside,
    missing_flags,
)
from modules.backends.base import BackendError
from modules.backends.llama_server import LlamaServerProcess, find_server_binary

ROOT = Path(__file__).resolve().parent.parent
AMD = ROOT / "tests" / "data" / "cpuinfo-amd-epyc.txt"
INTEL = ROOT / "tests" / "data" / "cpuinfo-intel-sapphire-rapids.txt"


def test_cpuinfo_is_read_from_the_first_processor() -> None:
    amd, intel = cpu_info(AMD), cpu_info(INTEL)
    assert amd.model == "AMD EPYC 9R14 96-Core Processor" and amd.vendor == "AuthenticAMD"
    assert {"avx512f", "avx512_vnni", "avx512_bf16"} <= amd.flags and "avx_vnni" not in amd.flags
    assert {"avx_vnni", "amx_int8"} <= intel.flags
    assert "fpu" not in amd.isa_flags and "avx512_vnni" in amd.isa_flags  # ISA flags only
    assert cpu_id(amd).startswith("amd-avx512-") and cpu_id(intel).startswith("intel-avx512-amx-")
    record = cpu_record(amd)
    assert record["id"] == cpu_id(amd) and record["model"] == amd.model
    assert "avx512_vnni" in record["isa_flags"]


def test_auto_turns_on_what_the_cpu_has_and_amx_only_when_asked() -> None:
    amd = ggml_options("auto", cpu_info(AMD))
    assert amd["GGML_AVX512"] and amd["GGML_AVX512_VNNI"] and amd["GGML_AVX512_BF16"]
    assert not amd["GGML_AVX_VNNI"]  # the flag whose instructions killed the server on EPYC
    assert not any(amd[o] for o in ("GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16"))
    intel = ggml_options("auto", cpu_info(INTEL))
    assert intel["GGML_AVX_VNNI"] and not intel["GGML_AMX_INT8"]
    assert ggml_options("auto", cpu_info(INTEL), amx=True)["GGML_AMX_INT8"]
    assert not ggml_options("auto", cpu_info(AMD), amx=True)["GGML_AMX_INT8"]  # asked, but not there
    assert ggml_options("avx2", cpu_info(INTEL))["GGML_AVX512"] is False
    with pytest.raises(ValueError, match="'native'"):
        ggml_options("native", cpu_info(INTEL))


def test_requirements_fit_the_cpu_they_were_made_for() -> None:
    amd, intel = cpu_info(AMD), cpu_info(INTEL)
    for mode in ("auto", "native", "avx2"):
        assert missing_flags(build_requires(mode, amd), amd) == []
        assert missing_flags(build_requires(mode, intel), intel) == []
    # An Intel build does not run on the EPYC, and says why; the EPYC's auto build runs on this Intel.
    assert missing_flags(build_requires("auto", intel), amd) == ["avx_vnni"]
    assert missing_flags(build_requires("auto", amd), intel) == []
    assert "amx_int8" not in build_requires("native", intel)
    keys = {feature_key("auto", build_requires("auto", info)) for info in (amd, intel)}
    assert len(keys) == 2


def _script(*args: str, cpuinfo: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "BUDGET_ROUTER_CPUINFO": str(cpuinfo), **env}
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "build_llamacpp.sh"), *args],
        capture_output=True, text=True, env=environ, timeout=60,
    )  # fmt: skip


def test_the_build_script_targets_the_cpu_it_is_told_of() -> None:
    amd = _script("--print", cpuinfo=AMD)
    assert amd.returncode == 0, amd.stderr
    assert "-DGGML_AVX_VNNI=OFF" in amd.stdout and "-DGGML_AVX512_VNNI=ON" in amd.stdout
    assert "-DGGML_AMX_INT8=OFF" in amd.stdout
    requires = next(line for line in amd.stdout.splitlines() if line.startswith("requires:"))
    assert "avx_vnni" not in requires.split() and "avx512_vnni" in requires.split()
    intel = _script("--print", cpuinfo=INTEL)
    assert "-DGGML_AVX_VNNI=ON" in intel.stdout
    dirs = {r.stdout.splitlines()[-1] for r in (amd, intel)}
    assert len(dirs) == 2  # one cached build per feature set
    old = _script("--print", cpuinfo=AMD, LLAMACPP_FLAGS="avx512")
    assert old.returncode == 2 and "AVX-VNNI" in old.stderr
    native = _script("--print", cpuinfo=AMD, LLAMACPP_FLAGS="native")
    assert native.returncode == 2 and "auto" in native.stderr
    missing = _script("--print", cpuinfo=ROOT / "no-such-cpuinfo")
    assert missing.returncode == 2 and "no-such-cpuinfo: no such file" in missing.stderr


@pytest.mark.skipif(not (shutil.which("gcc") and shutil.which("objdump")), reason="needs gcc and objdump")
def test_the_binary_check_finds_avx_vnni_that_gcc_chose(tmp_path: Path) -> None:
    # What happened to the server: with -mavxvnni on, GCC encodes even AVX-512VL's 256-bit dot product
    # as VEX (AVX-VNNI), which an EPYC cannot execute.
    src = tmp_path / "dot.c"
    src.write_text(
        "#include <immintrin.h>\n"
        "__m256i dot(__m256i a, __m256i b, __m256i c) { return _mm256_dpbusd_epi32(a, b, c); }\n"
    )
    amd_needs = build_requires("auto", cpu_info(AMD))
    for extra, expected in ((["-mavxvnni"], {"avx_vnni"}), ([], set())):
        obj = tmp_path / f"dot{len(extra)}.o"
        subprocess.run(["gcc", "-O2", "-mavx512vnni", "-mavx512vl", *extra, "-c", str(src), "-o", str(obj)],
                       check=True)  # fmt: skip
        assert set(instructions_outside(obj, amd_needs)) == expected
    assert set(instructions_outside(tmp_path / "dot0.o", ["avx512f"])) == {"avx512_vnni"}


def _fake_build(cache: Path, name: str, mode: str, requires: list[str], body: str = "exit 0") -> Path:
    root = cache / "llama.cpp" / name
    (root / "bin").mkdir(parents=True)
    server = root / "bin" / "llama-server"
    server.write_text(f"#!/bin/sh\n[ \"$1\" = --version ] && echo 'version: 1 (fake)' && exit 0\n{body}\n")
    server.chmod(0o755)
    target = {"model": name}
    (root / "build.json").write_text(json.dumps({"mode": mode, "requires": requires, "target_cpu": target}))
    return server


def test_the_backend_runs_only_a_build_that_fits_this_cpu(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("BUDGET_ROUTER_CACHE", str(tmp_path))
    monkeypatch.delenv("LLAMA_SERVER", raising=False)
    amd, intel = cpu_info(AMD), cpu_info(INTEL)
    intel_bin = _fake_build(tmp_path, "0.3.36-auto-intel", "auto", build_requires("auto", intel))
    fits_none = r"no llama-server here fits this CPU \(AMD EPYC.*avx_vnni.*build_llamacpp"
    with pytest.raises(BackendError, match=fits_none):
        find_server_binary(cpu=amd)
    assert find_server_binary(cpu=intel) == intel_bin
    # Shared home of an Intel and an AMD machine: each picks its own build.
    amd_bin = _fake_build(tmp_path, "0.3.36-auto-amd", "auto", build_requires("auto", amd))
    _fake_build(tmp_path, "0.3.36-avx2-x", "avx2", build_requires("avx2", amd))
    assert find_server_binary(cpu=amd) == amd_bin
    assert find_server_binary(cpu=intel) == intel_bin  # auto, and more of the CPU than the EPYC's build
    # An explicit binary is checked too, before it can die mid-load.
    monkeypatch.setenv("LLAMA_SERVER", str(intel_bin))
    with pytest.raises(BackendError, match=r"built for another CPU.*avx_vnni.*this CPU is AMD EPYC"):
        find_server_binary(cpu=amd)


def test_only_old_builds_without_a_manifest_say_so(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("BUDGET_ROUTER_CACHE", str(tmp_path))
    monkeypatch.delenv("LLAMA_SERVER", raising=False)
    server = _fake_build(tmp_path, "0.3.36-avx512", "auto", [])
    (server.parent.parent / "build.json").unlink()
    with pytest.raises(BackendError, match=r"1 older build\(s\) without build.json.*build_llamacpp\.sh"):
        find_server_binary()


def test_a_server_killed_by_sigill_at_load_names_the_cause(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("BUDGET_ROUTER_CACHE", str(tmp_path))
    server = _fake_build(tmp_path, "x", "auto", [], body="kill -ILL $$")
    monkeypatch.setenv("LLAMA_SERVER", str(server))
    sigill = r"code -4 while loading \(SIGILL: an instruction this CPU.*build_llamacpp"
    with pytest.raises(BackendError, match=sigill):
        LlamaServerProcess(tmp_path / "model.gguf", n_ctx=512, n_parallel=1, n_threads=1)
