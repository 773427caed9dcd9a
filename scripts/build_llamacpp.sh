#!/usr/bin/env bash
# Build llama.cpp's server and bench tools for THIS CPU, once, cached per CPU feature set.
# The prebuilt xllamacpp wheel is compiled for AVX2 only; a native build is what the `llamacpp_native`
# backend (modules/backends/llama_server.py) runs. Source: the llama.cpp vendored in the
# llama-cpp-python sdist (the only way to get llama.cpp's source from a package registry).
#   bash scripts/build_llamacpp.sh                 -> prints the bin directory
#                                                    (~/.cache/budget_router/llama.cpp/<version>-<mode>-<features>/bin)
#   LLAMACPP_FLAGS=auto   (default) every GGML option this CPU's flags support, read from /proc/cpuinfo by
#                         common/cpu.py (AVX-VNNI only where the CPU has it: AMD EPYC has AVX-512 VNNI
#                         but not AVX-VNNI, and a build that assumed it died of SIGILL there)
#   LLAMACPP_FLAGS=native the compiler's -march=native (AMX switched off with -mno-amx-*)
#   LLAMACPP_FLAGS=avx2   portable AVX2, the same ISA as the prebuilt wheel
#   LLAMACPP_AMX=1        let auto/native use AMX where the CPU has it (off by default: this source's AMX
#                         weight repacking crashed at load on Sapphire Rapids, exit -11)
#   bash scripts/build_llamacpp.sh --print       -> what it would build here (mode, cmake flags, directory), no build
#   BUDGET_ROUTER_CPUINFO=<file>                 -> build for the CPU that /proc/cpuinfo text describes
# After compiling, the binary is disassembled (common/cpu.py check-binary): an instruction its build.json
# does not require fails the build, so a build that would die of SIGILL elsewhere is never installed.
# Each build directory holds build.json: the CPU flags the binary needs, the CPU it was built on and the
# GGML options; the backend only runs a build whose needs this CPU meets. Needs cmake and a C++ compiler
# (apt-get install cmake g++). ~5-8 min on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC_VERSION=${LLAMACPP_PY_VERSION:-0.3.36}
mode=${LLAMACPP_FLAGS:-auto}
CACHE=${BUDGET_ROUTER_CACHE:-$HOME/.cache/budget_router}
CC_=${CC:-cc}
cpu() { python3 common/cpu.py "$@"; }
case $mode in
  auto|avx2) opts=$(cpu ggml-args "$mode"); mapfile -t arch <<< "$opts"; arch=(-DGGML_NATIVE=OFF "${arch[@]}") ;;
  native)
    if [[ -n "${BUDGET_ROUTER_CPUINFO:-}" ]]; then
      echo "build_llamacpp.sh: LLAMACPP_FLAGS=native builds for the CPU it runs on, not the one" \
           "\$BUDGET_ROUTER_CPUINFO describes; use LLAMACPP_FLAGS=auto for that" >&2; exit 2
    fi
    arch=(-DGGML_NATIVE=ON)
    if [[ "${LLAMACPP_AMX:-0}" != 1 ]]; then
      # GCC lets an explicit -mno-X win over -march=native whatever the order; only the AMX flags this
      # compiler knows are passed (gcc 12 has no amx-fp16).
      noamx=""
      for f in amx-tile amx-int8 amx-bf16 amx-fp16 amx-complex; do
        "$CC_" "-mno-$f" -E -x c /dev/null >/dev/null 2>&1 && noamx+=" -mno-$f"
      done
      arch+=("-DCMAKE_C_FLAGS=${noamx# }" "-DCMAKE_CXX_FLAGS=${noamx# }")
    fi ;;
  avx512) echo "build_llamacpp.sh: LLAMACPP_FLAGS=avx512 is gone (it assumed AVX-VNNI, which AMD EPYC lacks);" \
            "the default, auto, turns on every AVX-512 option this CPU has" >&2; exit 2 ;;
  *) echo "build_llamacpp.sh: LLAMACPP_FLAGS must be auto, native or avx2, not '$mode'" >&2; exit 2 ;;
esac
requires=$(cpu requires "$mode")
out="$CACHE/llama.cpp/$SRC_VERSION-$(cpu key "$mode")"
if [[ "${1:-}" == "--print" ]]; then
  printf 'mode: %s\ncmake: %s\nrequires: %s\ndirectory: %s\n' "$mode" "${arch[*]}" "$requires" "$out"; exit 0
fi
if [[ -x "$out/bin/llama-server" && -f "$out/build.json" ]]; then echo "$out/bin"; exit 0; fi
command -v cmake >/dev/null || { echo "build_llamacpp.sh: cmake is missing (apt-get install cmake g++)" >&2; exit 1; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
python3 -m pip download -q --disable-pip-version-check --no-binary :all: --no-deps \
  -d "$work" "llama-cpp-python==$SRC_VERSION" >&2
tar -xzf "$work"/llama_cpp_python-*.tar.gz -C "$work"
src=$(echo "$work"/llama_cpp_python-*/vendor/llama.cpp)
echo "build_llamacpp.sh: mode $mode on $(cpu record | python3 -c 'import json,sys; print(json.load(sys.stdin)["model"])'):" \
  "${arch[*]}" >&2
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release "${arch[@]}" \
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
  -DBUILD_SHARED_LIBS=OFF >&2
cmake --build "$work/build" -j "$(nproc)" --target llama-server llama-bench >&2
for b in llama-server llama-bench; do
  # shellcheck disable=SC2086  # $requires is a list of flags
  cpu check-binary "$work/build/bin/$b" $requires \
    || { echo "build_llamacpp.sh: $b uses instructions beyond its flags; not installed" >&2; exit 1; }
done
# Install atomically: a half-copied bin/ must never be found by the existence check above.
mkdir -p "$(dirname "$out")"; stage=$(mktemp -d "$out.tmp.XXXX")
mkdir -p "$stage/bin"; cp "$work/build/bin/llama-server" "$work/build/bin/llama-bench" "$stage/bin/"
"$stage/bin/llama-server" --version > "$stage/VERSION" 2>&1 || true
MODE="$mode" REQUIRES="$requires" SRC_VERSION="$SRC_VERSION" ARCH="${arch[*]}" \
  COMPILER="$("$CC_" --version | head -1)" CPU_RECORD="$(cpu record)" \
  COMPILED_ON="$(BUDGET_ROUTER_CPUINFO=/proc/cpuinfo cpu record)" python3 - "$stage/build.json" <<'PY'
import json, os, sys
manifest = {
    "format_version": 1,
    "source": f"llama-cpp-python=={os.environ['SRC_VERSION']}",
    "mode": os.environ["MODE"],
    "requires": os.environ["REQUIRES"].split(),
    "cmake_arch": os.environ["ARCH"].split(),
    "compiler": os.environ["COMPILER"],
    "target_cpu": json.loads(os.environ["CPU_RECORD"]),  # this machine's, or $BUDGET_ROUTER_CPUINFO's
    "compiled_on": json.loads(os.environ["COMPILED_ON"]),
}
with open(sys.argv[1], "w", encoding="utf-8") as fh:
    json.dump(manifest, fh, indent=1)
PY
rm -rf "$out"; mv "$stage" "$out"
echo "$out/bin"
