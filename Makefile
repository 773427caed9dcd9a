# The two commands the README promises. Both set everything up first.
.PHONY: setup train test lint
PY := .venv/bin/python

setup:
	bash scripts/setup.sh

train: setup
	$(PY) train.py

test: setup
	bash scripts/test.sh

lint: setup
	.venv/bin/ruff check .
	.venv/bin/lint-imports --no-logo
	.venv/bin/mypy
