"""The guard: a learned router ships only where validation vouches for it over the best fixed path."""

from __future__ import annotations

import json

import numpy as np
import pytest

from common.config_error import ConfigError
from modules.tier import Tier, parse_tiers
from policies.export import probe_observations
from policies.fixed_router import export_fixed_router, fixed_path_actor
from policies.network import NetworkConfig, ObsLayout
from policies.router import Router
from policies.training.guard import guard_paths, paired_interval, vouch

L, M, H = Tier.LOW, Tier.MID, Tier.HIGH


def _recs(values):
    return [{"f1": v, "module_cost": 0.0, "answer_cost": 0.0} for v in values]


def _f1(record, lam):
    return record["f1"]


def test_paths_compared() -> None:
    assert guard_paths("uniform") == [(L,) * 5, (M,) * 5, (H,) * 5]
    minimal = guard_paths("minimal")
    assert len(minimal) == 13 and (L, M, M, M, M) in minimal and (M, M, M, M, H) in minimal
    assert guard_paths("minimal", max_tier=M) == [p for p in minimal if H not in p]
    assert guard_paths("L,M,L,L,M;L,M,L,L,M") == [(L, M, L, L, M)]
    with pytest.raises(ValueError, match="has 2 tiers"):
        guard_paths("L,M")


def test_bad_guard_config_is_one_line() -> None:
    from policies.training.settings import TrainSettings

    with pytest.raises(ConfigError, match=r"train.guard='sometimes'.*off.*uniform.*minimal"):
        TrainSettings(guard="sometimes")
    assert TrainSettings(guard="L,M,L,L,M").guard == "L,M,L,L,M"


def test_a_router_ships_only_with_its_whole_interval_above_the_best_fixed_path() -> None:
    rng = np.random.default_rng(0)
    base = rng.uniform(0, 1, 200)
    paths = {(L,) * 5: _recs(base), (M,) * 5: _recs(base + 0.01)}
    clearly = vouch({0.0: _recs(base + 0.2)}, paths, _f1)
    assert clearly["ships"] == "router" and clearly["path"] is None
    assert clearly["per_lambda"]["0"]["best_path"] == "M,M,M,M,M"
    noisy = vouch({0.0: _recs(base + 0.01 + rng.normal(0, 0.2, 200))}, paths, _f1)
    assert noisy["ships"] == "fixed" and noisy["path"] == "M,M,M,M,M"
    assert "router_learned/" in noisy["lines"][-1]
    lo = noisy["per_lambda"]["0"]["difference"][1]
    assert lo <= 0 < noisy["per_lambda"]["0"]["difference"][2]
    # A λ-conditioned router must pass at every λ; otherwise each λ gets the fixed path best there.
    two = vouch({0.0: _recs(base + 0.2), 1.0: _recs(base)}, paths, _f1)
    assert two["ships"] == "fixed"
    assert two["per_lambda"]["0"]["passed"] and not two["per_lambda"]["1"]["passed"]
    assert two["paths"] == {"0": "M,M,M,M,M", "1": "M,M,M,M,M"} and two["path"] == "M,M,M,M,M"
    priced = {(L,) * 5: _recs(base), (M,) * 5: [{**r, "module_cost": 1.0} for r in _recs(base + 0.05)]}
    def priced_f1(r, lam):
        return r["f1"] - lam * r["module_cost"]

    by_lam = vouch({0.0: _recs(base), 1.0: _recs(base)}, priced, priced_f1)
    assert by_lam["paths"] == {"0": "M,M,M,M,M", "1": "L,L,L,L,L"} and by_lam["path"] is None


def test_paired_interval_is_a_percentile_bootstrap() -> None:
    mean, lo, hi = paired_interval([0.1] * 50)
    assert mean == lo == hi == pytest.approx(0.1)
    mean, lo, hi = paired_interval(list(np.linspace(-1, 1, 101)))
    assert lo < mean < hi and mean == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("activation", ["relu", "tanh", "gelu"])
