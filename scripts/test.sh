#!/usr/bin/env bash
# The test command (CI runs this through .ci/run): lint, the layering contract, the type check, then the
# whole suite, two workers of 1 thread each.
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
# Two workers on the two cores, each test file on one worker (module fixtures stay shared within a file); every
# process keeps 1 thread (above), so the workers do not fight over the cores. PYTEST_WORKERS=0 runs in-process.
# The Ray tests run in `make test-ray` alone: two local Ray clusters started by two workers at once stall.
.venv/bin/python -m pytest -n "${PYTEST_WORKERS:-2}" --dist loadfile -m "not ray" "$@"
