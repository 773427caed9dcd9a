#!/usr/bin/env bash
# The test command (CI runs this through .ci/run): lint, the layering contract, the type check, then the
# whole suite on 1 thread.
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} MKL_NUM_THREADS=${MKL_NUM_THREADS:-1}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 WANDB_MODE=disabled PYTHONHASHSEED=0
.venv/bin/ruff check .
# The import contracts of pyproject.toml ([tool.importlinter]): an upward import between the layers,
# or a core module importing an optional scale path, fails the run here (set -e) before pytest.
.venv/bin/lint-imports --no-logo
# mypy over the core packages, configured in pyproject.toml ([tool.mypy]: which packages, how strict).
.venv/bin/mypy
.venv/bin/python -m pytest "$@"