def test_a_fixed_path_in_the_router_format_routes_the_path(tmp_path, activation) -> None:
    from envs.observation import ObservationSpec

    obs_spec = ObservationSpec(embed_dim=16)
    layout = ObsLayout.from_spec(obs_spec)
    config = NetworkConfig(layout=layout, hidden=32, latent=32, pi_layers=(16,), activation=activation,
                           n_actions=2)  # fmt: skip
    path = parse_tiers("L,H,M,L,M")
    actor = fixed_path_actor(config, path)
    assert actor.config.n_actions == 3  # a MID-capped network grows the HIGH it needs
    meta = {"observation_spec": obs_spec.to_dict(), "run_name": "x"}
    export_fixed_router({0.0: path}, tmp_path / "router", config, meta)
    router = Router.load(tmp_path / "router")
    assert router.metadata["fixed_path"] == "L,H,M,L,M" and router.metadata["tiers"] == ["LOW", "MID", "HIGH"]
    obs = probe_observations(router.actor.config, n=200, seed=3)
    lo, hi = layout.module_slice
    modules = np.argmax(obs[:, lo:hi], axis=1)
    assert [int(a) for a in router.act(obs)] == [int(path[m]) for m in modules]


def test_a_table_of_fixed_paths_by_lambda_routes_each_band(tmp_path) -> None:
    """A λ-conditioned run that fails its guard ships the path validation chose at each λ, in one network."""
    from envs.observation import ObservationSpec

    obs_spec = ObservationSpec(embed_dim=16)
    config = NetworkConfig(layout=ObsLayout.from_spec(obs_spec), hidden=32, latent=32, pi_layers=(32,))
    table = {0.0: parse_tiers("M,M,M,M,M"), 1.0: parse_tiers("L,L,M,L,L"), 3.0: parse_tiers("L,L,L,L,L")}
    lam_at = list(obs_spec.scalar_names).index("cost_lambda")
    export_fixed_router(table, tmp_path / "r", config, {"observation_spec": obs_spec.to_dict()}, lam_at)
    router = Router.load(tmp_path / "r")
    assert router.metadata["fixed_paths"] == {"0": "M,M,M,M,M", "1": "L,L,M,L,L", "3": "L,L,L,L,L"}
    lo, _ = ObsLayout.from_spec(obs_spec).module_slice
    bands = [(0.0, "MMMMM"), (0.3, "MMMMM"), (1.0, "LLMLL"), (1.9, "LLMLL"), (3.0, "LLLLL"), (9.0, "LLLLL")]
    for lam, want in bands:
        obs = probe_observations(router.actor.config, n=5, seed=int(lam * 10))
        obs[:, lo : lo + 5] = np.eye(5)
        obs[:, ObsLayout.from_spec(obs_spec).scalar_slice[0] + lam_at] = lam
        assert "".join(Tier(int(a)).name[0] for a in router.act(obs)) == want, lam
    with pytest.raises(ValueError, match="relu"):
        from policies.fixed_router import fixed_paths_actor

        fixed_paths_actor(NetworkConfig(layout=config.layout, activation="tanh"), table, lam_at)


