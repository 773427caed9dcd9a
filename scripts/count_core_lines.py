#!/usr/bin/env python
"""Count the Python lines of the core packages at git revisions (issue #16's size measure).

    python scripts/count_core_lines.py 9c9ce96 HEAD     # baseline and now, with the change in %

For every revision it counts the committed ``*.py`` files of the core packages (``common``,
``memory``, ``modules``, ``benchmarks``, ``envs``, ``policies``, ``evaluation``; tests, scripts,
``scale/`` and the CLIs are not core) and prints two numbers:

* ``total``: every line, as ``wc -l`` counts them;
* ``code``: lines that are not blank, not comments and not docstrings (module, class, function
  and attribute docstrings).

Reading the committed blobs, not the working tree, makes a count reproducible from the revision
alone.
"""

from __future__ import annotations

import argparse
import ast
import subprocess

CORE_PACKAGES = ("common", "memory", "modules", "benchmarks", "envs", "policies", "evaluation")


def _docstring_lines(source: str) -> set[int]:
    """Line numbers (1-based) of every bare string statement: docstrings, attribute docs."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
            and node.end_lineno is not None
        ):
            lines.update(range(node.lineno, node.end_lineno + 1))
    return lines


def count(rev: str) -> tuple[int, int, int]:
    """``(files, total lines, code lines)`` of the core packages at git revision ``rev``."""
    listing = subprocess.check_output(["git", "ls-tree", "-r", "--name-only", rev, *CORE_PACKAGES], text=True)
    files = [f for f in listing.split() if f.endswith(".py")]
    total = code = 0
    for path in files:
        source = subprocess.check_output(["git", "show", f"{rev}:{path}"], text=True)
        docs = _docstring_lines(source)
        lines = source.splitlines()
        total += len(lines)
        code += sum(
            1
            for i, line in enumerate(lines, 1)
            if line.strip() and not line.strip().startswith("#") and i not in docs
        )
    return len(files), total, code


def main() -> None:
    """Print one row per revision; from the second on, the change against the first."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("revs", nargs="+", help="git revisions; the first is the baseline")
    args = parser.parse_args()
    base: tuple[int, int] | None = None
    print("| rev | files | total lines | code lines |\n|---|---|---|---|")
    for rev in args.revs:
        n, total, code = count(rev)
        if base is None:
            base = (total, code)
            print(f"| {rev} | {n} | {total:,} | {code:,} |")
        else:
            d_total, d_code = 100 * (total / base[0] - 1), 100 * (code / base[1] - 1)
            print(f"| {rev} | {n} | {total:,} ({d_total:+.1f}%) | {code:,} ({d_code:+.1f}%) |")

if __name__ == "__main__":
    main()
