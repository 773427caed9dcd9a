"""What ``evaluate.py learners`` ships, exported in the router format: a learned table router (kNN,
plug-in, PPO per price and λ-conditioned) reloads with ``Router.load`` and routes every module of a question
by the path the learner chose; when nothing passed the guard the fixed path ships in the same format."""

from __future__ import annotations

import numpy as np
import pytest

from evaluation.learner_export import export_shipped
from evaluation.outcome_learners import KNN, OutcomeTable, PlugIn, Shipped, fitted_choices, ref_cost_of
from modules.tier import parse_tiers
from policies.router import Router, RouterLoadError
from policies.table_ppo import TablePPO, TablePPOSettings

DIM = 8
LABELS = ["H,M,M,M,M", "M,M,M,M,H", "L,L,L,L,L"]


def _table(n: int, seed: int) -> tuple[np.ndarray, OutcomeTable]:
    """Two kinds of question: path 0 answers one, path 1 the other, the cheap path 2 half of both."""
    rng = np.random.default_rng(seed)
    kind = np.arange(n) % 2
    x = np.eye(DIM)[kind] + 0.05 * rng.normal(size=(n, DIM))
    f1 = np.stack([1.0 - kind, kind.astype(float), np.full(n, 0.5)], axis=1)
    cost = np.tile([1.0, 1.0, 0.2], (n, 1))
    return x.astype(np.float32), OutcomeTable([f"q{i}" for i in range(n)], LABELS, f1, cost)


def _observations(router: Router, x: np.ndarray, module: int) -> np.ndarray:
    lay = router.layout
    obs = np.zeros((x.shape[0], lay.dim), dtype=np.float32)
    obs[:, lay.module_slice[0] + module] = 1.0
    obs[:, lay.query_slice[0] : lay.query_slice[1]] = x
    obs[:, lay.scalar_slice[0] :] = 0.3  # scalars the selector never reads
    return obs


QUICK = TablePPOSettings(timesteps=3000)


@pytest.mark.parametrize(
    "learner",
    [KNN(5), PlugIn(1.0), TablePPO(0, False, QUICK), TablePPO(1, True, QUICK)],
    ids=["knn", "plug-in", "ppo", "ppo-conditioned"],
)
def test_a_learned_router_ships_in_the_router_format_and_routes_as_the_learner(tmp_path, learner):
    (x_val, val), (x_test, _) = _table(60, 0), _table(40, 1)
    price = 0.1
    verdict = Shipped(price, "L,L,L,L,L", learner.name, (1.0, 1.0, 1.0), (0.5, 0.4, 0.6), None, 0.5)
    ref = ref_cost_of(val)
    dest = export_shipped(verdict, [learner], x_val, val, ref, DIM, tmp_path / "r", {"encoder": "x"})
    router = Router.load(dest)
    assert router.metadata["selector"]["learner"] == learner.name
    want = fitted_choices(learner, x_val, val, x_test, [price], ref)[price]
    assert set(want) == {0, 1}  # it routes: both kinds of question get their own path
    for module in range(5):
        got = router.act(_observations(router, x_test, module))
        assert got.tolist() == [int(parse_tiers(LABELS[p])[module]) for p in want]


def test_without_a_passing_learner_the_fixed_path_ships_and_a_broken_selector_is_refused(tmp_path):
    x_val, val = _table(20, 0)
    verdict = Shipped(0.0, "M,M,M,M,H", None, (0.5, 0.4, 0.6), (0.0, 0.0, 0.0), None, 0.2)
    router = Router.load(export_shipped(verdict, [], x_val, val, ref_cost_of(val), DIM, tmp_path / "f", {}))
    assert router.metadata["fixed_path"] == "M,M,M,M,H" and "selector" not in router.metadata
    assert router.act(_observations(router, x_val[:3], 4)).tolist() == [2, 2, 2]
    # A selector entry that names no known kind is refused at load, naming it.
    learner = KNN(3)
    shipped = Shipped(0.0, "L,L,L,L,L", learner.name, (1.0, 1.0, 1.0), (0.5, 0.4, 0.6), None, 0.5)
    dest = export_shipped(shipped, [learner], x_val, val, ref_cost_of(val), DIM, tmp_path / "k", {})
    meta_path = dest / "metadata.json"
    meta_path.write_text(meta_path.read_text().replace('"kind": "knn"', '"kind": "forest"'))
    with pytest.raises(RouterLoadError, match="selector kind 'forest'"):
        Router.load(dest)


def test_an_exported_selector_routes_live_questions_through_the_frontier_as_the_learner_chose(tmp_path):
    """End to end on the fake stack: the observation the pipeline builds carries the question embedding the
    selector reads, so ``evaluate.py frontier --routers`` runs each question on the learner's path."""
    import json
    from pathlib import Path

    import evaluate
    from benchmarks.registry import get_benchmark
    from evaluation.cli_routability import question_index
    from memory.encoder import get_encoder

    example = Path(__file__).resolve().parent / "data" / "custom_example.jsonl"
    index = question_index(get_benchmark("custom", path=str(example)), "test")
    qids = sorted(index)
    encoder = get_encoder("hashing")
    x = np.asarray(encoder.encode([index[q][0] for q in qids]), dtype=np.float64)
    f1 = np.eye(3)[np.arange(len(qids)) % 3]  # question i is answered by path i mod 3 alone
    val = OutcomeTable(qids, LABELS, f1, np.tile([1.0, 1.0, 0.2], (len(qids), 1)))
    learner = KNN(1)
    verdict = Shipped(0.0, LABELS[2], learner.name, (1.0, 1.0, 1.0), (0.0, 0.0, 0.0), None, 0.0)
    export_shipped(verdict, [learner], x, val, ref_cost_of(val), encoder.dim, tmp_path / "sel", {})
    out = tmp_path / "frontier"
    code = evaluate.main(
        ["frontier", "--benchmark", "custom", "--split", "test", "--set", f"benchmark.options.path={example}",
         "--set", "backend=fake", "--set", "encoder=hashing", "--set", "memory=no_ce",
         "--set", f"cache.path={tmp_path / 'calls.sqlite'}", "--set", f"question_bank.cache_dir={tmp_path}",
         "--baselines", "all-low", "--routers", str(tmp_path / "sel"), "--n-boot", "50", "--no-progress",
         "--out", str(out)]
    )  # fmt: skip
    assert code == 0
    (records,) = out.glob("records/*/test/router-*.jsonl")
    letter = {"LOW": "L", "MID": "M", "HIGH": "H"}
    routed = {
        r["question_id"]: ",".join(letter[t] for t in r["tiers"])
        for r in map(json.loads, records.read_text().splitlines())
    }
    assert routed == {q: LABELS[i % 3] for i, q in enumerate(qids)}
