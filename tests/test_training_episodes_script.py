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


def test_tier_gains_subtract_each_questions_run_mean():
    def ep(q: str, tiers: str, f1: float, lam: float = 0.0) -> dict:
        return {"question_id": q, "tiers": tiers, "f1": f1, "cost_lambda": lam}

    # q1 is easy, q2 hard; HIGH filter was tried on q2 only. Raw means would call HIGH worse
    # (0.4 vs 0.6); per question, HIGH is +0.2 above q2's mean (0.2) and LOW is below.
    eps = [
        ep("q1", "L,L,L,L,L", 1.0),
        ep("q1", "L,L,L,L,L", 1.0),
        ep("q2", "H,L,L,L,L", 0.4),
        ep("q2", "L,L,L,L,L", 0.0),
        ep("q3", "M,L,L,L,L", 0.3, lam=1.0),  # seen once: contributes 0
    ]
    gains = te.tier_gains(eps)
    assert gains[(0.0, "filter", "H")] == pytest.approx((0.2, 1))
    assert gains[(0.0, "filter", "L")] == pytest.approx(((0 + 0 - 0.2) / 3, 3))
    assert gains[(0.0, "entity", "L")] == pytest.approx((0.0, 4))
    assert gains[(1.0, "filter", "M")] == pytest.approx((0.0, 1))
    rows = te.gains_table(eps)
    assert "| 0 | filter | -0.067 (3) | – | +0.200 (1) |" in rows
