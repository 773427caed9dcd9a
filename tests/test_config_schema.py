"""The typed config schema: Hydra rejects bad keys and types, defaults match the YAML, hashes are stable."""

from __future__ import annotations

import re
import shutil

import pytest
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

import evaluation.frontier_runner as frontier_runner
from common.config_error import ConfigError
from evaluation.frontier_runner import record_fingerprint
from policies.training.checkpoint import accepted_config_hashes
from policies.training.config import CONFIG_DIR, load_config
from policies.training.settings import Config, parse_config

CPU_QUALITY = ["+experiment=cpu_quality"]
TINY = ["backend=fake", "encoder=hashing", "memory=no_ce", "train=tiny", "ppo=tiny"]


def composition_error(overrides: list[str], **kwargs) -> str:
    """What Hydra reports for a config that does not compose: its message and its cause's."""
    with pytest.raises(ConfigCompositionException) as info:
        load_config(overrides, **kwargs)
    return f"{info.value}\n{info.value.__cause__ or ''}"


@pytest.mark.parametrize(
    ("override", "match"),
    [
        ("train.n_envs=two", r"Value 'two' of type 'str' .*Integer[\s\S]*train\.n_envs"),
        ("cost.window=wide", r"Value 'wide'[\s\S]*full_key: cost\.window"),
        ("judge.enabled=maybe", r"Value 'maybe'[\s\S]*judge\.enabled"),
        ("train.eval_frq=10", r"Key 'eval_frq' not in 'TrainSettings'[\s\S]*train\.eval_frq"),
        ("question_bank.kk=3", r"Key 'kk' not in 'QuestionBankConfig'"),
    ],
)
def test_a_bad_override_fails_at_composition_naming_key_and_value(override, match):
    assert re.search(match, composition_error([override]))


def test_a_forced_new_key_fails_when_the_config_is_parsed():
    """``+key=value`` makes Hydra add the key; the schema still rejects it before anything runs."""
    with pytest.raises(ConfigError, match=r"Key 'eval_frq' not in 'TrainSettings'[\s\S]*train\.eval_frq"):
        parse_config(load_config(["+train.eval_frq=10"]))


@pytest.mark.parametrize(
    ("yaml", "match"),
    [
        ("train:\n  eval_frq: 10\n", r"Key 'eval_frq' not in 'TrainSettings'[\s\S]*train\.eval_frq"),
        ("ppo:\n  n_steps: ten\n", r"Value 'ten' of type 'str' .*Integer[\s\S]*ppo\.n_steps"),
        ("cost:\n  lamda: 0.3\n", r"Key 'lamda' not in 'CostConfig'[\s\S]*full_key: cost\.lamda"),
    ],
)
def test_a_bad_yaml_file_fails_at_composition_naming_key_and_value(tmp_path, yaml, match):
    configs = tmp_path / "configs"
    shutil.copytree(CONFIG_DIR, configs)
    (configs / "experiment" / "bad.yaml").write_text("# @package _global_\n" + yaml)
    assert re.search(match, composition_error(["+experiment=bad"], config_dir=configs))


def test_schema_defaults_equal_what_the_default_yaml_resolves_to():
    """No drift: every default of the schema is the value configs/config.yaml composes to."""
    schema = OmegaConf.to_container(OmegaConf.structured(Config))
    resolved = load_config()
    assert isinstance(schema, dict)
    for key, default in schema.items():
        if key in ("benchmark", "strategy"):  # their `name` is chosen by the defaults list
            assert resolved[key]["options"] == default["options"], key
        elif default != "???":  # backend, run_name, run_dir: set by the YAML only
            assert resolved[key] == default, key
    assert set(resolved) == set(schema)


def test_resolved_values_and_run_names_are_unchanged():
    cfg = load_config(CPU_QUALITY)
    assert cfg["run_name"] == "locomo__implementation-cpu_quality__lam0__s0"
    assert cfg["question_bank"]["k"] == 10 and cfg["strategy"]["options"]["filter_retrieval_weight"] == 0.5
    assert load_config(["cost.lambda=0.3", "seed=2"])["run_name"] == "locomo__implementation__lam0.3__s2"
    config = parse_config(load_config(TINY))
    assert config.ppo.policy.hidden == 32 and config.train.total_timesteps == 40
    assert config.cost.weight.default == 0.0 and config.backend == {"name": "fake"}


def test_record_fingerprints_and_resume_hashes_are_those_from_before_the_schema(monkeypatch):
    """Pinned on main before the schema existed: the cached records under results/headroom stay valid."""
    monkeypatch.setattr(frontier_runner, "code_versions", lambda: {"record": "pinned"})
    checksums = {"locomo10.json": "abc"}
    expected = {  # (fingerprint, gold/raw fingerprint, resume config hash)
        "default": ([], "3babc04ca782ae61", "0e6863ec5d1ae21d", "b9deb8bc78a1aeee"),
        # Re-pinned when the experiment itself changed (date_format, high_adds_to_mid); its
        # gold/raw fingerprint, which no strategy option reaches, is the one from before the schema.
        "cpu_quality": (CPU_QUALITY, "a758a37469075890", "2cca0faf2977a12d", "8038ac843977fcd2"),
        "tiny": (TINY, "5433dc9191f3acd9", "1651dc391c1ac679", "7e011f16f227f50a"),
    }
    for name, (overrides, fp, fp_gold_raw, chash) in expected.items():
        cfg = load_config(overrides)
        # run names print λ in its shortest form now (lam0, was lam0.0): the old hash is still accepted
        assert chash in accepted_config_hashes(cfg), name
        cfg["question_bank"].update(max_samples=None, limit=None)  # as evaluate.py headroom does
        assert record_fingerprint(cfg, checksums) == fp, name
        assert record_fingerprint({**cfg, "strategy": None, "llms": None}, checksums) == fp_gold_raw, name
    # A schema-added key set to another value than its default does change the fingerprint.
    cfg = load_config([*CPU_QUALITY, "judge.protocol=locomo"])
    cfg["question_bank"].update(max_samples=None, limit=None)
    assert record_fingerprint(cfg, checksums) != expected["cpu_quality"][1]


def test_an_unknown_max_tier_is_refused_naming_key_and_value():
    with pytest.raises(ConfigError, match=r"actions\.max_tier='XL' is unknown; choose one of LOW, MID, HIGH"):
        parse_config(load_config(["actions.max_tier=XL"]))
    assert parse_config(load_config(["actions.max_tier=mid"]))  # any spelling Tier.parse reads
