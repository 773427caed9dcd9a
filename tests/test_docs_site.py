"""The documentation site's generated pages match the code (docs/hooks.py).

The configuration reference must list every key the composed config has and nothing else, each with its
comment; the CLI reference every ``evaluate.py`` command and every option its ``--help`` shows; the results
tables come from the committed ``frontier.csv`` files the pages name. ``make docs-build`` (CI) builds the
whole site with ``--strict``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def hooks() -> Any:
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _leaves(value: Any, prefix: str = "") -> list[str]:
    if isinstance(value, dict) and value:
        return [leaf for k, v in value.items() for leaf in _leaves(v, f"{prefix}{k}.")]
    return [prefix.rstrip(".")]


def test_config_reference_lists_every_key_of_the_composed_config(hooks) -> None:
    from policies.training.config import load_config

    page = hooks.config_reference()
    documented = {m.group(1) for m in re.finditer(r"^\| `([\w.]+)` \|", page, re.M)}
    composed = load_config()
    for leaf in _leaves(composed):
        # free-form dicts (backend options, benchmark options, ...) are documented as the dict key itself
        assert any(leaf == key or leaf.startswith(key + ".") for key in documented), (
            f"{leaf} is not in the reference"
        )
    for key in documented:
        node: Any = composed
        for part in key.split("."):
            assert isinstance(node, dict) and part in node, (
                f"the reference lists {key}, which the config lacks"
            )
            node = node[part]


def test_every_config_key_is_explained(hooks) -> None:
    rows = hooks.config_keys()
    assert len(rows) > 60
    unexplained = [key for key, _type, _default, comment in rows if not comment.strip()]
    assert not unexplained, f"schema fields without a `#:` comment: {unexplained}"
    by_key = {key: comment for key, _t, _d, comment in rows}
    assert "reward = r_task" in by_key["cost.lambda"]  # the field added by name has its comment too


def test_cli_reference_lists_every_command_and_option(hooks) -> None:
    import evaluate

    page = hooks.cli_reference()
    for name in evaluate.COMMANDS:
        assert f"\n## {name}\n" in page, f"evaluate.py {name} is not in the reference"
        out = io.StringIO()
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as stop:
            evaluate.main([name, "--help"])
        assert stop.value.code == 0
        section = page.split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]
        # the options list of --help: one option per line, indented ("  --limit LIMIT  help", "  -h, --help")
        shown = set(re.findall(r"^\s+(?:-\w[ ,\w]*, )?(--[a-z][\w-]*)", out.getvalue(), re.M)) - {"--help"}
        assert shown, f"evaluate.py {name} --help shows no options"
        for option in shown:
            assert f"`{option}`" in section, f"evaluate.py {name} {option} is not in the reference"


def test_results_tables_come_from_the_committed_frontier_files(hooks) -> None:
    pages = sorted((ROOT / "docs" / "results").glob("*.md"))
    marks = [m.group(1) for p in pages for m in hooks.FRONTIER_MARK.finditer(p.read_text())]
    assert {
        "results/frontier/locomo-test-cpu_quality-150q-seeds-sm",
        "results/frontier/hotpotqa-test-cpu_quality-40q-bf",
        "results/frontier/longmemeval_oracle-test-cpu_quality-105q-bl",
    } <= set(marks)
    for mark in marks:
        table = hooks.frontier_table(mark)
        csv_rows = (ROOT / mark / "frontier.csv").read_text().count("\n") - 1
        assert table.count("\n") - 1 == csv_rows, f"{mark}: the table drops systems"
    with pytest.raises(FileNotFoundError, match=r"no frontier\.csv"):
        hooks.frontier_table("results/frontier/not-there")


def test_a_marker_renders_only_on_a_line_of_its_own(hooks) -> None:
    """A page that explains a marker quotes it in backticks: that is prose, not a table to render (a quoted
    ``learners-table: DIR`` once failed the docs build looking for ``DIR/learners.json``)."""
    quoted = "Render it with `<!-- learners-table: DIR -->` or `<!-- frontier-table: DIR -->`.\n"
    assert hooks.on_page_markdown(quoted, None, None, None) == quoted
    mark = "<!-- frontier-table: results/frontier/locomo-test-cpu_quality-150q-seeds-sm -->"
    rendered = hooks.on_page_markdown(f"Above.\n{mark}\nBelow.\n", None, None, None)
    assert "<!--" not in rendered and "| system | F1 [95% CI] |" in rendered
    assert rendered.startswith("Above.\n| ") and rendered.endswith("\nBelow.\n")


def test_results_pages_are_short_and_speak_without_issue_numbers() -> None:
    """A results page is a headline or one subject's study (<= ~300 lines); no page cites the tracker."""
    root = Path(__file__).resolve().parent.parent
    for page in sorted((root / "docs" / "results").glob("*.md")):
        lines = page.read_text(encoding="utf-8").splitlines()
        assert len(lines) <= 320, f"{page.name}: {len(lines)} lines; move a study to its own page"
    for page in [root / "README.md", *sorted((root / "docs").rglob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        found = re.findall(r"issue #?\d+|the issue's", text, flags=re.IGNORECASE)
        assert not found, f"{page.relative_to(root)}: {found[:3]}: name the item, not where it was filed"
        # Run labels are a lab's shorthand: prose names a router by what it is ("the LoCoMo λ-router"); a
        # command or a path in backticks may still carry the directory's name.
        prose = re.sub(r"```.*?```|`[^`\n]*`|\]\([^)]*\)", "", text, flags=re.DOTALL)
        labels = re.findall(r"\b(?:[Rr]uns? \d\b|hp0?1?\b|lme0?1?\b|Q[12]\b)", prose)
        assert not labels, f"{page.relative_to(root)}: {labels[:3]}: name the router or run by what it is"
        numbers = re.findall(r"(?<![\w&/#])#\d+\b", prose)  # "#14 closed": a tracker's number
        assert not numbers, f"{page.relative_to(root)}: {numbers[:3]}: name the item, not its number"


#: The headline tables' rows and the committed frontier directory each quotes.
HEADLINE_SETS = {
    "LoCoMo": "results/frontier/locomo-test-cpu_quality-150q-seeds-sm",
    "HotpotQA": "results/frontier/hotpotqa-test-cpu_quality-40q-bf",
    "LongMemEval": "results/frontier/longmemeval_oracle-test-cpu_quality-105q-bl",
}


def test_headline_numbers_quoted_outside_the_results_pages_match_the_csvs() -> None:
    """README and the results overview quote all-LOW/MID/HIGH and best-fixed F1: each equals its CSV."""
    import csv

    root = Path(__file__).resolve().parent.parent
    for page in (root / "README.md", root / "docs" / "results" / "index.md"):
        rows = [line for line in page.read_text(encoding="utf-8").splitlines() if line.startswith("| ")]
        for name, directory in HEADLINE_SETS.items():
            with open(root / directory / "frontier.csv", newline="", encoding="utf-8") as fh:
                f1 = {r["system"]: float(r["f1"]) for r in csv.DictReader(fh)}
            row = next(r for r in rows if re.match(rf"\| \[?{name}\b", r))
            cells = [c.strip() for c in row.strip("|").split("|")]
            quoted = dict(zip(("all-low", "all-mid", "all-high"), cells[1:4], strict=True))
            for system, text in quoted.items():
                assert text == f"{f1[system]:.3f}", f"{page.name} {name} {system}: {text} != {f1[system]:.3f}"
            best = next(s for s in f1 if s.startswith("best-fixed ("))
            path = best[len("best-fixed (") : -1]
            assert f"`{path}` {f1[best]:.3f}" in cells[5], f"{page.name} {name} best-fixed: {cells[5]}"


def test_the_powered_study_page_names_the_question_count_its_tables_have(hooks) -> None:
    """The page's prose says how many questions the study has reached; the tables it renders must agree.

    Each section with a paired table (LoCoMo test, LongMemEval test, ...) is checked against its own split's
    table: the paired table renders on that table's questions, and the section's counts name them.
    """
    import csv

    from evaluation.paired_table import paired_table, table_questions

    page = (ROOT / "docs" / "results" / "powered.md").read_text(encoding="utf-8")
    sections = re.split(r"^## ", page, flags=re.MULTILINE)
    counts = r"(\d+) of (?:314|250)|(?:same|these) (\d+) questions|first (\d+) of \d+ questions"
    checked = 0
    for section in sections:
        marks = hooks.PAIRED_MARK.findall(section)
        if not marks:
            continue
        ((directory, refs, systems),) = marks
        split_dir = ROOT / directory.split("/records/")[0]
        with open(split_dir / "frontier.csv", newline="", encoding="utf-8") as fh:
            n_table = {int(r["n_questions"]) for r in csv.DictReader(fh)}
        rendered = hooks.paired_markdown(directory, refs, systems)
        records = ROOT / directory
        table = paired_table(
            records, refs.split(","), systems.split(","), common=True, questions=table_questions(records)
        )
        stated = {int(n) for groups in re.findall(counts, section) for n in groups if n}
        title = section.splitlines()[0]
        assert stated and stated == n_table == {len(table.qids)}, (title, stated, n_table, len(table.qids))
        assert rendered.count("\n") == 1 + len(dict.fromkeys([*refs.split(","), *systems.split(",")]))
        checked += 1
    assert checked >= 2, "the LoCoMo and LongMemEval test sections each render a paired table"
    # The progress table: each split's committed table has the questions the page says.
    rows = {
        "LoCoMo test": ["locomo-test"],
        "LoCoMo validation": ["locomo-val"],
        "LongMemEval (oracle) test / validation": ["longmemeval_oracle-test", "longmemeval_oracle-val"],
        "HotpotQA test / validation": ["hotpotqa-test", "hotpotqa-val"],
    }
    for label, dirs in rows.items():
        (done,) = re.findall(rf"^\| {re.escape(label)} \| [\d /]+ \| ([^|]+) \|", page, flags=re.MULTILINE)
        have = []
        for name in dirs:
            meta = ROOT / "results" / "outcomes" / name / "metadata.json"
            have.append(json.loads(meta.read_text())["n_questions"] if meta.is_file() else 0)
        assert done.strip().split(" (")[0] == " / ".join(str(n) for n in have) or (
            done.strip() == "0" and not any(have)
        ), (label, done, have)