def test_training_ships_the_fixed_path_validation_prefers_and_keeps_the_learned_router(tmp_path) -> None:
    pytest.importorskip("stable_baselines3")
    from policies.training.loop import train
    from tests.reliability_support import RUN_NAME, config
    from tests.support import has_locomo

    if not has_locomo():
        pytest.skip("LoCoMo data directory absent")
    # Validation on 2 questions can never vouch for a learned router: the fixed path ships.
    result = train(config(tmp_path, "train.total_timesteps=40"))
    run = tmp_path / "runs" / RUN_NAME
    guard = result["guard"]
    assert guard["ships"] == "fixed" and guard["paths_compared"] == ["L,L,L,L,L", "M,M,M,M,M", "H,H,H,H,H"]
    shipped = Router.load(run / "router")
    assert shipped.metadata["fixed_path"] == guard["path"]
    assert shipped.metadata["guard"]["per_lambda"]["0"]["questions"] == 2
    learned = Router.load(run / "router_learned")
    assert "fixed_path" not in learned.metadata
    assert json.loads((run / "result.json").read_text())["guard"]["path"] == guard["path"]
    import evaluate  # what `evaluate.py select` makes of a real run: the same fixed path

    assert evaluate.main(["select", "--runs", str(run), "--out", str(tmp_path / "shipped")]) == 0
    assert Router.load(tmp_path / "shipped" / "router").metadata["fixed_path"] == guard["path"]
    # Resuming the finished run ships the same path and keeps the learned router as it was.
    before = (run / "router_learned" / "router.pt").read_bytes()
    again = train(config(tmp_path, "train.total_timesteps=40", f"resume={run}"))
    assert again["guard"]["path"] == guard["path"]
    assert (run / "router_learned" / "router.pt").read_bytes() == before
    # train.guard=off ships what PPO learned.
    off = train(config(tmp_path / "off", "train.total_timesteps=40", "train.guard=off"))
    assert off["guard"] is None and not (tmp_path / "off" / "runs" / RUN_NAME / "router_learned").exists()


def _fake_run(root, name, *, ships, low, path="L,L,L,L,L", ids="abc", lambdas=("0",)):
    run = root / name
    (run / "router").mkdir(parents=True)
    (run / "router" / "marker").write_text(name)
    per = {lam: {"best_path": path, "difference": [low + 0.01, low, low + 0.02]} for lam in lambdas}
    guard = {"ships": ships, "path": None if ships == "router" else path, "per_lambda": per}
    (run / "result.json").write_text(json.dumps({"seed": 0, "guard": guard}))
    sets = {"question_sets": {"val": {"questions": 40, "ids_sha256": ids}}}
    (run / "run_metadata.json").write_text(json.dumps(sets))
    return run


def test_select_ships_the_best_passing_router_else_the_common_fixed_path(tmp_path, capsys) -> None:
    import evaluate

    _fake_run(tmp_path, "s0", ships="router", low=0.01)
    _fake_run(tmp_path, "s1", ships="router", low=0.03)
    _fake_run(tmp_path, "s2", ships="fixed", low=-0.02, path="M,M,M,M,M")
    out = tmp_path / "shipped"
    assert evaluate.main(["select", "--runs", str(tmp_path / "s*"), "--out", str(out)]) == 0
    assert "ships: the learned router of" in capsys.readouterr().out
    assert (out / "router" / "marker").read_text() == "s1"
    assert json.loads((out / "selection.json").read_text())["ships"] == "router"
    none = tmp_path / "none"
    for i, path in enumerate(("M,M,M,M,M", "M,M,M,M,M", "L,L,L,L,L")):
        _fake_run(none, f"s{i}", ships="fixed", low=-0.01, path=path)
    assert evaluate.main(["select", "--runs", str(none / "s*"), "--out", str(out)]) == 0
    assert "ships: the fixed path M,M,M,M,M" in capsys.readouterr().out
    assert (out / "router" / "marker").read_text() == "s0"
    other = tmp_path / "other"
    _fake_run(other, "a", ships="router", low=0.01)
    _fake_run(other, "b", ships="router", low=0.01, ids="xyz")
    assert evaluate.main(["select", "--runs", str(other / "*")]) == 1
    assert "validated on other questions" in capsys.readouterr().err


def test_a_lambda_conditioned_run_ships_a_router_for_every_lambda(tmp_path) -> None:
    from policies.training.loop import train
    from tests.reliability_support import config
    from tests.support import has_locomo

    if not has_locomo():
        pytest.skip("LoCoMo data directory absent")
    result = train(config(tmp_path, "train.total_timesteps=40", "cost.lambdas=[0,1]"))
    guard = result["guard"]
    assert set(guard["per_lambda"]) == {"0", "1"} and guard["ships"] == "fixed"
    router = Router.load(result["router"])
    shipped = router.metadata.get("fixed_paths") or dict.fromkeys(("0", "1"), router.metadata["fixed_path"])
    assert shipped == guard["paths"]
    assert router.cost_weight.conditioned  # routes at the λ values it was trained for, as before
