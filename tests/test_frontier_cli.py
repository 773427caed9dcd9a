"""End-to-end test of `evaluate.py frontier` on the synthetic fake task (envs.fakes).

Real code paths: checkpoint discovery and loading (policies.router), grouping by λ, the
record cache, run_episode, best-fixed search on a validation bank, aggregation, verdict,
CSV/JSON/PNG/metadata outputs. Only the components and banks are the fakes from envs.fakes
(make_components/question_bank_from need real models and data).
"""

import argparse
import json

import pytest

from envs.fakes import TIER_COSTS, make_fake_bank, make_fake_components
from envs.rollout import run_episode
from evaluation import cli_frontier, frontier_config, frontier_runner, frontier_systems
from modules.tier import Tier

pytestmark = pytest.mark.timeout(300)


def _model(seed, comps):
    """An (untrained) PPO router: export and evaluation do not care whether it learned anything."""
    from stable_baselines3 import PPO

    from envs.reward import RewardShaper
    from envs.router_env import MemoryRouterEnv
    from policies.sb3_policy import router_policy_kwargs

    env = MemoryRouterEnv(make_fake_bank(1), comps, RewardShaper(), seed=seed)
    kw = router_policy_kwargs(comps.obs_builder.spec, hidden=8, latent=8, pi_layers=(8,), vf_layers=(8,))
    return PPO("MlpPolicy", env, policy_kwargs=kw, n_steps=16, batch_size=16, seed=seed, device="cpu")


def _export(model, path, lam, seed, comps):
    from policies.export import export_router

    meta = {
        "observation_spec": comps.obs_builder.spec.to_dict(),
        "encoder": comps.encoder.name,
        "cost_lambda": lam,
        "seed": seed,
        "config": {"seed": seed, "cost": {"lambda": lam}},
    }
    return export_router(model, path, meta, verify=16)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep")
    comps = make_fake_components()
    models = {0: _model(0, comps), 1: _model(1, comps)}
    # λ=0.5 reuses seed 0's weights: its records must still be its own (λ is in the observation)
    for lam, seed in [(0.0, 0), (0.0, 1), (0.5, 0)]:
        _export(models[seed], root / f"lam{lam}_s{seed}" / "checkpoints" / "best", lam, seed, comps)
    # a second checkpoint of one run: searching the sweep dir without --checkpoint-glob is ambiguous
    _export(models[0], root / "lam0.0_s0" / "checkpoints" / "last", 0.0, 0, comps)
    return root


def _args(tmp_path, *extra):
    parser = argparse.ArgumentParser()
    cli_frontier.add_arguments(parser)
    return parser.parse_args(
        ["--out", str(tmp_path / "out"), "--no-progress", "--n-boot", "200", "--random-seeds", "0,1", *extra]
    )


def _run(args):
    paths = frontier_systems.find_checkpoints(args.routers, args.checkpoint_glob) if args.routers else []
    routers, ckpts, _ = frontier_systems.router_systems(paths) if paths else ([], [], [])
    comps = make_fake_components()
    return cli_frontier.run_with(
        args, {}, comps, make_fake_bank(4), routers, ckpts, lambda: make_fake_bank(2)
    )


def test_checkpoint_discovery(sweep):
    with pytest.raises(ValueError, match="checkpoint-glob"):
        frontier_systems.router_systems(frontier_systems.find_checkpoints([str(sweep)]))
    best = frontier_systems.find_checkpoints([str(sweep)], "best")
    assert len(best) == 3 and all(p.name == "best" for p in best)
    assert frontier_systems.find_checkpoints([str(sweep / "lam*_s0" / "checkpoints" / "best")]) == [
        p for p in best if "_s0" in str(p)
    ]
    with pytest.raises(FileNotFoundError, match="no such file or directory"):
        frontier_systems.find_checkpoints([str(sweep / "nothing*")])
    with pytest.raises(FileNotFoundError, match="with spaces, not commas"):
        frontier_systems.labelled_checkpoints([f"a={sweep / 'lam0.0_s0'},b={sweep / 'lam0.0_s1'}"], "best")


