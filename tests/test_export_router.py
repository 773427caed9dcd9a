"""Exported routers reload without training code and reproduce PPO's deterministic actions."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from common.cost_weight import CostWeight
from envs.fakes import make_fake_bank, make_fake_components
from envs.reward import RewardShaper
from envs.rollout import run_episode
from envs.router_env import MemoryRouterEnv
from modules.tier import MODULE_ORDER, Tier
from policies.export import export_router, ppo_actions, probe_observations
from policies.router import METADATA_FILE, WEIGHTS_FILE, Router, RouterLoadError

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def trained():
    """A briefly trained PPO router on the synthetic env (non-trivial weights), plus its env."""
    from stable_baselines3 import PPO

    from policies.sb3_policy import router_policy_kwargs

    torch.set_num_threads(1)
    items = make_fake_bank(3)
    comps = make_fake_components(cost_weight=CostWeight(0.3))
    env = MemoryRouterEnv(items, comps, RewardShaper(), seed=0)
    kwargs = router_policy_kwargs(
        comps.obs_builder.spec, hidden=32, latent=32, pi_layers=[16], vf_layers=[16]
    )
    model = PPO(
        "MlpPolicy",
        env,
        policy_kwargs=kwargs,
        n_steps=50,
        batch_size=25,
        n_epochs=2,
        learning_rate=3e-3,
        gamma=1.0,
        seed=0,
        device="cpu",
    )
    model.learn(100)
    return model, items, comps


def _meta(comps):
    return {
        "observation_spec": comps.obs_builder.spec.to_dict(),
        "encoder": comps.encoder.name,
        "cost_lambda": 0.3,
        "strategy": "fake",
    }


def _env_observations(items, comps):
    """Real observations of every module (tiers cycling so later modules see varied inputs)."""
    from envs.episode import Episode

    obs = []
    for i, item in enumerate(items):
        ep = Episode(item, comps)
        while not ep.done:
            obs.append(ep.observation())
            ep.step(Tier((i + len(obs)) % 3))
    return np.stack(obs)


def test_export_reproduces_ppo_actions(trained, tmp_path):
    model, items, comps = trained
    path = export_router(model, tmp_path / "router", _meta(comps))
    router = Router.load(path)
    obs = np.concatenate(
        [_env_observations(items, comps), probe_observations(router.actor.config, 200, seed=3)]
    )
    theirs = ppo_actions(model, obs)
    ours = np.array([router.act(o)[0] for o in obs])
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(router.act(obs), theirs)  # batched too
    assert len(set(theirs.tolist())) > 1, "degenerate test: the policy picks one tier everywhere"
    meta = router.metadata
    assert meta["module_order"] == list(MODULE_ORDER)
    assert meta["tiers"] == ["LOW", "MID", "HIGH"]
    assert meta["observation_spec"] == comps.obs_builder.spec.to_dict()
    assert meta["network"]["hidden"] == 32


def test_reload_in_a_fresh_process_without_training_code(trained, tmp_path):
    model, items, comps = trained
    path = export_router(model, tmp_path / "router", _meta(comps))
    obs = _env_observations(items, comps)
    np.save(tmp_path / "obs.npy", obs)
    script = f"""
import sys, json, numpy as np
from policies.router import Router
router = Router.load({str(path)!r})
actions = router.act(np.load({str(tmp_path / "obs.npy")!r}))
banned = [m for m in ("stable_baselines3", "hydra", "wandb", "gymnasium", "policies.sb3_policy",
                      "policies.training", "policies.export", "envs") if m in sys.modules]
