#!/usr/bin/env bash
# The test command (CI runs this through .ci/run): lint and the layering contract, then the whole suite (two
# workers of 1 thread each) with the type check beside it.
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} MKL_NUM_THREADS=${MKL_NUM_THREADS:-1}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 WANDB_MODE=disabled PYTHONHASHSEED=0
# Byte-compile the venv once, on both cores (a no-op when nothing changed). Set-up installs with --no-compile
# (pip compiles on one core), and where PYTHONDONTWRITEBYTECODE is set (the machines this project is tested
# on set it) Python never writes what it compiles, so each of the suite's many train.py subprocesses
# recompiled torch, transformers & co.: 10.7 s of imports against 4.6 s compiled; the suite took 6 min 25 s
# against 3 min 54 s (2-core AMD EPYC).
# (-x: torch ships one file in Python 3.12 syntax.)
PYTHONDONTWRITEBYTECODE= .venv/bin/python -m compileall -q -j 0 -x 'py312_' .venv/lib/python3*/site-packages >/dev/null \
  || echo "test.sh: byte-compiling .venv failed; the suite runs, only slower" >&2
.venv/bin/ruff check .
# The import contracts of pyproject.toml ([tool.importlinter]): an upward import between the layers,
# or a core module importing an optional scale path, fails the run here (set -e) before pytest.
.venv/bin/lint-imports --no-logo
# mypy over the core packages, configured in pyproject.toml ([tool.mypy]: which packages, how strict), beside
# pytest rather than before it: a fresh clone's mypy has no cache (~75 CPU-s, one core) and the suite leaves a
# core idle at its start and its tail. Its report is printed, and a type error fails the run, after pytest.
mypy_log=$(mktemp)
.venv/bin/mypy > "$mypy_log" 2>&1 &
mypy_pid=$!
# Two workers on the two cores, each test file on one worker (module fixtures stay shared within a file); every
# process keeps 1 thread (above), so the workers do not fight over the cores. PYTEST_WORKERS=0 runs in-process.
# The Ray tests run in `make test-ray` alone: two local Ray clusters started by two workers at once stall.
pytest_rc=0
.venv/bin/python -m pytest -n "${PYTEST_WORKERS:-2}" --dist loadfile -m "not ray" "$@" || pytest_rc=$?
mypy_rc=0
wait "$mypy_pid" || mypy_rc=$?
cat "$mypy_log"
rm -f "$mypy_log"
[[ $mypy_rc == 0 ]] || echo "test.sh: mypy found type errors (above)" >&2
(( pytest_rc == 0 && mypy_rc == 0 )) || exit $(( pytest_rc != 0 ? pytest_rc : mypy_rc ))
