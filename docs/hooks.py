"""MkDocs hooks: the pages generated from the code and the results, so that they cannot drift.

* ``reference/config.md``: every key of the typed config schema (``policies.training.settings.Config``, which
  extends ``envs.config_schema.EnvConfig``) with its type, default and the ``#:`` comment above it;
* ``reference/cli.md``: every ``evaluate.py`` command's options, from the argparse parser the command builds;
* the figures under ``results/`` (frontier plots, headroom and routability figures), served at their
  repository paths so that the results pages show the committed files;
* ``<!-- frontier-table: results/frontier/DIR -->``, a line of its own in a page (as every marker), becomes
  the table of that directory's committed ``frontier.csv``, the file a replay with ``--expect`` compares cell
  by cell;
* ``<!-- paired-table: RECORDS_DIR REF[,REF] SYSTEM[,SYSTEM...] -->`` becomes the paired differences of those
  record files against each reference, on the questions all of them cover (``evaluation.paired_table``);
* ``<!-- learners-table: DIR -->`` becomes what ships per price and every learner's row, from the
  ``learners.json`` that ``evaluate.py learners --out DIR`` wrote (``evaluation.learners_report``).

``tests/test_docs_site.py`` checks the generated pages against the schema and the parsers.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import importlib
import inspect
import math
import os
import re
import sys
import typing
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # mkdocs runs from the repository root, but not always with it on sys.path
    sys.path.insert(0, str(ROOT))

# A marker is a line of its own: one quoted in prose (inside backticks) is text, not a table to render.
FRONTIER_MARK = re.compile(r"^<!--\s*frontier-table:\s*(\S+)\s*-->$", re.MULTILINE)
PAIRED_MARK = re.compile(r"^<!--\s*paired-table:\s*(\S+)\s+(\S+)\s+(\S+)\s*-->$", re.MULTILINE)
LEARNERS_MARK = re.compile(r"^<!--\s*learners-table:\s*(\S+)\s*-->$", re.MULTILINE)
_FIELD_LINE = re.compile(r"^(\w+)\s*:\s*\S")
_ADDED_FIELD = re.compile(r"""__annotations__\[["'](\w+)["']\]""")


# ---------------------------------------------------------------------------------------------
# Configuration keys
# ---------------------------------------------------------------------------------------------


def field_comments(cls: type) -> dict[str, str]:
    """The ``#:`` comment block above each field of ``cls`` and its bases (a field added by name too)."""
    comments: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        names = {f.name for f in dataclasses.fields(klass)}
        sources = [inspect.getsource(klass), inspect.getsource(sys.modules[klass.__module__])]
        for source in sources:
            pending: list[str] = []
            for raw in source.splitlines():
                line = raw.strip()
                if line.startswith("#:"):
                    pending.append(line[2:].strip())
                    continue
                match = _FIELD_LINE.match(line) or _ADDED_FIELD.search(line)
                name = match.group(1) if match else None
                if name in names and pending and name not in comments:
                    comments[name] = " ".join(pending)
                pending = []
    return comments


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def _show(value: Any) -> str:
    if value == "???":  # omegaconf.MISSING: the YAML files fill it in
        return "*set by `configs/`*"
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, dict | list) and not value:
        return f"`{value!r}`".replace("'", "")
    return f"`{value}`"


def _cell(text: str) -> str:
    """Text safe inside a markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def _type_name(f: dataclasses.Field[Any]) -> str:
    return _cell(str(f.type).replace("typing.", ""))


def config_keys(cls: type | None = None, prefix: str = "") -> list[tuple[str, str, str, str]]:
    """Every leaf key of the training config as ``(dotted key, type, default, comment)``, schema order."""
    if cls is None:
        from policies.training.settings import Config

        cls = Config
    hints = typing.get_type_hints(cls)
    comments = field_comments(cls)
    rows: list[tuple[str, str, str, str]] = []
    for f in dataclasses.fields(cls):
        kind = hints.get(f.name)
        key = f"{prefix}{f.name}"
        if isinstance(kind, type) and dataclasses.is_dataclass(kind):
            rows.extend(config_keys(kind, key + "."))
            continue
        rows.append((key, _type_name(f), _show(_default(f)), comments.get(f.name, "")))
    return rows


def config_reference() -> str:
    """The ``reference/config.md`` page."""
    from policies.training.settings import Config

    lines = [
        "# Configuration keys",
        "",
        "Generated from the typed schema (`envs/config_schema.py` for the environment's sections,",
        "`policies/training/settings.py` for `train`, `ppo`, `wandb` and the run keys) when the site",
        "is built. `configs/config.yaml` composes the YAML groups of `configs/` on this schema, and a test",
        "keeps the schema's defaults equal to the YAML values. Any key can be overridden on the command line",
        "(`python train.py ppo.learning_rate=0.001`); a key the schema lacks or a value of the wrong type",
        "fails at composition with Hydra's message (`python train.py train.n_envs=two` -> `Value 'two' of",
        "type 'str' could not be converted to Integer, full_key: train.n_envs`), and ranges and choices are",
        "checked before any model loads. Keys of type `dict` take free-form options (a backend's constructor",
        "arguments, a benchmark's loader options); add a key the YAML does not list with Hydra's `+`",
        "(`+benchmark.options.file=…`).",
        "",
    ]
    sections: dict[str, list[tuple[str, str, str, str]]] = {}
    for row in config_keys(Config):
        top = row[0].split(".", 1)[0] if "." in row[0] else "top-level keys"
        sections.setdefault(top, []).append(row)
    for top, rows in sections.items():
        lines += [f"## {top}", "", "| key | type | default | meaning |", "|---|---|---|---|"]
        lines += [f"| `{k}` | {t} | {d} | {_cell(c)} |" for k, t, d, c in rows]
        lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# evaluate.py commands
# ---------------------------------------------------------------------------------------------


def command_parsers() -> dict[str, argparse.ArgumentParser]:
    """Each ``evaluate.py`` command's parser, built exactly as ``evaluate.main`` builds it."""
    import evaluate

    parsers = {}
    for name, (module_name, help_text) in evaluate.COMMANDS.items():
        parser = argparse.ArgumentParser(prog=f"evaluate.py {name}", description=help_text)
        importlib.import_module(module_name).add_arguments(parser)
        parsers[name] = parser
    return parsers


def _option_row(action: argparse.Action) -> str:
    names = ", ".join(f"`{s}`" for s in action.option_strings) or f"`{action.dest}` (positional)"
    if action.metavar and action.option_strings:
        names += f" `{action.metavar}`"
    default = action.default
    shown = "" if default in (None, argparse.SUPPRESS, False) else f"`{default}`"
    help_text = (action.help or "").replace("|", "\\|").replace("\n", " ")
    if help_text == argparse.SUPPRESS:
        help_text = ""
    return f"| {names} | {shown} | {help_text} |"


def cli_reference() -> str:
    """The ``reference/cli.md`` page."""
    import evaluate

    lines = [
        "# evaluate.py commands",
        "",
        "Generated from the argparse parser of each command when the site is built;",
        "`python evaluate.py COMMAND --help` prints the same. `train.py` is a Hydra app: its options are the",
        "[configuration keys](config.md).",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    lines += [f"| [`{name}`](#{name}) | {help_text} |" for name, (_, help_text) in evaluate.COMMANDS.items()]
    lines.append("")
    for name, parser in command_parsers().items():
        usage = " ".join(parser.format_usage().split())
        lines += [f"## {name}", "", parser.description or "", "", "```text", usage, "```", ""]
        lines += ["| option | default | meaning |", "|---|---|---|"]
        lines += [_option_row(a) for a in parser._actions if not isinstance(a, argparse._HelpAction)]
        lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Results: frontier tables and figures
# ---------------------------------------------------------------------------------------------


def _num(value: str, digits: int = 3) -> str:
    try:
        x = float(value)
    except ValueError:
        return value
    if math.isnan(x):
        return ""
    return f"{x:,.{digits}f}" if abs(x) < 1000 else f"{x:,.0f}"


def frontier_table(directory: str | os.PathLike[str]) -> str:
    """A markdown table of a committed ``frontier.csv``: F1 with its CI, module cost, share of all-HIGH's."""
    path = ROOT / directory / "frontier.csv"
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: no frontier.csv (the page names a results directory that is not committed)"
        )
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    lines = [
        "| system | F1 [95% CI] | module cost, GFLOPs/question | share of all-HIGH's cost "
        "| on its frontier |",
        "|---|---|---|---|---|",
    ]
    for row in sorted(rows, key=lambda r: -float(r["f1"] or 0)):
        share = row.get("module_cost_ratio", "")
        share_text = f"{float(share):.2%}" if share not in ("", None) else ""
        frontier = "yes" if row["on_frontier"] == "True" else ""
        lines.append(
            f"| {row['system']} | {_num(row['f1'])} [{_num(row['f1_lo'])}, {_num(row['f1_hi'])}] "
            f"| {_num(row['module_cost'], 4)} | {share_text} | {frontier} |"
        )
    return "\n".join(lines)


def paired_markdown(records_dir: str, references: str, systems: str) -> str:
    """The paired-difference table of committed record files (comma lists of run ids), on common questions."""
    from evaluation.paired_table import markdown, paired_table, table_questions

    def ids(text: str) -> list[str]:
        return [s for s in text.split(",") if s]

    # On the questions of the committed table (records a running study block wrote beyond it are not its);
    # a table whose metadata predates the list: on the questions every file covers.
    questions = table_questions(ROOT / records_dir)
    return markdown(
        paired_table(ROOT / records_dir, ids(references), ids(systems), common=True, questions=questions)
    )


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Replace each table marker (frontier, paired, learners) with its tables from the committed files."""
    from evaluation.learners_report import learners_markdown

    markdown = FRONTIER_MARK.sub(lambda m: frontier_table(m.group(1)), markdown)
    markdown = LEARNERS_MARK.sub(lambda m: learners_markdown(ROOT / m.group(1)), markdown)
    return PAIRED_MARK.sub(lambda m: paired_markdown(*m.groups()), markdown)


def on_files(files: Any, config: Any) -> Any:
    """Add the generated reference pages and the committed figures under ``results/``."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, "reference/config.md", content=config_reference()))
    files.append(File.generated(config, "reference/cli.md", content=cli_reference()))
    for png in sorted((ROOT / "results").rglob("*.png")):
        files.append(
            File(
                str(png.relative_to(ROOT)),
                src_dir=str(ROOT),
                dest_dir=config["site_dir"],
                use_directory_urls=config["use_directory_urls"],
            )
        )
    return files