def test_frontier_end_to_end_and_record_cache(sweep, tmp_path, monkeypatch, capsys):
    args = _args(tmp_path, "--routers", str(sweep / "lam0.0_s*"), "--checkpoint-glob", "best")
    assert _run(args) == 0
    out = tmp_path / "out"
    text = capsys.readouterr().out
    assert "Q1." in text and "Q2." in text and "router λ=0" in text
    data = json.loads((out / "frontier.json").read_text())
    names = [s["name"] for s in data["systems"]]
    assert names[0] == "router λ=0" and "random" in names and any(n.startswith("best-fixed (") for n in names)
    router = data["systems"][0]
    assert router["n_seeds"] == 2 and router["n_questions"] == 12
    assert data["systems"][names.index("random")]["n_seeds"] == 2
    high = data["systems"][names.index("all-high")]
    assert high["metrics"]["f1"]["mean"] == pytest.approx(1.0)  # the fake task: all-HIGH answers everything
    assert high["metrics"]["module_cost"]["mean"] == pytest.approx(5 * TIER_COSTS[Tier.HIGH])
    low = data["systems"][names.index("all-low")]
    assert low["metrics"]["module_cost"]["mean"] == pytest.approx(5 * TIER_COSTS[Tier.LOW])
    meta = json.loads((out / "metadata.json").read_text())
    assert len(meta["checkpoints"]) == 2 and all(len(c["sha256"]) == 64 for c in meta["checkpoints"])
    assert meta["n_questions"] == 12 and meta["git_commit"] and meta["record_commits"]
    search = data["systems"][names.index(next(n for n in names if n.startswith("best-fixed")))]["params"][
        "search"
    ]
    assert search["n_evaluated"] >= 2 and search["trace"][0]["tiers"] == "H,H,H,H,H"
    png = (out / "frontier.png").read_bytes()
    assert png[:4] == b"\x89PNG" and len(png) > 10_000
    assert (out / "frontier.csv").read_text().count("\n") == len(names) + 1

    # Second run with one more checkpoint: only the new router's questions are evaluated.
    calls = []
    real = frontier_runner.evaluate_runs

    def counting(runs, items, components, **kw):
        ids = [str(i.question.question_id) for i in items]
        calls.extend((run.run_id, len(store.missing(ids))) for run, store in runs)
        return real(runs, items, components, **kw)

    monkeypatch.setattr(frontier_runner, "evaluate_runs", counting)
    args2 = _args(tmp_path, "--routers", str(sweep / "lam*"), "--checkpoint-glob", "best")
    assert _run(args2) == 0
    fresh = [(rid, n) for rid, n in calls if n > 0]
    assert len(fresh) == 1 and fresh[0][1] == 12  # the λ=0.5 router, all 12 questions
    data2 = json.loads((out / "frontier.json").read_text())
    assert [s["name"] for s in data2["systems"]][:2] == ["router λ=0", "router λ=0.5"]
    # cached records give identical numbers
    assert data2["systems"][0]["metrics"]["f1"] == router["metrics"]["f1"]


def test_baselines_only_candidates_search(tmp_path, capsys):
    args = _args(
        tmp_path,
        "--baselines",
        "all-low,all-high,best-fixed;fixed:L,L,H,L,L",
        "--best-fixed-search",
        "candidates",
        "--best-fixed-candidates",
        "L,L,H,L,L;L,H,L,L,L",
        "--best-fixed-budget",
        "0.3",
    )
    assert _run(args) == 0
    text = capsys.readouterr().out
    assert "CANNOT TELL: no router was evaluated." in text
    data = json.loads((tmp_path / "out" / "frontier.json").read_text())
    names = [s["name"] for s in data["systems"]]
    assert "fixed:L,L,H,L,L" in names
    # budget 0.3 x all-HIGH: both candidates (one HIGH, four LOW) fit; each answers a third of val
    best = next(s for s in data["systems"] if s["name"].startswith("best-fixed"))
    assert best["params"]["search"]["budget"] == pytest.approx(0.3 * 5 * TIER_COSTS[Tier.HIGH])
    assert TIER_COSTS[Tier.HIGH] + 4 * TIER_COSTS[Tier.LOW] <= 0.3 * 5 * TIER_COSTS[Tier.HIGH]
    assert best["params"]["tiers"] in ("L,L,H,L,L", "L,H,L,L,L")


