"""Fault injection, issue 15 items 4 and 8: bad input is refused up front, clearly, leaving nothing.

Item 8 used to accept silently: ``cost.lambdas=[]`` (a single λ = 0 run), a LoCoMo conversation
without sessions (questions trained with no evidence), ``Router.route`` with an empty question
or no evidence, and a single-λ router asked for another λ; ``'cost.lambdas=[abc]'`` gave an
unreadable Hydra traceback. Item 4: rejected λ values left ``…lam-1…`` directories.
"""

from __future__ import annotations

import pytest

from benchmarks.registry import get_benchmark
from common.config_error import ConfigError
from common.cost_weight import CostWeight
from common.datadir import DataFileError
from policies.router import Router
from tests.reliability_support import RUN_NAME, config, one_line_error, run_cli
from tests.support import needs_locomo
from tests.test_benchmarks_malformed import locomo_record, write_locomo


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["cost.lambdas=[abc]"], "error: config cost.lambdas[0] must be a number >= 0, got 'abc'"),
        (["cost.lambdas=[]"], "error: config cost.lambdas=[] is empty"),
        (["cost.lambda=-1"], "error: config cost.lambda must be finite and >= 0, got -1"),
        (["cost.lambda=nan"], "error: config cost.lambda must be finite and >= 0, got nan"),
        (["-m", "cost.lambda=0,-1"], "error: config cost.lambda must be finite and >= 0, got -1"),
    ],
    ids=["abc", "empty-list", "negative", "nan", "sweep-with-negative"],
)
def test_bad_lambdas_are_one_line_errors_and_create_no_directory(tmp_path, overrides, message):
    proc = run_cli(tmp_path, *overrides)
    assert proc.returncode == 2
    assert one_line_error(proc).startswith(message)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_empty_lambda_list_is_refused_by_every_entry_point(tmp_path):
    from policies.training.config import load_config

    with pytest.raises(ConfigError, match=r"cost.lambdas=\[\] is empty"):
        CostWeight.from_config({"lambdas": []})
    with pytest.raises(Exception, match=r"cost.lambdas=\[\] is empty"):
        load_config(["cost.lambdas=[]"])  # the run-name resolver checks it while composing


def test_locomo_conversation_without_sessions(tmp_path):
    empty = locomo_record(sample_id="conv-empty", conversation={"speaker_a": "A", "speaker_b": "B"})
    path = write_locomo(tmp_path, [locomo_record()] * 8 + [empty, locomo_record()])
    match = r"record conv-empty \(index 8\): field 'conversation': no session_"
    with pytest.raises(DataFileError, match=match):
        get_benchmark("locomo", path).load("test")


@pytest.fixture(scope="module")
def routed(tmp_path_factory):
    """A router trained at the single λ = 0, fake components, and one bank item's evidence."""
    from envs.components import make_components
    from envs.question_bank import question_bank_from
    from policies.training.loop import train

    base = tmp_path_factory.mktemp("route")
    cfg = config(base)
    train(cfg)
    comps = make_components(cfg)
    item = question_bank_from(cfg, "val", comps.encoder)[0]
    yield Router.load(base / "runs" / RUN_NAME / "router"), comps, item
    comps.close()


@needs_locomo
def test_route_refuses_an_empty_question_or_no_evidence(routed):
    router, comps, item = routed
    assert len(router.route(item.question.question, item.evidence, comps).tiers) == 5  # the good case
    for question in ("", "   "):
        with pytest.raises(ValueError, match="the question is empty"):
            router.route(question, item.evidence, comps)
    with pytest.raises(ValueError, match="no evidence was given"):
        router.route(item.question.question, [], comps)


@needs_locomo
def test_single_lambda_router_refuses_another_lambda(routed):
    router, comps, item = routed
    assert not router.cost_weight.conditioned and router.cost_weight.for_routing(None) == 0.0
    assert router.cost_weight.for_routing(0.0) == 0.0
    with pytest.raises(ValueError, match=r"trained at the single λ=0; it cannot route at cost_lambda=0.5"):
        router.route(item.question.question, item.evidence, comps, cost_lambda=0.5)
