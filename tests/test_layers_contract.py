"""The import contracts of pyproject.toml ([tool.importlinter]) pass, and would fail on a violation.

Each throwaway package tree below has the project's layer names (``common`` ... ``evaluation``) and is
checked with the project's own ``pyproject.toml`` (``lint-imports --config``), run from the tree's
directory so that its packages, not the project's, are the ones analysed. A clean tree passes, so a
failure of the broken trees is due to the one import each adds.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "pyproject.toml"
# The same entry point as the ``lint-imports`` script that scripts/test.sh runs.
LINT = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


def _settings() -> dict:
    return tomllib.loads(CONFIG.read_text())["tool"]["importlinter"]


def _contract(contract_id: str) -> dict:
    return next(c for c in _settings()["contracts"] if c["id"] == contract_id)


def lint_imports(cwd: Path, *contract_ids: str) -> subprocess.CompletedProcess[str]:
    """Run lint-imports with the project's config from ``cwd`` (whose packages it analyses)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # only cwd's packages are seen
    args = [sys.executable, "-c", LINT, "--config", str(CONFIG), "--no-cache"]
    for cid in contract_ids:
        args += ["--contract", cid]
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """A package tree with the project's root packages; ``files`` adds or replaces modules."""
    for pkg in _settings()["root_packages"]:
        (root / pkg).mkdir(parents=True, exist_ok=True)
        (root / pkg / "__init__.py").write_text("")
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(root).parents:
            if parent != Path(".") and not (root / parent / "__init__.py").exists():
                (root / parent / "__init__.py").write_text("")
        path.write_text(text)
    return root


# One module per layer, each importing the layer just below it at top level: the legal flow.
CLEAN = {
    "common/atomic.py": "X = 1\n",
    "memory/hierarchical.py": "from common.atomic import X\n",
    "modules/pipeline.py": "from memory.hierarchical import X\n",
    "benchmarks/loader.py": "from modules.pipeline import X\n",
    "envs/episode.py": "from benchmarks.loader import X\n",
    "policies/router.py": "from envs.episode import X\n",
    "evaluation/frontier.py": "from policies.router import X\n",
}

# The scale package's modules, each importing the core and its own optional dependency.
SCALE = {
    "scale/serving.py": "import requests\nfrom modules.pipeline import X\n",
    "scale/vllm_offline.py": "def api():\n    import vllm\n    return vllm\n",
    "scale/redis_store.py": "def client():\n    import redis\n    return redis\n",
    "scale/sweep_ray.py": "from policies.router import X\n\n\ndef tune():\n    import ray\n    return ray\n",
}


def test_contract_layers_follow_the_data_flow():
    layers = _contract("layers")
    assert layers["type"] == "layers"
    assert layers["layers"] == ["evaluation", "policies", "envs", "benchmarks", "modules", "memory", "common"]
    assert "ignore_imports" not in layers  # no exceptions to the layering
    assert set(_settings()["root_packages"]) == {*layers["layers"], "scale"}  # scale/ is outside the layers


def test_project_passes_its_contracts():
    res = lint_imports(ROOT)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "0 broken" in res.stdout


def test_clean_tree_passes(tmp_path):
    res = lint_imports(write_tree(tmp_path, CLEAN), "layers")
    assert res.returncode == 0, res.stdout + res.stderr


HIDDEN_UPWARD = (
    "from benchmarks.loader import X\n\n\ndef f():\n    from evaluation.frontier import X\n    return X\n"
)


@pytest.mark.parametrize(
    ("module", "text", "importer", "imported"),
    [
        # benchmarks reaching up into envs at module top level
        ("benchmarks/loader.py", "from envs.episode import X\n", "benchmarks.loader", "envs.episode"),
        # the same, hidden inside a function body (how the old frontier code hid its cycles)
        ("envs/episode.py", HIDDEN_UPWARD, "envs.episode", "evaluation.frontier"),
        # the lowest layer importing the highest one
        ("common/atomic.py", "import evaluation.frontier\nX = 1\n", "common.atomic", "evaluation.frontier"),
    ],
)
def test_upward_import_breaks_the_contract(tmp_path, module, text, importer, imported):
    res = lint_imports(write_tree(tmp_path, {**CLEAN, module: text}), "layers")
    assert res.returncode != 0, res.stdout
    assert "BROKEN" in res.stdout
    assert f"{importer} -> {imported}" in res.stdout  # the report names the offending import


def test_clean_tree_keeps_scale_paths_optional(tmp_path):
    res = lint_imports(write_tree(tmp_path, {**CLEAN, **SCALE}), "optional-scale-paths")
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.parametrize(
    ("module", "text"),
    [
        ("envs/components.py", "from scale.serving import start\n"),  # a core module importing serving
        ("modules/pipeline.py", "from memory.hierarchical import X\nimport scale.vllm_offline\n"),
        ("policies/training/loop.py", "def sweep():\n    import ray\n"),  # Ray outside scale/
        ("evaluation/frontier.py", "from scale import sweep_ray\n"),
        ("modules/cache.py", "import redis\n"),
    ],
)
def test_core_import_of_a_scale_path_breaks_the_contract(tmp_path, module, text):
    res = lint_imports(write_tree(tmp_path, {**CLEAN, **SCALE, module: text}), "optional-scale-paths")
    assert res.returncode != 0, res.stdout
    assert "BROKEN" in res.stdout
    assert module.removesuffix(".py").replace("/", ".") in res.stdout


def test_test_command_runs_the_contract_before_pytest():
    script = (ROOT / "scripts" / "test.sh").read_text().splitlines()
    commands = [line.strip() for line in script if line.strip() and not line.lstrip().startswith("#")]
    lint = next(i for i, c in enumerate(commands) if c.split()[0] == ".venv/bin/lint-imports")
    pytest_cmd = next(i for i, c in enumerate(commands) if "-m pytest" in c)
    assert "set -euo pipefail" in commands and lint < pytest_cmd  # a broken contract stops the run
