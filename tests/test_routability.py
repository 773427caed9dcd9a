"""``evaluate.py routability``: the kNN router, its shuffled control and the best fixed path, by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from common.datadir import DataFileError, resolve_data_dir
from evaluation.routability import (
    PathScores,
    group_mask,
    hindsight_best_fixed,
    knn_choice,
    load_paths,
    masked_choice,
    neighbours,
    objective,
    oracle_choice,
    ridge_weights,
    routability,
    smoother_choice,
)


def _path(label: str, f1: list[float], cost: float) -> PathScores:
    return PathScores(f"fixed-{label}", label, np.asarray(f1, float), np.full(len(f1), cost))


def test_neighbours_are_the_most_similar_others() -> None:
    # angles 0°, 10°, 90°, 100° on the unit circle: 0 and 1 are each other's nearest, as are 2 and 3
    ang = np.deg2rad([0.0, 10.0, 90.0, 100.0])
    emb = np.stack([np.cos(ang), np.sin(ang)], axis=1) * [[1.0], [3.0], [0.5], [2.0]]  # norms don't matter
    assert neighbours(emb, 1).ravel().tolist() == [1, 0, 3, 2]
    # second neighbour of 0: cos(90°)=0 vs cos(100°)<0, so 2
    assert neighbours(emb, 2)[0].tolist() == [1, 2]
    with pytest.raises(ValueError, match="k must be between 1 and n_questions - 1 = 3"):
        neighbours(emb, 4)
    with pytest.raises(ValueError, match="k must be"):
        neighbours(emb, 0)


def test_neighbour_ties_break_towards_the_lower_index() -> None:
    emb = np.ones((5, 3))
    assert neighbours(emb, 2).tolist() == [[1, 2], [0, 2], [0, 1], [0, 1], [0, 1]]


def test_objective_prices_the_cost_share() -> None:
    assert objective(np.array([0.6, 0.5]), np.array([1.0, 0.0]), 0.2).tolist() == pytest.approx([0.4, 0.5])


def test_best_fixed_and_oracle_follow_the_price() -> None:
    cheap = _path("L,L,L,L,L", [0.5, 0.5, 0.5, 0.5], 0.0)
    dear = _path("H,H,H,H,H", [1.0, 0.2, 1.0, 0.2], 10.0)  # mean 0.6
    assert hindsight_best_fixed([cheap, dear], 0.0, 10.0) == 1  # 0.6 > 0.5
    assert hindsight_best_fixed([cheap, dear], 0.2, 10.0) == 0  # 0.6 - 0.2 < 0.5
    assert oracle_choice([cheap, dear], 0.0, 10.0).tolist() == [1, 0, 1, 0]
    assert oracle_choice([cheap, dear], 0.6, 10.0).tolist() == [0, 0, 0, 0]  # 1.0 - 0.6 < 0.5
    # an F1 tie goes to the cheaper path
    same = _path("M,M,M,M,M", [0.5, 0.5, 0.5, 0.5], 1.0)
    assert oracle_choice([same, cheap], 0.0, 10.0).tolist() == [1, 1, 1, 1]


def test_knn_router_picks_the_path_its_neighbours_scored_best() -> None:
    # questions 0-3 sit in one cluster where path A answers, 4-7 in another where path B does
    emb = np.array([[1.0, 0.0]] * 4 + [[0.0, 1.0]] * 4) + np.linspace(0, 0.01, 8)[:, None]
    a = _path("A", [1, 1, 1, 1, 0, 0, 0, 0], 1.0)
    b = _path("B", [0, 0, 0, 0, 1, 1, 1, 1], 1.0)
    assert knn_choice([a, b], neighbours(emb, 3), 0.0, 1.0).tolist() == [0, 0, 0, 0, 1, 1, 1, 1]


def test_group_mask_is_leave_one_out_within_the_category() -> None:
    mask = group_mask(["a", "b", "a", "c"])
    # "a" questions see each other; "b" and "c" are alone and fall back to every other question
    assert mask.astype(int).tolist() == [[0, 0, 1, 0], [1, 0, 1, 1], [1, 0, 0, 0], [1, 1, 1, 0]]


def test_masked_choice_refuses_a_row_that_sees_itself_or_nothing() -> None:
    a, b = _path("A", [1, 0], 1.0), _path("B", [0, 1], 1.0)
    with pytest.raises(ValueError, match="at least one other question"):
        masked_choice([a, b], np.array([[True, False], [True, False]]), 0.0, 1.0)
    with pytest.raises(ValueError, match="at least one other question"):
        masked_choice([a, b], np.array([[False, False], [True, False]]), 0.0, 1.0)


def test_routability_finds_a_real_signal() -> None:
    rng = np.random.default_rng(1)
    n = 40
    cluster = np.arange(n) % 2
    emb = np.stack([cluster, 1 - cluster], axis=1) + rng.normal(0, 0.05, (n, 2))
    a = _path("A", list(1.0 - cluster), 1.0)
    b = _path("B", list(cluster.astype(float)), 1.0)
    row, cat = routability(
        [a, b], {"question": emb}, ks=[5], categories=list(cluster), n_permutations=100, n_boot=200
    )
    assert (row.learner, cat.learner) == ("kNN question k=5", "category")
    assert cat.router.mean == 1.0 and cat.signal and cat.beats_fixed  # the category alone tells them apart
    assert row.router.mean == 1.0  # every question routed to the path that answers it
    assert row.fixed.mean == 0.5 and row.fixed_path == "A"  # tie on F1 and cost: the first path
    assert row.diff.mean == pytest.approx(0.5) and row.diff.lo > 0
    assert row.better == 20 and row.worse == 0
    assert row.control_p < 0.05 and row.signal and row.beats_fixed
    assert row.oracle_f1 == 1.0 and row.captured == pytest.approx(1.0)
    assert row.router_paths == {"A": 20, "B": 20}
    from evaluation.cli_routability import verdict

    text = verdict([row, cat])
    assert "beats both its shuffled control" in text
    assert "(2 learners tested: Bonferroni keeps only p < 0.0250, which kNN question k=5 meets)" in text


def test_ridge_weights_are_the_exact_leave_one_out_refit() -> None:
    rng = np.random.default_rng(3)
    emb, y, alpha = rng.normal(size=(9, 4)), rng.normal(size=9), 0.7
    w = ridge_weights(emb, alpha)
    assert np.all(w.diagonal() == 0)
    x = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    for i in range(9):
        keep = np.arange(9) != i
        a = np.hstack([np.ones((8, 1)), x[keep]])  # intercept, unpenalised
        beta = np.linalg.solve(a.T @ a + alpha * np.diag([0.0, 1, 1, 1, 1]), a.T @ y[keep])
        assert w[i] @ y == pytest.approx(beta[0] + x[i] @ beta[1:], abs=1e-10)
    # a huge penalty leaves the intercept: each prediction is the mean of the other questions
    big = ridge_weights(emb, 1e9)
    assert big @ y == pytest.approx((y.sum() - y) / 8, abs=1e-6)
    with pytest.raises(ValueError, match="alpha must be positive"):
        ridge_weights(emb, 0.0)
    with pytest.raises(ValueError, match="non-zero diagonal"):
        smoother_choice([_path("A", [1] * 9, 1.0), _path("B", [0] * 9, 1.0)], np.eye(9), 0.0, 1.0)


def test_ridge_router_finds_a_linear_signal_knn_also_sees() -> None:
    # path A pays where the first coordinate is positive, B elsewhere: one direction of the space
    rng = np.random.default_rng(2)
    n = 60
    emb = rng.normal(size=(n, 8))
    side = emb[:, 0] > 0
    a, b = _path("A", list(side.astype(float)), 1.0), _path("B", list((~side).astype(float)), 1.0)
    rows = routability([a, b], {"question": emb}, ks=[5], ridge_alphas=[1.0], n_permutations=50, n_boot=200)
    knn, ridge = rows
    assert ridge.learner == "ridge question alpha=1"
    assert ridge.router.mean > 0.8 and ridge.signal and ridge.beats_fixed
    assert ridge.router.mean >= knn.router.mean  # the linear rule is what ridge models


def test_routability_without_a_signal_matches_its_control() -> None:
    # identical embeddings: the router cannot tell questions apart, and shuffling changes nothing
    a = _path("A", [1, 0, 1, 0, 1, 0], 1.0)
    b = _path("B", [0, 1, 0, 1, 0, 1], 2.0)
    row, ridge, cat = routability(
        [a, b],
        {"question": np.ones((6, 4))},
        ks=[2],
        ridge_alphas=[1.0],
        categories=["x"] * 6,
        n_permutations=20,
        n_boot=100,
    )
    assert row.control_p == 1.0 and not row.signal and not row.beats_fixed
    assert ridge.control_p == 1.0 and not ridge.signal  # no variation: ridge is the others' mean
    assert row.fixed_path == "A"  # tie on F1: cheaper
    assert cat.control_p == 1.0 and not cat.signal  # one category: nothing to tell apart


def test_routability_prices_cost_and_reports_shares() -> None:
    emb = np.eye(4)
    cheap = _path("L", [0.5] * 4, 0.0)
    dear = _path("H", [0.6] * 4, 10.0)
    free, priced = routability(
        [cheap, dear], {"question": emb}, ks=[1], prices=[0.0, 0.2], n_permutations=5, n_boot=50
    )
    assert free.fixed_path == "H" and free.fixed_cost_share == 1.0 and free.router_cost_share == 1.0
    assert priced.fixed_path == "L" and priced.fixed_cost_share == 0.0 and priced.router_cost_share == 0.0
    assert priced.diff.mean == pytest.approx(0.0) and np.isnan(priced.captured)  # the oracle gains nothing
    with pytest.raises(ValueError, match="3 context embeddings for 4 questions"):
        routability([cheap, dear], {"question": emb, "context": np.eye(3)})
    with pytest.raises(ValueError, match="2 categories for 4 questions"):
        routability([cheap, dear], {"question": emb}, categories=["a", "b"])


def _write(path: Path, recs: list[dict]) -> None:
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n", encoding="utf-8")


def _rec(qid: str, tiers: list[str], f1: float, cost: float) -> dict:
    return {"question_id": qid, "tiers": tiers, "f1": f1, "module_cost": cost}


def test_load_paths_aligns_on_shared_questions(tmp_path: Path) -> None:
    _write(tmp_path / "fixed-LLLLL.jsonl", [_rec(q, ["LOW"] * 5, 0.1, 0.0) for q in ("q1", "q2", "q3", "q4")])
    _write(tmp_path / "fixed-HHHHH.jsonl", [_rec(q, ["HIGH"] * 5, 0.9, 5.0) for q in ("q3", "q2", "q1")])
    _write(tmp_path / "random-s0.jsonl", [_rec("q1", ["MID"] * 5, 0.5, 1.0)])  # not a fixed path
    qids, paths = load_paths(tmp_path)
    assert qids == ["q1", "q2", "q3"]
    assert [p.label for p in paths] == ["H,H,H,H,H", "L,L,L,L,L"]
    assert paths[0].cost.tolist() == [5.0, 5.0, 5.0]


def test_load_paths_names_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such records directory"):
        load_paths(tmp_path / "nope")
    _write(tmp_path / "fixed-LLLLL.jsonl", [_rec(q, ["LOW"] * 5, 0.1, 0.0) for q in ("q1", "q2", "q3")])
    with pytest.raises(ValueError, match="two or more fixed-path record files"):
        load_paths(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"fixed-MMMMM\.jsonl: no such record file"):
        load_paths(tmp_path, ["fixed-LLLLL", "fixed-MMMMM"])
    bad = [_rec(q, ["HIGH"] * 5, 0.9, 5.0) for q in ("q1", "q2", "q3")]
    bad[1]["f1"] = None
    _write(tmp_path / "fixed-HHHHH.jsonl", bad)
    with pytest.raises(ValueError, match=r"fixed-HHHHH.jsonl: question 'q2' has no numeric 'f1'"):
        load_paths(tmp_path)


def _locomo_records(rec_dir: Path, n: int) -> list[Any]:
    """Records of two fixed paths on the first ``n`` real LoCoMo test questions (skips without data)."""
    try:
        resolve_data_dir()
    except DataFileError as exc:
        pytest.skip(f"benchmark data directory absent ({exc})")
    from benchmarks.registry import get_benchmark

    qs = [q for s in get_benchmark("locomo").load("test") for q in s.questions][:n]
    rec_dir.mkdir(parents=True)
    low = [_rec(q.question_id, ["LOW"] * 5, i % 2, 0.01) for i, q in enumerate(qs)]
    _write(rec_dir / "fixed-LLLLL.jsonl", low)
    _write(rec_dir / "fixed-HHHHH.jsonl", [_rec(q.question_id, ["HIGH"] * 5, 0.5, 10.0) for q in qs])
    return qs


def test_cli_on_real_question_ids(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import evaluate

    rec_dir = tmp_path / "records" / "fp" / "test"
    qs = _locomo_records(rec_dir, 12)
    out = tmp_path / "out"
    code = evaluate.main(
        ["routability", "--benchmark", "locomo", "--records", str(rec_dir), "--encoder", "hashing",
         "--k", "3,5", "--prices", "0,0.1", "--permutations", "10", "--n-boot", "50", "--out", str(out)]
    )  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    assert "12 questions × 2 fixed paths" in printed and "price 0.1:" in printed
    data = json.loads((out / "routability.json").read_text())
    assert [(r["learner"], r["price"]) for r in data["rows"]] == [
        ("kNN question k=3", 0.0),
        ("kNN question k=3", 0.1),
        ("kNN question k=5", 0.0),
        ("kNN question k=5", 0.1),
        ("ridge question alpha=1", 0.0),
        ("ridge question alpha=1", 0.1),
        ("ridge question alpha=10", 0.0),
        ("ridge question alpha=10", 0.1),
        ("category", 0.0),
        ("category", 0.1),
    ]
    assert data["split"] == "test" and data["n_questions"] == 12 and "git_commit" in data
    assert (out / "routability.csv").read_text().count("\n") == 11 and (
        out / "routability.png"
    ).stat().st_size > 0
    # a question id the benchmark split does not have is named, not silently dropped
    _write(rec_dir / "fixed-MMMMM.jsonl", [_rec(q.question_id, ["MID"] * 5, 0.3, 1.0) for q in qs])
    with pytest.raises(SystemExit, match="12 of the 12 record question ids are not in locomo/val"):
        evaluate.main(
            [
                "routability",
                "--benchmark",
                "locomo",
                "--split",
                "val",
                "--records",
                str(rec_dir),
                "--encoder",
                "hashing",
            ]
        )
    with pytest.raises(SystemExit, match="no such records directory"):
        evaluate.main(["routability", "--benchmark", "locomo", "--records", str(tmp_path / "test")])


def test_cli_context_learner_reads_the_frontier_question_bank(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import evaluate
    from evaluation.frontier_config import compose_default_config

    out_dir = tmp_path / "frontier"
    rec_dir = out_dir / "records" / "fp" / "test"
    _locomo_records(rec_dir, 8)
    args = ["routability", "--benchmark", "locomo", "--records", str(rec_dir), "--encoder", "hashing"]
    args += ["--k", "3", "--permutations", "5", "--n-boot", "50", "--no-category", "--context"]
    with pytest.raises(SystemExit, match="--context needs the frontier run's config"):
        evaluate.main(args)
    cfg = compose_default_config(
        ["encoder=hashing", "memory=no_ce", f"question_bank.cache_dir={tmp_path / 'qb'}"]
    )
    (out_dir / "metadata.json").write_text(json.dumps({"config": cfg}), encoding="utf-8")
    assert evaluate.main(args) == 0
    printed = capsys.readouterr().out
    assert "kNN question k=3" in printed and "kNN context k=3" in printed
