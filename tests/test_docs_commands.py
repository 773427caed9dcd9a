"""Every command shown in the README and the guides works (docs that cannot rot).

* ``train.py`` with the fake stack runs for real; any other ``train.py`` command is composed by Hydra on the
  typed schema exactly as ``train.py`` would (every job of a ``-m`` sweep; λ checked as ``train.py`` does);
* ``evaluate.py COMMAND ...`` is parsed by that command's argparse parser, and every repository path it names
  (``results/...``, ``tests/data/...``) must exist;
* scripts and ``python -m`` programs: every option shown must be in the program's ``--help``;
* ``make TARGET`` names a Makefile target; ``bash scripts/X.sh`` an existing script;
* ``python`` blocks run for real against the fake run (the README's ``Router.route`` example).

A command that fits none of these rules fails the test: add a rule rather than let a shown command go
unchecked.
"""

from __future__ import annotations

import argparse
import functools
import glob
import importlib
import importlib.util
import itertools
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs_commands import ROOT, Snippet, python_blocks, shell_commands
from tests.reliability_support import cli_env
from tests.support import has_locomo

#: Programs whose lines are shown for the reader but not run here: installation, version control, shells.
NOT_RUN = {"git", "cd", "pip", "export", "wandb", "mkdir", "cp", "ray", "redis-server"}
#: Repository paths a command may name; they must exist (``runs/`` and the like are produced by commands).
REPO_PATH = re.compile(r"^(results|tests/data|configs|scripts)/")
FAKE_STACK = ("backend=fake", "encoder=hashing")

COMMANDS = shell_commands()
PYTHON_BLOCKS = python_blocks()


def _env(tmp: Path) -> dict[str, str]:
    return {**cli_env(), "BUDGET_ROUTER_CACHE": str(tmp / "derived"), "PYTHONPATH": str(ROOT)}


def _words(snippet: Snippet) -> list[list[str]]:
    """The command's argv lists (``a && b`` is two), environment assignments dropped."""
    words = shlex.split(snippet.text)
    argvs: list[list[str]] = []
    for is_sep, group in itertools.groupby(words, lambda w: w in ("&&", ";")):
        if is_sep:
            continue
        argv = list(group)
        while argv and re.match(r"^[A-Z_][A-Z0-9_]*=", argv[0]):
            argv.pop(0)
        if argv:
            argvs.append(argv)
    return argvs


def _check_repo_paths(args: list[str], where: Snippet) -> None:
    for arg in args:
        for value in [arg, *arg.split("=", 1)[1:]]:
            if REPO_PATH.match(value) and not glob.glob(str(ROOT / value)):
                pytest.fail(f"{where}: names {value!r}, which is not in the repository")


# ---------------------------------------------------------------------------------------------
# train.py
# ---------------------------------------------------------------------------------------------


