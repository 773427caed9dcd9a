"""`evaluate.py` dispatch: unknown commands, and data/config errors as one line instead of a traceback."""

import argparse

import pytest

import evaluate


def test_bad_record_is_one_error_line(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"history_id": "x", "question": "q?", "answer": "a"}\n', encoding="utf-8")
    assert evaluate.main(["describe", "--benchmark", "custom", "--option", f"path={bad}"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "record row 1 (history x): field 'sessions'" in err
    assert "Traceback" not in err


def test_unknown_command(capsys):
    assert evaluate.main(["nope"]) == 2
    assert "unknown command 'nope'" in capsys.readouterr().err


def test_comma_list_parses_and_names_the_flag():
    from evaluation.cli_options import comma_list

    assert comma_list(" 5, 10,,", "k", int) == [5, 10]
    assert comma_list("0.05,0", "prices", float) == [0.05, 0.0]
    assert comma_list("full,lru", "modes", str) == ["full", "lru"]
    with pytest.raises(SystemExit, match=r"--seeds: 'x' is not a valid int \(in '1,x'\)"):
        comma_list("1,x", "seeds", int)
    with pytest.raises(SystemExit, match="--modes is empty"):
        comma_list(" , ", "modes", str)


def test_bad_comma_lists_stop_before_any_work(capsys):
    with pytest.raises(SystemExit, match="--seeds: 'x' is not a valid int"):
        evaluate.main(["memory", "--seeds", "42,x"])
    with pytest.raises(SystemExit, match="--modes is empty"):
        evaluate.main(["memory", "--modes", ","])
    with pytest.raises(SystemExit) as exc:  # argparse rejects k <= 0 with its usage line
        evaluate.main(["retrieval", "--benchmark", "locomo", "--k", "5,0"])
    assert exc.value.code == 2 and "k values must be positive" in capsys.readouterr().err


def test_concurrency_auto_follows_the_engines() -> None:
    """`--concurrency auto` (the default) takes what the run's engines turn into throughput."""
    from types import SimpleNamespace

    from evaluation.cli_options import concurrency_arg, resolve_concurrency
    from modules.backends.fake import FakeBackend

    assert concurrency_arg("auto") == "auto" and concurrency_arg("4") == 4
    with pytest.raises(argparse.ArgumentTypeError):
        concurrency_arg("0")
    wheel, slots = FakeBackend(), FakeBackend()
    slots.in_flight = 4  # what llama.cpp with 4 slots says
    llms = {"low": wheel, "high": slots, "answer": slots}
    comps = SimpleNamespace(llms={role: SimpleNamespace(backend=b) for role, b in llms.items()})
    assert resolve_concurrency("auto", comps) == 4
    assert resolve_concurrency("auto", SimpleNamespace(llms={"low": SimpleNamespace(backend=wheel)})) == 1
    assert resolve_concurrency(2, comps) == 2
