"""scripts/training_episodes.py: pieces joined in step order, shares, tables, clear errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import training_episodes as te


def _write(path: Path, rows: list[tuple[int, float, str, str]]) -> None:
    path.write_text(
        "".join(
            json.dumps(
                {"step": s, "cost_lambda": lam, "tiers": t, "category": c, "f1": 0.5, "question_id": "q"}
            )
            + "\n"
            for s, lam, t, c in rows
        )
    )


def test_pieces_join_and_drop_what_the_resumed_run_redid(tmp_path, capsys):
    _write(
        tmp_path / "episodes.jsonl",
        [(5, 0.0, "L,L,L,L,L", "2"), (10, 0.5, "H,H,H,H,H", "1"), (15, 0.0, "M,M,M,M,M", "2")],
    )
    # Checkpoint at 10; the first piece ran on to 15 before it was killed, the resumed run redid it.
    _write(tmp_path / "episodes-from-10.jsonl", [(15, 0.0, "L,M,H,L,M", "4")])
    eps = te.load_episodes(tmp_path)
    assert [e["step"] for e in eps] == [5, 10, 15] and eps[-1]["tiers"] == "L,M,H,L,M"
    assert te.shares(eps) == pytest.approx({"L": 7 / 15, "M": 2 / 15, "H": 6 / 15})
    assert te.shares(eps, "temporal") == pytest.approx({"L": 1 / 3, "M": 0.0, "H": 2 / 3})
    assert te.main([str(tmp_path), "--block", "2", "--last", "3"]) == 0
    out = capsys.readouterr().out
    assert "| 1-2 | 0 | 1 | 0.500 | 1.00 / 0.00 / 0.00 |" in out
    assert "| 0.5 | 1 | 1 | 0.00 / 0.00 / 1.00 |" in out  # λ 0.5, category 1, the filter column
    assert (tmp_path / "training_episodes.png").stat().st_size > 0


def test_errors_name_the_file_and_line(tmp_path, capsys):
    assert te.main([str(tmp_path)]) == 2
    assert "no episodes" in capsys.readouterr().err
    _write(tmp_path / "episodes.jsonl", [(5, 0.0, "L,L,X,L,L", "2")])
    with pytest.raises(ValueError, match=r"episodes\.jsonl:1: tiers"):
        te.load_episodes(tmp_path)
    (tmp_path / "episodes.jsonl").write_text("{not json\n")
    with pytest.raises(ValueError, match=r"episodes\.jsonl:1: malformed"):
        te.load_episodes(tmp_path)
