#!/usr/bin/env bash
# Build llama.cpp's server and bench tools for THIS CPU (AVX-512/VNNI/BF16 where present), once, cached.
# The prebuilt xllamacpp wheel is compiled for AVX2 only; a native build is what the `llamacpp_server`
# backend (modules/backends/llamacpp_server.py) runs. Source: the llama.cpp vendored in the
# llama-cpp-python sdist (the only way to get llama.cpp's source from a package registry).
#   bash scripts/build_llamacpp.sh                 -> prints the bin directory (~/.cache/budget_router/llama.cpp/...)
#   LLAMACPP_FLAGS=avx512 bash scripts/build_...  -> AVX-512/VNNI/BF16 without AMX (this source's AMX weight
#                                                    repacking crashes at load on Sapphire Rapids: exit -11)
#   LLAMACPP_FLAGS=avx2 bash scripts/build_...    -> portable AVX2, the same ISA as the prebuilt wheel
# Needs cmake and a C++ compiler (apt-get install cmake g++). ~4-8 min on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC_VERSION=${LLAMACPP_PY_VERSION:-0.3.36}
flags=${LLAMACPP_FLAGS:-avx512}
CACHE=${BUDGET_ROUTER_CACHE:-$HOME/.cache/budget_router}
case $flags in
  native) arch=(-DGGML_NATIVE=ON) ;;
  avx512) arch=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX_VNNI=ON
                -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON
                -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF) ;;
  avx2) arch=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF) ;;
  *) echo "build_llamacpp.sh: LLAMACPP_FLAGS must be native, avx512 or avx2, not '$flags'" >&2; exit 2 ;;
esac
out="$CACHE/llama.cpp/$SRC_VERSION-$flags"
if [[ -x "$out/bin/llama-server" ]]; then echo "$out/bin"; exit 0; fi
command -v cmake >/dev/null || { echo "build_llamacpp.sh: cmake is missing (apt-get install cmake g++)" >&2; exit 1; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
python3 -m pip download -q --disable-pip-version-check --no-binary :all: --no-deps \
  -d "$work" "llama-cpp-python==$SRC_VERSION" >&2
tar -xzf "$work"/llama_cpp_python-*.tar.gz -C "$work"
src=$(echo "$work"/llama_cpp_python-*/vendor/llama.cpp)
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release "${arch[@]}" \
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
  -DBUILD_SHARED_LIBS=OFF >&2
cmake --build "$work/build" -j "$(nproc)" --target llama-server llama-bench >&2
# Install atomically: a half-copied bin/ must never be found by the existence check above.
mkdir -p "$(dirname "$out")"; stage=$(mktemp -d "$out.tmp.XXXX")
mkdir -p "$stage/bin"; cp "$work/build/bin/llama-server" "$work/build/bin/llama-bench" "$stage/bin/"
"$stage/bin/llama-server" --version > "$stage/VERSION" 2>&1 || true
rm -rf "$out"; mv "$stage" "$out"
echo "$out/bin"