print(json.dumps({{"actions": actions.tolist(), "banned": banned}}))
"""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["banned"] == []
    np.testing.assert_array_equal(np.array(res["actions"]), ppo_actions(model, obs))


def test_route_matches_the_episode_runner(trained, tmp_path):
    """route() builds the same observations as the env: same tiers as PPO through run_episode."""
    model, items, comps = trained
    router = Router.load(export_router(model, tmp_path / "router", _meta(comps)))

    def ppo_decide(obs, module):
        return Tier(int(model.predict(obs, deterministic=True)[0]))

    for item in items:
        q = item.question
        routed = router.route(q.question, item.evidence, comps, question_date=q.question_date)
        assert routed.tiers == run_episode(item, ppo_decide, comps).tiers
        assert routed.tiers == run_episode(item, router.decide, comps).tiers
        assert routed.pipeline_result.tiers == routed.tiers
        assert routed.memory_text


def test_decide_checks_module_and_shape(trained, tmp_path):
    model, items, comps = trained
    router = Router.load(export_router(model, tmp_path / "router", _meta(comps)))
    obs = _env_observations(items[:1], comps)
    assert isinstance(router.decide(obs[0], "filter"), Tier)
    with pytest.raises(ValueError, match="does not name module 'entity'"):
        router.decide(obs[0], "entity")
    with pytest.raises(ValueError, match="unknown module"):
        router.decide(obs[0], "retrieval")
    with pytest.raises(ValueError, match="features"):
        router.decide(obs[0][:10], "filter")


def test_route_refuses_mismatched_components(trained, tmp_path):
    model, items, comps = trained
    meta = _meta(comps) | {"encoder": "minilm"}
    router = Router.load(export_router(model, tmp_path / "router", meta))
    with pytest.raises(ValueError, match="trained with 'minilm'"):
        router.route("who is it", items[0].evidence, comps)


def test_zip_checkpoint_and_atomic_overwrite(trained, tmp_path):
    model, _, comps = trained
    path = export_router(model, tmp_path / "router", _meta(comps))
    first = (path / WEIGHTS_FILE).read_bytes()
    export_router(model, path, _meta(comps) | {"note": "second"})
    assert json.loads((path / METADATA_FILE).read_text())["note"] == "second"
    assert (path / WEIGHTS_FILE).read_bytes() == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["router"], "temporary directories left behind"
    archive = tmp_path / "router.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for f in (WEIGHTS_FILE, METADATA_FILE):
            zf.write(path / f, f"router/{f}")
    from policies.baselines import get_policy

    a, b = Router.load(path), get_policy(f"router:{archive}")
    probes = probe_observations(a.actor.config, 50)
    np.testing.assert_array_equal(a.act(probes), b.act(probes))


def test_failed_export_leaves_the_old_router(trained, tmp_path, monkeypatch):
    """A failing parity check aborts the export; the previous router stays, no temp dirs remain."""
    import policies.export as export_mod

    model, _, comps = trained
    path = export_router(model, tmp_path / "router", _meta(comps))
    before = (path / METADATA_FILE).read_text()
    monkeypatch.setattr(export_mod, "ppo_actions", lambda m, obs: (ppo_actions(m, obs) + 1) % 3)
    with pytest.raises(RuntimeError, match="disagrees with PPO"):
        export_router(model, path, _meta(comps) | {"note": "never written"})
    assert (path / METADATA_FILE).read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["router"]
    spec = dict(_meta(comps)["observation_spec"], embed_dim=7)
    with pytest.raises(ValueError, match="does not match the network layout"):
        export_router(model, path, _meta(comps) | {"observation_spec": spec})


@pytest.mark.parametrize(
    ("meta_change", "match"),
    [({"format": "x"}, "reserved keys"), ({"observation_spec": None}, "observation_spec")],
)
def test_export_metadata_errors(trained, tmp_path, meta_change, match):
    model, _, comps = trained
    meta = _meta(comps) | meta_change
    if meta_change.get("observation_spec", 1) is None:
        del meta["observation_spec"]
    with pytest.raises(ValueError, match=match):
        export_router(model, tmp_path / "router", meta)


def test_corrupt_or_foreign_checkpoints_fail_clearly(trained, tmp_path):
    model, _, comps = trained
    path = export_router(model, tmp_path / "router", _meta(comps))
    bad = tmp_path / "bad"
    shutil.copytree(path, bad)
    blob = bytearray((bad / WEIGHTS_FILE).read_bytes())
    blob[-20] ^= 0xFF
    (bad / WEIGHTS_FILE).write_bytes(bytes(blob))
    with pytest.raises(RouterLoadError, match="sha256"):
        Router.load(bad)
    (bad / WEIGHTS_FILE).unlink()
    with pytest.raises(RouterLoadError, match="lacks"):
        Router.load(bad)
    newer = tmp_path / "newer"
    shutil.copytree(path, newer)
    meta = json.loads((newer / METADATA_FILE).read_text())
    meta["format_version"] = 99
    (newer / METADATA_FILE).write_text(json.dumps(meta))
    with pytest.raises(RouterLoadError, match="unsupported checkpoint format"):
        Router.load(newer)
    with pytest.raises(RouterLoadError, match="neither a directory nor a zip"):
        Router.load(tmp_path / "missing")


def test_route_refuses_components_of_another_pipeline(trained, tmp_path):
    """Issue 49, item 3: a router trained on one strategy (model, options) refuses another's pipeline."""
    from dataclasses import replace

    from policies.router import RouterMismatchError

    model, items, comps = trained
    trained_cfg = {
        "strategy": {"name": "reasoning", "options": {}},
        "backend": {"name": "llamacpp", "model": "qwen2.5-1.5b"},
        "llms": {},
    }
    meta = _meta(comps) | {"run_name": "lme__reasoning__lam0.3__s0", "provenance": {"config": trained_cfg}}
    router = Router.load(export_router(model, tmp_path / "router", meta))
    assert router.config == trained_cfg
    same = replace(comps, config=trained_cfg | {"benchmark": {"name": "hotpotqa"}})  # another benchmark
    assert router.route("who is it", items[0].evidence, same).tiers
    implementation = replace(
        comps, config=trained_cfg | {"strategy": {"name": "implementation", "options": {}}}
    )
    with pytest.raises(RouterMismatchError, match=r"strategy\.name: trained 'reasoning', given 'implem"):
        router.route("who is it", items[0].evidence, implementation)
    other_model = replace(comps, config=trained_cfg | {"backend": {"name": "vllm", "model": "qwen2.5-7b"}})
    with pytest.raises(RouterMismatchError, match=r"llms\.default\.model: trained 'qwen2\.5-1\.5b', given"):
        router.check_components(other_model)
    ladder_strategy = {"name": "reasoning", "options": {"keep_evidence": True}}
    ladder = replace(comps, config=trained_cfg | {"strategy": ladder_strategy})
    with pytest.raises(RouterMismatchError, match=r"strategy\.options"):
        router.check_components(ladder)
    engine = replace(comps, config=trained_cfg | {"backend": {"name": "vllm", "model": "qwen2.5-1.5b"}})
    router.check_components(engine)  # another engine for the same model: the tiers mean the same
