"""Option parsing shared by the ``evaluate.py`` commands.

``--option KEY=VALUE`` (benchmark loader options, ``benchmark.options`` in configs) and comma lists
(``--k 5,10``, ``--seeds 0,1``), so every command reports a bad value the same way: naming the flag.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, TypeVar

from benchmarks.registry import benchmark_names

T = TypeVar("T")


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1 (``--concurrency 0`` is an error naming the value)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    return value


def concurrency_arg(text: str) -> int | str:
    """An argparse type for ``--concurrency``: ``auto`` or an integer >= 1."""
    return "auto" if text.strip().lower() == "auto" else positive_int(text)


def resolve_concurrency(value: int | str, components: Any) -> int:
    """The questions in flight for ``--concurrency`` (an integer is kept).

    ``auto`` takes the most any of the run's engines turns into throughput (``LLMBackend.in_flight``:
    llama.cpp's slots, vLLM's measured batch, an OpenAI server's requests); an engine that runs one request
    at a time gives 1.
    """
    if value != "auto":
        return int(value)
    backends = {id(llm.backend): llm.backend for llm in getattr(components, "llms", {}).values()}
    return max([int(getattr(b, "in_flight", 1)) for b in backends.values()], default=1)


def comma_list(text: str, flag: str, cast: Callable[[str], T]) -> list[T]:
    """``"5, 10,"`` -> ``[5, 10]`` with ``cast=int``: items stripped, empty items dropped, order kept.

    Args:
        text: The flag's value.
        flag: The flag's name without dashes, for the error message.
        cast: Converts one item (``str``, ``int``, ``float``, ...).

    Raises:
        SystemExit: When an item does not convert or the list is empty (argparse-style message).
    """
    items = [t.strip() for t in str(text).split(",") if t.strip()]
    if not items:
        raise SystemExit(f"error: --{flag} is empty")
    out: list[T] = []
    for item in items:
        try:
            out.append(cast(item))
        except ValueError:
            kind = getattr(cast, "__name__", "value")
            raise SystemExit(f"error: --{flag}: {item!r} is not a valid {kind} (in {text!r})") from None
    return out


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
        if key.strip() == "data_dir":  # not a loader option: every command has its own flag for it
            raise SystemExit(f"--option {pair!r}: the data directory is --data-dir {raw}, not an --option")
        try:
            out[key.strip()] = yaml.safe_load(raw) if raw else None
        except yaml.YAMLError as exc:
            raise SystemExit(f"--option {pair!r}: value is not valid YAML ({exc})") from exc
    return out


def add_question_text_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``--benchmark``, ``--data-dir`` and ``--encoder`` options of commands that embed questions."""
    a = parser.add_argument
    names = benchmark_names()
    a("--benchmark", required=True, choices=names, help="benchmark of the records (question texts)")
    a("--data-dir", default=None, help="benchmark data directory")
    a("--encoder", default="minilm", help="question encoder (the router's; see memory.encoder)")
