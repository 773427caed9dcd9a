"""The commands shown in the README and the guides, from their fenced code blocks.

``tests/test_docs_commands.py`` checks each one: the cheap ones run for real on the fake stack, the expensive
ones are composed (``train.py``: Hydra composition on the typed schema, every job of a ``-m`` sweep) or parsed
(``evaluate.py``, ``python -m ...`` and the scripts: their own argparse parsers, the repository paths
they name).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: The documents whose commands must work: the README, the guides and the results pages. On the benchmark
#: pages only the part above "Studies behind these numbers" (the record of how each number was reached keeps
#: the commands as they were run).
DOCUMENTS = (
    "README.md",
    "docs/index.md",
    "docs/getting-started.md",
    "docs/testing.md",
    "docs/reference/api.md",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs/how-to").glob("*.md")),
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs/concepts").glob("*.md")),
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs/results").glob("*.md")),
)
STUDIES_MARK = "## Studies behind these numbers"
_FENCE = re.compile(r"^```(\w*)\s*$")


@dataclass(frozen=True)
class Snippet:
    """One command line or code block of a document."""

    document: str
    line: int
    language: str
    text: str

    def __str__(self) -> str:
        return f"{self.document}:{self.line}: {self.text[:120]}"


def _blocks(document: str) -> list[tuple[int, str, list[str]]]:
    text = (ROOT / document).read_text(encoding="utf-8")
    if STUDIES_MARK in text:
        text = text.split(STUDIES_MARK, 1)[0]
    blocks: list[tuple[int, str, list[str]]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m and m.group(1):
            start, language, body = i + 1, m.group(1), []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            blocks.append((start + 1, language, body))
        i += 1
    return blocks


def _strip_comment(line: str) -> str:
    """A shell line without its trailing ``# comment`` (a ``#`` inside quotes is kept)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=False)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        words = list(lexer)
    except ValueError:
        return line.strip()
    return shlex.join(words) if words else ""


def shell_commands(documents: tuple[str, ...] = DOCUMENTS) -> list[Snippet]:
    """Every command of every ``bash`` block, continuation lines joined, comments removed."""
    out: list[Snippet] = []
    for document in documents:
        for start, language, body in _blocks(document):
            if language != "bash":
                continue
            pending, first = "", start
            for offset, raw in enumerate(body):
                if not pending:
                    first = start + offset
                if raw.rstrip().endswith("\\"):
                    pending += raw.rstrip()[:-1] + " "
                    continue
                line = _strip_comment(pending + raw)
                pending = ""
                if line:
                    out.append(Snippet(document, first, "bash", line))
    return out


def python_blocks(documents: tuple[str, ...] = DOCUMENTS) -> list[Snippet]:
    """Every ``python`` block."""
    return [
        Snippet(document, start, "python", "\n".join(body))
        for document in documents
        for start, language, body in _blocks(document)
        if language == "python"
    ]