def test_random_baseline_is_order_independent():
    items = make_fake_bank(2)
    comps = make_fake_components()
    run = frontier_runner.random_run(3)
    a = [run_episode(it, run.decide_for(it), comps).tiers for it in items]
    b = [run_episode(it, run.decide_for(it), comps).tiers for it in reversed(items)][::-1]
    assert a == b and len(set(a)) > 1


def test_overrides(tmp_path):
    cfg = frontier_config.apply_overrides(
        {"cost": {"lambda": 0.1}}, ["cost.unit=usd", "backend=fake", "x.y=[1, 2]"]
    )
    assert cfg["cost"] == {"lambda": 0.1, "unit": "usd"}
    assert cfg["backend"]["name"] == "fake"
    assert cfg["x"] == {"y": [1, 2]}
    with pytest.raises(ValueError, match="KEY=VALUE"):
        frontier_config.apply_overrides({}, ["oops"])
    fp1 = frontier_runner.record_fingerprint({"backend": {"name": "fake"}, "question_bank": {"limit": 5}}, {})
    fp2 = frontier_runner.record_fingerprint(
        {"backend": {"name": "fake"}, "question_bank": {"limit": 9, "max_samples": None}}, {}
    )
    fp3 = frontier_runner.record_fingerprint({"backend": {"name": "llamacpp"}}, {})
    assert fp1 == fp2 != fp3


def test_resolve_config_sources(tmp_path):
    base = frontier_config.compose_default_config()  # the project's Hydra config, as train.py sees it
    assert base["benchmark"]["name"] == "locomo" and "hydra" not in base
    ns = argparse.Namespace(config=None, set=["backend=fake"], benchmark="hotpotqa")
    cfg = frontier_config.resolve_config(ns, [{"benchmark": {"name": "locomo"}, "cost": {"lambda": 0.3}}])
    assert cfg["benchmark"]["name"] == "hotpotqa" and cfg["cost"]["lambda"] == 0.3
    assert cfg["backend"]["name"] == "fake"
    (tmp_path / "c.yaml").write_text("benchmark: {name: longmemeval}\nbackend: {name: fake}\n")
    ns = argparse.Namespace(config=str(tmp_path / "c.yaml"), set=[], benchmark=None)
    assert frontier_config.resolve_config(ns, [{"x": 1}])["benchmark"]["name"] == "longmemeval"



def test_set_options_of_the_benchmark_named_by_benchmark_take_effect():
    """Issue 49, item 12: `--benchmark hotpotqa --set benchmark.options.file=X` used to drop the file."""
    ns = argparse.Namespace(
        config=None, set=["benchmark.options.file=hotpot_dev_distractor_v1.json"], benchmark="hotpotqa"
    )
    cfg = frontier_config.resolve_config(ns, [{"benchmark": {"name": "locomo", "options": {}}}])
    assert cfg["benchmark"] == {"name": "hotpotqa", "options": {"file": "hotpot_dev_distractor_v1.json"}}


def test_mismatched_router_fails_before_any_evaluation(sweep, tmp_path, monkeypatch):
    """A router trained with another encoder is refused up front, not after the baselines ran."""
    calls = []
    monkeypatch.setattr(frontier_runner, "evaluate_runs", lambda *a, **k: calls.append(a) or [])
    args = _args(tmp_path, "--routers", str(sweep / "lam0.0_s0"), "--checkpoint-glob", "best")
    paths = frontier_systems.find_checkpoints(args.routers, args.checkpoint_glob)
    routers, ckpts, _ = frontier_systems.router_systems(paths)
    comps = make_fake_components()
    # the router was exported with the fake components' encoder; the encoder object may be shared
    # with other tests, so the rename is undone after this one
    monkeypatch.setattr(comps.encoder, "name", "minilm")
    with pytest.raises(ValueError, match="encoder"):
        cli_frontier.run_with(args, {}, comps, make_fake_bank(4), routers, ckpts, lambda: make_fake_bank(2))
    assert calls == []


