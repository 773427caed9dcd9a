"""The ``Example:`` blocks of the public API's docstrings run (``doctest``), so the API reference cannot rot.

The examples that need data, models or a trained router live in the guides, where the docs test runs them
(the README's ``Router.route``, the environment card, the extension guide).
"""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["modules.tier", "benchmarks.splits", "policies.training.guard", "common.datafiles"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no example"
    assert result.failed == 0
