"""`evaluate.py` dispatch: unknown commands, and data/config errors as one line instead of a traceback."""

import evaluate


def test_bad_record_is_one_error_line(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"history_id": "x", "question": "q?", "answer": "a"}\n', encoding="utf-8")
    assert evaluate.main(["describe", "--benchmark", "custom", "--option", f"path={bad}"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "record row 0 (history x): field 'sessions'" in err
    assert "Traceback" not in err


def test_unknown_command(capsys):
    assert evaluate.main(["nope"]) == 2
    assert "unknown command 'nope'" in capsys.readouterr().err