def test_router_config_read_from_provenance(tmp_path):
    """train.py's exports keep the resolved config under provenance.config; the frontier uses it."""
    comps = make_fake_components()
    meta = {
        "observation_spec": comps.obs_builder.spec.to_dict(),
        "encoder": comps.encoder.name,
        "cost_lambda": 0.3,
        "seed": 2,
        "provenance": {"config": {"seed": 2, "encoder": "hashing", "cost": {"lambda": 0.3}}},
    }
    from policies.export import export_router

    path = export_router(_model(2, comps), tmp_path / "r" / "router", meta, verify=4)
    _, _, cfgs = frontier_systems.router_systems([path])
    assert cfgs == [{"seed": 2, "encoder": "hashing", "cost": {"lambda": 0.3}}]


def test_router_metrics_oracle_and_single_module_end_to_end(tmp_path, capsys):
    """Baselines incl. the 10 single-module paths on the fake task; every number computed by hand.

    Module costs: LOW 0.1, MID 1, HIGH 3 per module. all-LOW (0.5, F1 0), all-HIGH (15, F1 1).
    Oracle per question type: `when` -> all-MID with temporal=HIGH (cost 7), `who` -> entity=HIGH (7),
    `what` -> all-MID with one non-topic module LOW (4.1, the cheapest F1-1 path; ties by cost).
    """
    import csv

    args = _args(tmp_path, "--baselines", "all-low,all-mid,all-high,single-module")
    assert _run(args) == 0
    text = capsys.readouterr().out
    assert "Router metrics" in text and "oracle: PGR 1.000" in text and "call cache" in text
    out = tmp_path / "out"
    data = json.loads((out / "frontier.json").read_text())
    by_name = {s["name"]: s for s in data["systems"]}
    assert sum(s["params"].get("single_module") is not None for s in data["systems"]) == 10
    assert by_name["all-mid, temporal=HIGH"]["params"]["tiers"] == "M,M,H,M,M"
    oracle = by_name["oracle"]
    assert oracle["kind"] == "oracle" and oracle["params"]["paths_per_question"]["min"] == 13
    assert oracle["params"]["minimum_paths_missing"] == [] and "minimum paths" not in text
    assert oracle["metrics"]["f1"]["mean"] == pytest.approx(1.0)
    oracle_cost = (7 + 7 + 4.1) / 3
    assert oracle["metrics"]["module_cost"]["mean"] == pytest.approx(oracle_cost)
    fams = {(f["family"], f["cost_axis"]): f for f in data["router_metrics"]["families"]}
    share = (oracle_cost - 0.5) / 14.5
    # the oracle's curve (0,0) (share,1) (1,1): area 1 - share/2; its AIQ hull is the same shape
    assert fams[("oracle", "module_cost")]["apgr"]["mean"] == pytest.approx(1 - share / 2)
    assert fams[("oracle", "module_cost")]["aiq"]["mean"] == pytest.approx(1 - share / 2)
    assert fams[("oracle", "module_cost")]["cpt"]["0.5"]["mean"] == pytest.approx(share / 2)
    base = fams[("baselines", "module_cost")]
    # baseline PGR curve: 0 up to share 3.6/14.5, 1/3 to 6.5/14.5, then 2/3 -> 1 at share 1:
    # area 1/3*(6.5-3.6)/14.5 + (2/3+1)/2*(8/14.5)
    assert base["apgr"]["mean"] == pytest.approx((2.9 / 3 + 8 * 5 / 6) / 14.5)
    assert base["cpt"]["0.5"]["mean"] == pytest.approx(6.5 / 14.5)
    assert base["cpt"]["0.8"]["mean"] == pytest.approx((6.5 + 0.4 * 8) / 14.5)
    # AIQ hull (0.5,0) (7,2/3) (15,1): (6.5*1/3 + 8*5/6) / 14.5
    assert base["aiq"]["mean"] == pytest.approx((6.5 / 3 + 8 * 5 / 6) / 14.5)
    with open(out / "router_metrics.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert {(r["family"], r["cost_axis"]) for r in rows} == set(fams)
    assert float(rows[0]["apgr"]) == pytest.approx(
        fams[(rows[0]["family"], rows[0]["cost_axis"])]["apgr"]["mean"]
    )


def test_oracle_bounds_every_router(sweep, tmp_path):
    args = _args(
        tmp_path,
        "--routers",
        str(sweep / "lam*"),
        "--checkpoint-glob",
        "best",
        "--baselines",
        "all-low,all-high",
    )
    assert _run(args) == 0
    data = json.loads((tmp_path / "out" / "frontier.json").read_text())
    f1 = {s["name"]: s["metrics"]["f1"]["mean"] for s in data["systems"]}
    assert all(f1["oracle"] >= v - 1e-12 for v in f1.values())
    fams = {f["family"] for f in data["router_metrics"]["families"]}
    assert {"routers", "baselines", "oracle"} <= fams
    per = data["router_metrics"]["per_system"]
    assert "oracle_gain" in per["router λ=0"] and "oracle_gain" not in per["all-low"]
    # all-LOW and all-HIGH are 2 of the 13 minimum paths; the note names the other 11
    oracle = next(s for s in data["systems"] if s["kind"] == "oracle")
    assert len(oracle["params"]["minimum_paths_missing"]) == 11
    notes = data["router_metrics"]["notes"]
    assert any("lacks 11 of the 13 minimum paths" in n and "M,M,M,M,H" in n for n in notes)


def test_script_config_composes_the_experiment_and_leaves_the_bank_uncut():
    from evaluation.frontier_config import script_config

    quality = script_config("cpu_quality", ["question_bank.k=7"], "locomo")
    assert quality["strategy"]["options"]["keep_evidence"] is True and quality["question_bank"]["k"] == 7
    assert quality["question_bank"]["limit"] is None
    plain = script_config("none", [])
    assert "keep_evidence" not in (plain["strategy"].get("options") or {})
    assert script_config(None, []) == plain


def test_stratified_limit_matches_headroom_selection(tmp_path, monkeypatch):
    from evaluation.headroom import stratified

    bank = make_fake_bank(6)[:14]  # 6 + 6 + 2 questions of three categories
    seen_limits = []

    def fake_bank(cfg, split, encoder, progress=True):
        seen_limits.append(cfg["question_bank"]["limit"])
        n = cfg["question_bank"]["limit"]
        return bank[:n] if n else list(bank)

    monkeypatch.setattr(cli_frontier, "question_bank_from", fake_bank)
    comps = make_fake_components()
    cfg = {"question_bank": {}}
    plain = cli_frontier.test_items(_args(tmp_path, "--limit", "7"), cfg, comps)
    strat = cli_frontier.test_items(_args(tmp_path, "--limit", "7", "--stratified"), cfg, comps)
    assert seen_limits == [7, None]  # the stratified pick needs the whole split
    assert [it.question.question_id for it in plain] == [it.question.question_id for it in bank[:7]]
    cats = [it.question.category for it in strat]
    assert len(strat) == 7 and len(set(cats)) == 3  # the first 7 in bank order hold only two
    assert strat == stratified(bank, 7, lambda it: str(it.question.category))


def test_experiment_flag_composes_the_experiment_for_baseline_runs(tmp_path):
    from evaluation.frontier_config import resolve_config

    cfg = resolve_config(_args(tmp_path, "--experiment", "cpu_quality"), [])
    assert cfg["strategy"]["options"]["keep_evidence"] is True
    with pytest.raises(ValueError, match="cannot be combined"):
        resolve_config(_args(tmp_path, "--experiment", "cpu_quality"), [{"benchmark": {"name": "locomo"}}])


def test_config_check_pairs_one_config_with_every_lambda_of_a_conditioned_router(capsys):
    from evaluation.cli_frontier import _warn_config_mismatch

    cfg = {"benchmark": {"name": "locomo"}, "strategy": {"name": "implementation"}}
    # a λ-conditioned router: one checkpoint and config, one record per λ (this raised before)
    conditioned = [{"path": "a/router", "cost_lambda": lam} for lam in (0.0, 0.5)]
    _warn_config_mismatch([cfg], conditioned)
    assert "warning" not in capsys.readouterr().out
    other = {**cfg, "strategy": {"name": "reasoning"}}
    _warn_config_mismatch([cfg, other], [*conditioned, {"path": "b/router", "cost_lambda": 0.3}])
    out = capsys.readouterr().out
    assert "trained with different pipelines" in out and "config recorded by a/router" in out
    # the differing key is named, per router, so a benign transfer difference reads as one
    assert "  b/router: strategy.name\n" in out + "\n"


def test_record_config_differences_names_dotted_keys_and_skips_question_selection():
    from evaluation.frontier_runner import record_config_differences

    a = {"benchmark": {"name": "locomo"}, "question_bank": {"k": 10, "limit": 5}, "ppo": {"n_steps": 8}}
    b = {"benchmark": {"name": "hotpotqa"}, "question_bank": {"k": 20, "limit": 9}, "ppo": {"n_steps": 9}}
    # ppo does not change a record; question_bank.limit only selects questions
    assert record_config_differences(a, b) == ["benchmark.name", "question_bank.k"]
    assert record_config_differences(a, a) == []


def test_random_mid_draws_only_low_and_mid_and_keeps_the_full_random_unchanged():
    items = make_fake_bank(6)
    comps = make_fake_components()
    full = frontier_systems.random_system("random", "0,1")
    narrow = frontier_systems.random_system("random:MID", "0,1")
    assert full.name == "random" and [r.run_id for r in full.runs] == ["random-s0", "random-s1"]
    assert narrow.name == "random (≤MID)" and narrow.params["max_tier"] == "MID"
    assert [r.run_id for r in narrow.runs] == ["random-mid-s0", "random-mid-s1"]
    episodes = [run_episode(it, run.decide_for(it), comps) for run in narrow.runs for it in items]
    drawn = {t for ep in episodes for t in ep.tiers}
    assert drawn == {Tier.LOW, Tier.MID}
    # the full ladder still draws exactly as before max_tier existed (records on disk replay)
    from policies.baselines import RandomPolicy

    it = items[0]
    old = RandomPolicy(frontier_runner.question_seed(0, it.question.question_id)).decide
    assert run_episode(it, full.runs[0].decide_for(it), comps).tiers == run_episode(it, old, comps).tiers
    with pytest.raises(ValueError, match=r"random:TOP.*LOW, MID or HIGH"):
        frontier_systems.random_system("random:TOP", "0")


def test_expect_checks_a_rerun_cell_by_cell_and_fails_on_a_changed_number(tmp_path, capsys):
    base = ["--baselines", "all-low,all-high,random;fixed:L,L,H,L,L"]
    assert _run(_args(tmp_path / "a", *base)) == 0
    committed = tmp_path / "a" / "out"
    capsys.readouterr()

    # A fresh evaluation into another dir reproduces every cell; wall time is not compared.
    assert _run(_args(tmp_path / "b", *base, "--expect", str(committed))) == 0
    text = capsys.readouterr().out
    assert f"frontier.csv: reproduced {committed} (5 rows" in text and "not compared: latency_s" in text
    assert "router_metrics.csv: reproduced" in text
    # --expect may name --out itself: the committed tables are read before the run rewrites them.
    assert _run(_args(tmp_path / "a", *base, "--expect", str(committed))) == 0

    # One changed number in the committed table makes the replay fail, naming the cell.
    table = committed / "frontier.csv"
    lines = table.read_text().splitlines()
    header = lines[0].split(",")
    row = next(i for i, line in enumerate(lines) if line.startswith("all-low,"))
    cells = lines[row].split(",")
    want = cells[header.index("f1")]
    cells[header.index("f1")] = "0.123"
    lines[row] = ",".join(cells)
    table.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert _run(_args(tmp_path / "c", *base, "--expect", str(table))) == 1
    text = capsys.readouterr().out
    assert f"frontier.csv: DIFFERS from {table}" in text
    assert f"all-low / f1: expected '0.123', got '{want}'" in text

    with pytest.raises(FileNotFoundError, match="does not exist"):
        _run(_args(tmp_path / "d", *base, "--expect", str(tmp_path / "nowhere")))


def test_a_router_of_another_strategy_is_refused_before_any_evaluation(tmp_path, monkeypatch):
    """Issue 49, item 3: `frontier --config <implementation config>` on a reasoning router names the keys."""
    from dataclasses import replace

    from policies.export import export_router
    from policies.router import RouterMismatchError

    calls = []
    monkeypatch.setattr(frontier_runner, "evaluate_runs", lambda *a, **k: calls.append(a) or [])
    comps = make_fake_components()
    trained = {"strategy": {"name": "reasoning", "options": {}}, "backend": {"name": "fake", "model": "m"}}
    meta = {
        "observation_spec": comps.obs_builder.spec.to_dict(),
        "encoder": comps.encoder.name,
        "cost_lambda": 0.3,
        "seed": 2,
        "run_name": "locomo__reasoning__lam0.3__s2",
        "provenance": {"config": trained},
    }
    path = export_router(_model(2, comps), tmp_path / "r" / "router", meta, verify=4)
    args = _args(tmp_path, "--routers", str(path))
    routers, ckpts, _ = frontier_systems.router_systems([path])
    given = replace(comps, config={**trained, "strategy": {"name": "implementation", "options": {}}})
    with pytest.raises(RouterMismatchError, match=r"strategy\.name: trained .reasoning., given .implem"):
        cli_frontier.run_with(args, {}, given, make_fake_bank(4), routers, ckpts, lambda: make_fake_bank(2))
    assert calls == []


def test_concurrency_gives_the_same_table(sweep, tmp_path):
    """`--concurrency N` changes the wall time, never the table (records on the fake task, cold caches)."""
    tables = []
    for n, sub in ((1, "one"), (3, "three")):
        args = _args(tmp_path / sub, "--routers", str(sweep / "lam0.0_s*"), "--checkpoint-glob", "best",
                     "--concurrency", str(n))  # fmt: skip
        assert _run(args) == 0
        tables.append((tmp_path / sub / "out" / "frontier.csv").read_text())
    assert tables[0] == tables[1]
    with pytest.raises(SystemExit):
        _args(tmp_path, "--concurrency", "0")


def test_a_table_is_not_continued_on_an_engine_of_other_numerics(tmp_path, capsys):
    args = _args(tmp_path, "--baselines", "all-low")
    assert _run(args) == 0
    meta_path = tmp_path / "out" / "metadata.json"
    meta = json.loads(meta_path.read_text())
    assert meta["engines"] and _run(args) == 0  # the same engine continues its table
    # The table as another CPU class's vLLM kernels would have left it: this engine must not add to it.
    other = {"engine": "vllm", "device": "cpu", "dtype": "bfloat16", "kernels": "avx512"}
    role = next(iter(meta["engines"]))
    meta["engines"][role]["numerics"] = other
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(SystemExit, match=rf"metadata\.json: the table's {role} calls .*'kernels': 'avx512'"):
        _run(args)
    # Another config (another records fingerprint) is another table: not refused.
    meta["record_fingerprint"] = "0" * 16
    meta_path.write_text(json.dumps(meta))
    assert _run(args) == 0
