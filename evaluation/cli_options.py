"""``--option KEY=VALUE``: benchmark loader options on the command line (``benchmark.options`` in configs)."""

from __future__ import annotations

import argparse
from typing import Any


def add_option_argument(parser: argparse.ArgumentParser) -> None:
    """Register the repeatable ``--option KEY=VALUE`` flag."""
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="benchmark loader option, repeatable (e.g. file=hotpot_dev_distractor_v1.json for hotpotqa, "
        "path=data.jsonl for custom)",
    )


def parse_options(pairs: list[str]) -> dict[str, Any]:
    """``["file=x.json", "split_seed=1"]`` -> ``{"file": "x.json", "split_seed": 1}``.

    Raises:
        SystemExit: For an item without ``=`` or with invalid YAML (argparse-style message).
    """
    import yaml

    out: dict[str, Any] = {}
    for pair in pairs:
        key, eq, raw = pair.partition("=")
        if not eq or not key.strip():
            raise SystemExit(f"--option {pair!r}: expected KEY=VALUE")
        try:
            out[key.strip()] = yaml.safe_load(raw) if raw else None
        except yaml.YAMLError as exc:
            raise SystemExit(f"--option {pair!r}: value is not valid YAML ({exc})") from exc
    return out
