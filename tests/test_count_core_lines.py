"""scripts/count_core_lines.py: total and code lines of the core packages at a git revision."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support import load_script

SOURCE = '''"""Module docstring,
two lines."""

# a comment
import os


def f() -> int:
    """Docstring."""
    x = 1  # trailing comment keeps the line code

    return x
'''


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def test_counts_committed_core_files_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = load_script("count_core_lines")
    _git(tmp_path, "init", "-q")
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "a.py").write_text(SOURCE)
    (tmp_path / "memory" / "notes.md").write_text("not python\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("x = 1\n")  # not a core package
    _git(tmp_path, "add", ".")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    (tmp_path / "memory" / "b.py").write_text("y = 2\n")  # uncommitted: not counted
    monkeypatch.chdir(tmp_path)
    # 12 lines; code: `import os`, `def f`, `x = 1`, `return x`
    assert script.count("HEAD") == (1, 12, 4)
