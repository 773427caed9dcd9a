"""Routers learned from outcome tables (evaluation.outcome_learners, ``evaluate.py learners``): a learner that
can tell questions apart passes the validation guard and ships, one that cannot leaves the fixed path shipped,
and cross-fitting never lets a question see its own outcome."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pytest

import evaluate
from evaluation.outcome_learners import (
    KNN,
    BestFixed,
    OutcomeTable,
    PlugIn,
    choose,
    common_paths,
    cross_fitted_choice,
    learn_and_judge,
)
from policies.table_ppo import PrincipalFeatures, TablePPO, TablePPOSettings

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "tests" / "data" / "custom_example.jsonl"


def _two_kinds(n: int, seed: int) -> tuple[np.ndarray, OutcomeTable]:
    """Questions of two kinds (two directions of the embedding); path A answers one kind, path B the other."""
    rng = np.random.default_rng(seed)
    kind = np.arange(n) % 2
    x = np.where(kind[:, None] == 0, [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]) + 0.05 * rng.normal(size=(n, 3))
    f1 = np.stack([1.0 - kind, kind.astype(float), np.full(n, 0.4)], axis=1)
    cost = np.tile([1.0, 1.0, 0.5], (n, 1))
    return x, OutcomeTable([f"q{i}" for i in range(n)], ["L,L,L,L,L", "H,H,H,H,H", "M,M,M,M,M"], f1, cost)


def test_a_learner_that_tells_the_kinds_apart_passes_the_guard_and_ships():
    x_val, val = _two_kinds(60, 0)
    x_test, test = _two_kinds(80, 1)
    learners = [BestFixed(), KNN(5), PlugIn(1.0)]
    rows, (shipped,) = learn_and_judge(learners, x_val, val, x_test, test, n_boot=300)
    by = {r.learner: r for r in rows}
    assert not by["best fixed"].passed and by["best fixed"].test_diff == (0.0, 0.0, 0.0)
    assert by["kNN k=5"].passed and by["kNN k=5"].test_f1[0] == pytest.approx(1.0)
    assert by["plug-in ridge alpha=1"].passed
    assert shipped.router in {"kNN k=5", "plug-in ridge alpha=1"}
    assert shipped.vs_fixed[0] == pytest.approx(0.5) and shipped.vs_fixed[1] > 0.3
    assert shipped.vs_high is not None and shipped.vs_high[0] == pytest.approx(0.5)


def test_ppo_trained_on_the_table_tells_the_kinds_apart_in_both_settings_and_every_seed(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where SB3 would put a logger folder of its own
    x_val, val = _two_kinds(60, 0)
    x_test, test = _two_kinds(80, 1)
    quick = TablePPOSettings(timesteps=3000)
    learners = [TablePPO(0, False, quick), TablePPO(1, True, quick)]
    prices = (0.0, 0.2)
    rows, shipped = learn_and_judge(learners, x_val, val, x_test, test, prices=prices, folds=3, n_boot=300)
    by = {(r.learner, r.price): r for r in rows}
    for name in ("PPO s0", "PPO λ-conditioned s1"):
        for price in (0.0, 0.2):
            assert by[name, price].passed, (name, price)
            assert by[name, price].test_f1[0] > 0.95, (name, price)
    assert all(s.router is not None for s in shipped)
    # The per-price router is one model per price and refuses one it was not trained at; the conditioned one
    # answers at any price.
    with pytest.raises(KeyError, match=r"not 0\.5"):
        learners[0].choose(x_test, 0.5)
    assert learners[1].choose(x_test, 0.5).shape == (80,)
    assert list(tmp_path.glob("SB3-*")) == []  # no empty SB3-<time> folder per learn()


def test_principal_features_are_fitted_on_the_training_rows_and_standardised():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(50, 6)) * [5, 3, 1, 0.1, 0.1, 0.1]
    feats = PrincipalFeatures(2).fit(x)
    z = feats.transform(x)
    assert z.shape == (50, 2) and z.dtype == np.float32
    assert np.allclose(z.mean(axis=0), 0, atol=1e-5) and np.allclose(z.std(axis=0), 1, atol=1e-4)
    assert PrincipalFeatures(10).fit(x[:3]).transform(x).shape[1] == 2  # 3 centred rows span 2 directions


def test_without_a_signal_no_learner_passes_and_the_fixed_path_ships():
    rng = np.random.default_rng(3)

    def noise(n: int) -> tuple[np.ndarray, OutcomeTable]:
        f1 = rng.random((n, 3)) * [0.5, 0.5, 0.6]  # the third path is best on average; nothing predicts more
        table = OutcomeTable([f"q{i}" for i in range(n)], ["a", "b", "c"], f1, np.ones((n, 3)))
        return rng.normal(size=(n, 8)), table

    (x_val, val), (x_test, test) = noise(100), noise(100)
    rows, (shipped,) = learn_and_judge([KNN(10), PlugIn(10.0)], x_val, val, x_test, test, n_boot=300)
    assert not any(r.passed for r in rows)
    assert shipped.router is None and shipped.fixed_path == "c" and shipped.vs_fixed == (0.0, 0.0, 0.0)
    assert shipped.vs_high is None  # these tables have no all-HIGH column


def test_cross_fitting_never_lets_a_question_see_its_own_outcome():
    rng = np.random.default_rng(7)
    n = 50
    # Every question's best path is random and its embedding unique: 1-NN in sample would be the oracle.
    f1 = rng.random((n, 4))
    table = OutcomeTable([f"q{i}" for i in range(n)], list("abcd"), f1, np.ones((n, 4)))
    x = rng.normal(size=(n, 16))
    in_sample = choose(*KNN(1).fit(x, table).predict(x), 0.0, 1.0)
    assert (in_sample == f1.argmax(axis=1)).all()
    crossed = cross_fitted_choice(KNN(1), x, table, 0.0, 1.0, folds=5, seed=0)
    assert (crossed == f1.argmax(axis=1)).mean() < 0.6
    with pytest.raises(ValueError, match="folds"):
        small = OutcomeTable(table.qids[:3], table.labels, f1[:3], f1[:3])
        cross_fitted_choice(KNN(1), x[:3], small, 0.0, 1.0, folds=5, seed=0)


def test_a_price_moves_the_choice_to_the_cheaper_path_and_ties_go_to_it():
    f1 = np.array([[0.50, 0.55]])
    assert choose(f1, np.array([[0.1, 1.0]]), 0.0, 1.0)[0] == 1
    assert choose(f1, np.array([[0.1, 1.0]]), 0.1, 1.0)[0] == 0
    assert choose(np.array([[0.5, 0.5]]), np.array([[1.0, 0.1]]), 0.0, 1.0)[0] == 1


def test_the_plug_in_recovers_a_linear_outcome_and_tables_align_on_shared_paths():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 4))
    u = x / np.linalg.norm(x, axis=1, keepdims=True)
    f1 = np.stack([u @ [0.3, 0, 0, 0] + 0.5, np.full(200, 0.5)], axis=1)
    table = OutcomeTable([str(i) for i in range(200)], ["a", "b"], f1, np.ones((200, 2)))
    pred, cost = PlugIn(1e-3).fit(x, table).predict(x)
    assert np.abs(pred - f1).max() < 0.01 and np.allclose(cost, 1.0)
    other = OutcomeTable(table.qids, ["b", "z"], f1, f1)
    assert common_paths(table, other) == ["b"]
    with pytest.raises(ValueError, match=r"paths \['z'\] are not in the outcome table"):
        table.restricted(["z"])


def _frontier(tmp_path: Path, split: str) -> Path:
    out = tmp_path / f"f-{split}"
    code = evaluate.main(
        ["frontier", "--benchmark", "custom", "--split", split, "--set", f"benchmark.options.path={EXAMPLE}",
         "--set", "backend=fake", "--set", "encoder=hashing", "--set", "memory=no_ce",
         "--set", f"cache.path={tmp_path / 'calls.sqlite'}", "--set", f"question_bank.cache_dir={tmp_path}",
         "--baselines", "all-low,all-mid,all-high", "--n-boot", "50", "--no-progress", "--out", str(out)]
    )  # fmt: skip
    assert code == 0
    (records,) = (out / "records").glob(f"*/{split}")
    return records


def test_the_command_reads_both_tables_and_writes_what_ships(tmp_path, capsys):
    val, test = _frontier(tmp_path, "val"), _frontier(tmp_path, "test")
    capsys.readouterr()
    code = evaluate.main(
        ["learners", "--benchmark", "custom", "--option", f"path={EXAMPLE}", "--encoder", "hashing",
         "--val-records", str(val), "--test-records", str(test), "--k", "1", "--ridge", "1", "--folds", "2",
         "--ppo-seeds", "0,1", "--ppo", "conditioned", "--ppo-timesteps", "256", "--prices", "0,0.1",
         "--n-boot", "50", "--out", str(tmp_path / "learners"), "--export", str(tmp_path / "router"),
         "--export-price", "0.1"]
    )  # fmt: skip
    assert code == 0
    text = capsys.readouterr().out
    assert "learners fitted on" in text and "price 0: ships" in text
    assert "PPO λ-conditioned over 2 seeds, price 0.1: test F1 mean" in text
    data = json.loads((tmp_path / "learners" / "learners.json").read_text())
    assert {r["learner"] for r in data["rows"]} == {
        "best fixed", "kNN k=1", "plug-in ridge alpha=1", "PPO λ-conditioned s0", "PPO λ-conditioned s1"
    }  # fmt: skip
    assert sorted(data["paths"]) == ["H,H,H,H,H", "L,L,L,L,L", "M,M,M,M,M"]
    # The docs render the committed file: one row per seed family and price, one verdict row per price.
    from evaluation.learners_report import learners_markdown

    page = learners_markdown(tmp_path / "learners")
    assert page.count("| PPO λ-conditioned, 2 seeds | ") == 2 and "| kNN k=1 | 0.1 | " in page
    assert sum(line.startswith(("| 0 | `", "| 0.1 | `")) for line in page.splitlines()) == 2
    # What ships at price 0.1, in the router format, with the pipeline the tables were made with.
    from policies.router import Router

    router = Router.load(tmp_path / "router")
    (verdict,) = [v for v in data["shipped"] if v["price"] == 0.1]
    assert router.metadata["learners_verdict"]["price"] == 0.1
    assert router.metadata.get("fixed_path", router.metadata.get("selector", {}).get("learner")) in (
        verdict["router"] or verdict["fixed_path"],
    )
    assert router.config["encoder"] == "hashing"
    assert f"exported {verdict['router'] or 'the fixed path'}" in text
    with pytest.raises(SystemExit, match="no such records directory"):
        evaluate.main(["learners", "--benchmark", "custom", "--val-records", str(tmp_path / "nope"),
                       "--test-records", str(test)])  # fmt: skip


def test_a_seed_family_is_one_row_with_its_mean_and_range_and_a_bad_file_is_named(tmp_path):
    from evaluation.learners_report import learners_markdown, load_report
    from evaluation.outcome_learners import LearnerRow, Shipped

    def row(name: str, f1: float, passed: bool) -> dict:
        diff = (f1 - 0.5, f1 - 0.6, f1 - 0.4)
        return LearnerRow(name, 0.0, f1, diff, passed, (f1, f1 - 0.1, f1 + 0.1), 0.25, diff,
                          {"M,M,M,M,M": 3}).as_dict()  # fmt: skip

    verdict = Shipped(0.0, "M,M,M,M,H", None, (0.5, 0.45, 0.55), (0.0, 0.0, 0.0), (0.01, -0.02, 0.04), 0.2)
    doc = {"rows": [row("best fixed", 0.5, False), row("PPO s0", 0.25, False), row("PPO s1", 0.75, True)],
           "shipped": [verdict.as_dict()], "val_questions": ["a"] * 7, "test_questions": ["b"] * 9,
           "paths": ["x", "y"]}  # fmt: skip
    (tmp_path / "learners.json").write_text(json.dumps(doc))
    page = learners_markdown(tmp_path)
    assert "Fitted on 7 validation questions, judged on 9 test questions, over 2 paths" in page
    family = "| PPO, 2 seeds | 0 | +0.000 (mean) | 1 of 2 | 0.500 (seeds 0.250–0.750) | 25.0% "
    assert family + "| +0.000 (seeds -0.250 to +0.250) |" in page
    assert "| best fixed | 0 | +0.000 [-0.100, +0.100] | no | 0.500 [0.400, 0.600] | 25.0% " in page
    assert "| 0 | `M,M,M,M,H` | the fixed path (no learner passed the guard) | 0.500 [0.450, 0.550] " in page
    rows, (shipped,), _ = load_report(tmp_path / "learners.json")
    assert shipped == verdict and rows[2].passed and rows[2].test_f1 == (0.75, 0.75 - 0.1, 0.75 + 0.1)
    (tmp_path / "learners.json").write_text(json.dumps({"rows": []}))
    with pytest.raises(ValueError, match=r"learners\.json: not a learners report"):
        load_report(tmp_path / "learners.json")
    with pytest.raises(FileNotFoundError, match=r"no learners\.json"):
        learners_markdown(tmp_path / "nowhere")
