"""Helpers shared by several test files (not a test module itself)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

from common.datadir import DataFileError, data_file

#: Hydra overrides for an in-seconds training run on real LoCoMo questions with the fake LLM.
TINY_TRAIN_OVERRIDES = [
    "backend=fake",
    "encoder=hashing",
    "memory=no_ce",
    "train=tiny",
    "ppo=tiny",
    "question_bank.max_samples=1",
]


def has_locomo() -> bool:
    """True when the LoCoMo file can be found in the resolved data directory."""
    try:
        data_file("locomo10.json")
    except DataFileError:
        return False
    return True


#: Skip a test (with a message) when the benchmark data directory is absent.
needs_locomo = pytest.mark.skipif(not has_locomo(), reason="LoCoMo data directory absent (locomo10.json)")


def load_script(name: str) -> ModuleType:
    """Import ``scripts/<name>.py`` (scripts are not a package) as a module."""
    scripts = Path(__file__).resolve().parent.parent / "scripts"
    if str(scripts) not in sys.path:  # scripts import their siblings, as when run from the command line
        sys.path.insert(1, str(scripts))
    path = scripts / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered first, as an import does: a dataclass of the script resolves its annotations through it.
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def need_vllm() -> None:
    """Skip the calling test when vLLM is not installed; fail it where BUDGET_ROUTER_REQUIRE_VLLM=1 (CI)."""
    if importlib.util.find_spec("vllm") is None:
        if os.environ.get("BUDGET_ROUTER_REQUIRE_VLLM") == "1":
            pytest.fail("vLLM is not installed but BUDGET_ROUTER_REQUIRE_VLLM=1 (run scripts/setup_vllm.sh)")
        pytest.skip("vLLM is not installed (make test-vllm sets it up)")
