"""Evaluation entry point: ``python evaluate.py <command> [options]``.

Commands (each lives next to the concept it evaluates; this file only dispatches):

* ``memory``     HTM-EAR hierarchical-memory benchmark (synthetic scenarios A/B/C, BGL_2k).
* ``retrieval``  Evidence recall@k of the hierarchical memory on a QA benchmark split.
* ``describe``   Counts of a benchmark's histories, questions, splits and categories.
* ``frontier``   Cost-quality frontier of router checkpoints against fixed-tier baselines.
* ``headroom``   Answer quality per context (gold evidence, raw top-k, fixed tier paths).
* ``routability`` Whether a router that sees the question could beat the best fixed path (records only).
* ``select``     The router to ship over several training runs, on validation alone (their guards).
* ``learners``   Routers learned from outcome tables (kNN, plug-in), guarded on validation, judged on test.
* ``export``     Episode records, question banks or frontier results as a ``datasets`` Dataset.
"""

from __future__ import annotations

import argparse
import importlib
import sys

#: command -> (module, help). Each module exposes ``add_arguments(parser)`` and ``run(args) -> int``.
COMMANDS: dict[str, tuple[str, str]] = {
    "memory": ("evaluation.cli_memory", "HTM-EAR hierarchical-memory benchmark (scenarios A/B/C, BGL_2k)"),
    "retrieval": ("evaluation.cli_retrieval", "evidence recall@k of the hierarchical memory"),
    "describe": ("evaluation.cli_describe", "counts of a benchmark's data"),
    "frontier": ("evaluation.cli_frontier", "cost-quality frontier of routers vs baselines"),
    "headroom": ("evaluation.cli_headroom", "answer quality per context: gold, raw top-k, fixed tier paths"),
    "routability": (
        "evaluation.cli_routability",
        "could a router that sees the question beat the best fixed path? (frontier records, no LLM call)",
    ),
    "select": (
        "evaluation.cli_select",
        "the router to ship over several runs, on validation alone (their guards; no LLM call)",
    ),
    "learners": (
        "evaluation.cli_learners",
        "kNN and plug-in routers from outcome tables, guarded on validation, judged on test (no LLM call)",
    ),
    "export": ("evaluation.cli_export", "records, question banks or frontier results as a datasets Dataset"),
}


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen command; returns the process exit code."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in COMMANDS:
        usage = "\n".join(f"  {name:<10} {help_text}" for name, (_, help_text) in COMMANDS.items())
        print(f"usage: python evaluate.py COMMAND [options]\n\ncommands:\n{usage}", file=sys.stderr)
        if argv and argv[0] not in ("-h", "--help"):
            print(f"\nerror: unknown command {argv[0]!r}", file=sys.stderr)
            return 2
        return 0 if argv else 2
    # Import lazily so that one command does not pay for another's heavy imports.
    module = importlib.import_module(COMMANDS[argv[0]][0])
    parser = argparse.ArgumentParser(prog=f"evaluate.py {argv[0]}", description=COMMANDS[argv[0]][1])
    module.add_arguments(parser)
    args = parser.parse_args(argv[1:])
    try:
        return int(module.run(args) or 0)
    except Exception as exc:
        from train import reported_errors  # the CLIs share one list of self-explaining errors

        if not isinstance(exc, reported_errors()):
            raise  # a bug keeps its traceback
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
