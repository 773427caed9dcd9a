"""make_components: the config schema, clear errors, and a real pipeline behind the env."""

from __future__ import annotations

import copy

import pytest

from common.cost_weight import CostWeight
from envs.components import ConfigError, make_components
from envs.config_schema import EnvConfig, parse
from envs.question_bank import memory_build_config

BASE = {
    "benchmark": {"name": "locomo"},
    "strategy": {"name": "implementation"},
    "encoder": "hashing",
    "backend": {"name": "fake", "model_id": "fake-llm"},
    "cost": {"unit": "gflops", "lambda": 0.1, "window": 100, "include_answer_cost": False},
    "reward": {"task_metric": "f1"},
    "cache": {"path": ":memory:"},
    "ppo": {"n_steps": 64},  # other sections are ignored by make_components
}


def cfg_with(**changes):
    cfg = copy.deepcopy(BASE)
    for dotted, value in changes.items():
        sec, _, key = dotted.partition("__")
        if key:
            cfg.setdefault(sec, {})[key] = value
        else:
            cfg[sec] = value
    return cfg


def test_make_components_builds_real_parts():
    comps = make_components(BASE)
    try:
        assert comps.benchmark == "locomo" and comps.cost_weight == CostWeight(0.1)
        assert comps.obs_builder.spec.embed_dim == comps.encoder.dim == 384
        assert type(comps.pipeline).__name__ == "Pipeline"
        assert type(comps.answerer).__name__ == "AnswerGenerator"
        assert comps.judge is None and comps.cache is not None
        assert set(comps.llms) == {"high", "answer"}
        assert comps.llms["high"] is comps.llms["answer"]  # identical backend settings are built once
    finally:
        comps.close()


def test_capacity_roles_and_judge_overrides():
    cfg = cfg_with(
        strategy={"name": "capacity"},
        llms={"mid": {"model_id": "fake-mid"}},
        judge={"enabled": True, "backend": {"model_id": "fake-judge"}},
        # models outside the registry are priced by their declared parameter counts
        cost={"params": {"fake-mid": 360_000_000, "fake-judge": 1_500_000_000}},
    )
    comps = make_components(cfg)
    assert set(comps.llms) == {"low", "mid", "high", "answer", "judge"}
    assert comps.llms["mid"].model_id == "fake-mid" and comps.llms["low"].model_id == "fake-llm"
    assert comps.judge is not None
    comps.close()


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"benchmark": {"name": "squad"}}, r"benchmark\.name='squad'"),
        ({"strategy": {"name": "magic"}}, r"strategy\.name='magic'"),
        ({"backend": {"name": "gpt5"}}, r"backend\.name='gpt5'|llms\.high\.name='gpt5'"),
        ({"backend": {"name": "fake", "bogus_option": 1}}, "bad options for backend 'fake'"),
        ({"backend": None}, "'backend'"),
        ({"benchmark": None}, "'benchmark'"),
        ({"cost__unit": "joules"}, "cost.unit"),
        ({"cost__lamda": 0.1}, r"Key 'lamda' not in 'CostConfig'\s+full_key: cost\.lamda"),
        ({"cost__window": "wide"}, r"Value 'wide' of type 'str' .*Integer\s+full_key: cost\.window"),
        ({"question_bank__kk": 3}, r"full_key: question_bank\.kk"),
        ({"cost__lambda": -1.0}, "cost.lambda"),
        ({"reward__task_metric": "bleu"}, "task_metric='bleu'"),
        ({"reward__task_metric": "judge"}, "judge.enabled"),
        ({"encoder": "word2vec"}, "word2vec"),
        ({"memory": {"l1_fraction": 2.0}}, "memory"),
        ({"memory": {"no_such_field": 1}}, "memory"),
    ],
)
def test_bad_config_errors(change, match):
    cfg = cfg_with(**change)
    with pytest.raises(ConfigError, match=match):
        if "memory" in change:
            memory_build_config(parse(EnvConfig, cfg).memory)
        else:
            make_components(cfg).close()


def test_memory_section_builds_build_config():
    mc = memory_build_config({"mode": "lru", "chunking": {"max_tokens": 64}})
    assert mc.mode == "lru" and mc.chunking.max_tokens == 64
    assert memory_build_config(parse(EnvConfig, BASE).memory) is None