def _sweep_jobs(overrides: list[str]) -> list[list[str]]:
    """Every job of a Hydra ``-m`` sweep: the cartesian product of its sweep overrides."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    choices: list[list[str]] = []
    for text in overrides:
        override = parser.parse_override(text)
        if override.is_sweep_override():
            key = override.get_key_element()
            choices.append([f"{key}={v}" for v in override.sweep_string_iterator()])
        else:
            choices.append([text])
    return [list(job) for job in itertools.product(*choices)]


def _compose_train(args: list[str], where: Snippet) -> None:
    from policies.training.config import check_lambda_overrides, load_config
    from policies.training.settings import parse_config

    multirun = any(a in ("-m", "--multirun") for a in args)
    overrides = [a for a in args if not a.startswith("-")]
    check_lambda_overrides(overrides)
    jobs = _sweep_jobs(overrides) if multirun else [overrides]
    for job in jobs:
        try:
            parse_config(load_config(job))
        except Exception as exc:  # the message names the override; the snippet names the document
            pytest.fail(f"{where}: job {job} does not compose: {exc}")


def _run_train(args: list[str], where: Snippet, tmp: Path) -> None:
    if not has_locomo() and not any("benchmark=custom" in a for a in args):
        pytest.skip("LoCoMo data directory absent (locomo10.json)")
    extra = [f"cache.path={tmp / 'calls.sqlite'}", f"question_bank.cache_dir={tmp / 'banks'}"]
    out = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), *args, *extra],
        cwd=tmp,
        env=_env(tmp),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, f"{where}\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}"


# ---------------------------------------------------------------------------------------------
# evaluate.py, scripts and modules
# ---------------------------------------------------------------------------------------------


def _parse_evaluate(args: list[str], where: Snippet) -> None:
    import evaluate

    assert args and args[0] in evaluate.COMMANDS, f"{where}: unknown evaluate.py command {args[:1]}"
    parser = argparse.ArgumentParser(prog=f"evaluate.py {args[0]}", exit_on_error=False)
    importlib.import_module(evaluate.COMMANDS[args[0]][0]).add_arguments(parser)
    try:
        parser.parse_args(args[1:])
    except (argparse.ArgumentError, SystemExit) as exc:
        pytest.fail(f"{where}: evaluate.py {args[0]} does not accept these arguments: {exc}")
    _check_repo_paths(args[1:], where)


@functools.cache
def _help(program: tuple[str, ...]) -> str:
    out = subprocess.run(
        [sys.executable, *program, "--help"],
        cwd=ROOT,
        env=_env(Path("/tmp")),
        capture_output=True,
        text=True,
        timeout=300,
    )
    return out.stdout if out.returncode == 0 else ""


def _check_options(program: tuple[str, ...], args: list[str], where: Snippet) -> None:
    """Every ``--option`` shown is in the program's help (a subcommand's own help where it has one)."""
    text = _help(program)
    assert text, f"{where}: `python {' '.join(program)} --help` fails"
    if args and not args[0].startswith("-") and _help((*program, args[0])):
        text = _help((*program, args[0]))
    for arg in args:
        if arg == "--":
            break  # what follows is handed to another program (Hydra overrides of a sweep)
        if arg.startswith("--"):
            option = arg.split("=", 1)[0]
            assert re.search(rf"{re.escape(option)}\b", text), (
                f"{where}: {option} is not an option of {program}"
            )
    _check_repo_paths(args, where)


def _check_python(argv: list[str], where: Snippet, tmp: Path) -> None:
    args = argv[1:]
    if args[:2] == ["-m", "pytest"]:
        return  # the suite itself
    if args[0] == "train.py":
        if all(f in args for f in FAKE_STACK) and "-m" not in args:
            _run_train(args[1:], where, tmp)
        else:
            _compose_train(args[1:], where)
    elif args[0] == "evaluate.py":
        _parse_evaluate(args[1:], where)
    elif args[0] == "-m":
        module = args[1]
        assert importlib.util.find_spec(module) is not None, f"{where}: no module {module}"
        _check_options(("-m", module), args[2:], where)
    elif args[0].startswith("scripts/"):
        assert (ROOT / args[0]).is_file(), f"{where}: no script {args[0]}"
        _check_options((args[0],), args[1:], where)
    else:
        pytest.fail(f"{where}: no rule checks `python {args[0]}`; add one to tests/test_docs_commands.py")


def _makefile_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return {m.group(1) for m in re.finditer(r"^([\w-]+):", text, re.M)}


@pytest.mark.parametrize("snippet", COMMANDS, ids=[f"{s.document}:{s.line}" for s in COMMANDS])
def test_shown_command_works(snippet: Snippet, tmp_path: Path) -> None:
    for argv in _words(snippet):
        program = argv[0]
        if program in NOT_RUN:
            continue
        if program == "make":
            missing = set(argv[1:]) - _makefile_targets()
            assert not missing, f"{snippet}: no Makefile target {sorted(missing)}"
        elif program == "bash":
            assert (ROOT / argv[1]).is_file(), f"{snippet}: no script {argv[1]}"
        elif program == "python" or program.endswith("/bin/python"):
            _check_python(argv, snippet, tmp_path)
        else:
            pytest.fail(f"{snippet}: no rule checks `{program}`; add one to tests/test_docs_commands.py")


def test_the_documents_show_commands() -> None:
    """The extraction finds the README's commands (a broken extractor would make every check vacuous)."""
    readme = [s for s in COMMANDS if s.document == "README.md"]
    assert len(readme) >= 8 and any("cost.lambdas=" in s.text for s in readme)
    assert any("Router.load" in s.text for s in PYTHON_BLOCKS if s.document == "README.md")


@pytest.fixture(scope="module")
def fake_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The README's fake-stack run, in a scratch working directory (its ``runs/`` are the examples')."""
    if not has_locomo():
        pytest.skip("LoCoMo data directory absent (locomo10.json)")
    tmp = tmp_path_factory.mktemp("docs")
    snippet = next(s for s in COMMANDS if s.document == "README.md" and all(f in s.text for f in FAKE_STACK))
    # The tour keeps its fake run out of runs/ (runs_dir=runs/fake) so it never takes the name of make train's
    # run; the python blocks load that run (runs/locomo__implementation__lam0__s0), so here the fake one
    # stands in for it under the default runs directory.
    shown = shlex.split(snippet.text)[2:]
    args = [a for a in shown if not a.startswith("runs_dir=")]
    assert len(args) < len(shown), "the README's fake-stack line writes under runs/fake"
    _run_train(args, snippet, tmp)
    return tmp


@pytest.mark.parametrize("snippet", PYTHON_BLOCKS, ids=[f"{s.document}:{s.line}" for s in PYTHON_BLOCKS])
def test_python_block_runs(snippet: Snippet, fake_run: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from benchmarks.answer import ANSWER_TEMPLATES
    from benchmarks.registry import BENCHMARKS, benchmark_names
    from modules.backends import BACKENDS
    from modules.strategies import STRATEGIES

    benchmark_names()  # the built-in loaders are registered before the snapshot
    # An extension example registers a backend, benchmark or strategy: the process's registries are put back.
    registries: tuple[dict, ...] = (BACKENDS, BENCHMARKS, STRATEGIES, ANSWER_TEMPLATES)
    saved = [dict(r) for r in registries]
    monkeypatch.chdir(fake_run)
    monkeypatch.setenv("BUDGET_ROUTER_CACHE", str(fake_run / "derived"))
    try:
        exec(compile(snippet.text, str(snippet), "exec"), {"__name__": "__docs__"})
    finally:
        for registry, before in zip(registries, saved, strict=True):
            registry.clear()
            registry.update(before)
    assert capsys.readouterr().out.strip(), f"{snippet}: printed nothing"
