"""`evaluate.py` dispatch: unknown commands, and data/config errors as one line instead of a traceback."""

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
