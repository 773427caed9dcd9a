"""run_episode / evaluate_policy / summarize_records against the fake task."""

from __future__ import annotations

import math

import pytest

from benchmarks.judge import JudgeResult
from benchmarks.types import Question
from common.cost_weight import CostWeight
from envs.fakes import OPTIMAL_TIERS, TIER_COSTS, make_fake_bank, make_fake_components, question_type
from envs.reward import RewardShaper
from envs.rollout import EpisodeRecord, evaluate_policy, run_episode, summarize_records
from envs.router_env import MemoryRouterEnv
from modules.cache import CallCache
from modules.tier import MODULE_ORDER, Tier


def test_run_episode_record_fields(tmp_path):
    comps = make_fake_components(cache=CallCache(tmp_path / "c.sqlite"))
    item = make_fake_bank(1)[0]
    seen = []

    def decide(obs, module):
        seen.append((module, comps.obs_builder.spec.module_index(obs)))
        return Tier.HIGH

    rec = run_episode(item, decide, comps)
    assert [m for m, _ in seen] == list(MODULE_ORDER)
    assert [i for _, i in seen] == list(range(5))
    assert isinstance(rec, EpisodeRecord)
    assert rec.tiers == (Tier.HIGH,) * 5
    assert set(rec.module_costs) == set(MODULE_ORDER)
    assert rec.module_cost == pytest.approx(5 * TIER_COSTS[Tier.HIGH])
    assert rec.total_cost == pytest.approx(rec.module_cost + rec.answer_cost) and rec.answer_cost > 0
    assert rec.f1 == 1.0 and rec.prediction == rec.gold
    assert rec.calls == 1 and rec.cache_hits == 0 and rec.judge is None and rec.reward is None
    d = rec.to_dict()
    assert d["tiers"] == ["HIGH"] * 5 and d["module_costs"]["filter"]["value"] == TIER_COSTS[Tier.HIGH]
    assert run_episode(item, decide, comps).cache_hits == 1


def test_rollout_matches_env_measurements():
    """The evaluation loop and the training env measure the same episode identically."""
    comps = make_fake_components(cost_weight=CostWeight(0.2))
    items = make_fake_bank(2)
    env = MemoryRouterEnv(items, comps, RewardShaper(), seed=0)
    tiers = (Tier.LOW, Tier.HIGH, Tier.MID, Tier.LOW, Tier.HIGH)
    for idx, item in enumerate(items):
        env.reset(options={"index": idx})
        for t in tiers:
            *_, info = env.step(t)
        rec = run_episode(item, lambda obs, module: tiers[MODULE_ORDER.index(module)], comps)
        env_rec = info["record"]
        assert (env_rec.f1, env_rec.module_cost, env_rec.answer_cost, env_rec.tiers) == (
            rec.f1,
            rec.module_cost,
            rec.answer_cost,
            rec.tiers,
        )


def test_evaluate_and_summarize_per_category():
    comps = make_fake_components()
    items = make_fake_bank(3)
    current = {}

    def decide(obs, module):
        return OPTIMAL_TIERS[current["t"]][MODULE_ORDER.index(module)]

    records = []
    for item in items:  # per-item policy: the oracle knows the type
        current["t"] = question_type(item.question.question)
        records += evaluate_policy(decide, [item], comps, progress=False)
    s = summarize_records(records)
    assert s["overall"]["f1"] == 1.0 and s["overall"]["n"] == 9
    assert set(s["per_category"]) == {"when", "who", "what"}
    when = s["per_category"]["when"]
    assert when["tier_ratio/temporal/high"] == 1.0 and when["tier_ratio/entity/low"] == 1.0
    assert when["module_cost"] == pytest.approx(4 * TIER_COSTS[Tier.LOW] + TIER_COSTS[Tier.HIGH])
    assert math.isnan(s["overall"]["judge"])
    all_low = evaluate_policy(lambda o, m: Tier.LOW, items, comps, progress=False)
    assert summarize_records(all_low)["overall"]["f1"] == 0.0


class _FakeJudge:
    """The AnswerJudge role without an LLM: right iff the prediction is the gold answer."""

    def judge(self, question: Question, prediction: str) -> JudgeResult:
        if question.category == "what":
            return JudgeResult(None, True, "", protocol="fake", prompt_hash="p0")
        score = 1.0 if prediction == question.answer else 0.0
        return JudgeResult(score, False, "", protocol="fake", prompt_hash="p0")


def test_judge_metric_and_failures():
    comps = make_fake_components(judge=_FakeJudge(), task_metric="judge", cost_weight=CostWeight(0.0))
    items = make_fake_bank(1)
    recs = evaluate_policy(lambda o, m: Tier.HIGH, items, comps, progress=False)
    by_cat = {r.category: r for r in recs}
    assert by_cat["when"].judge == 1.0 and not by_cat["when"].judge_failed
    # The record names the verdict's protocol and prompt hash (what a judge score is comparable with).
    assert (by_cat["when"].judge_protocol, by_cat["when"].judge_prompt_hash) == ("fake", "p0")
    assert by_cat["what"].judge_failed and by_cat["what"].task_score("judge") == 0.0
    s = summarize_records(recs)["overall"]
    # The failed verdict is counted, not averaged in as a 0 (the reward still counts it as 0, above).
    assert s["judge"] == pytest.approx(1.0) and s["judge_failed"] == 1
    env = MemoryRouterEnv(items, comps, RewardShaper(), task_metric="judge", seed=0)
    idx = next(i for i, it in enumerate(items) if it.question.category == "what")
    env.reset(options={"index": idx})
    for _ in range(5):
        *_, r_info = env.step(2)
    assert r_info["judge_failed"] and r_info["reward_terms"]["r_task"] == 0.0


def test_fixed_and_random_paths_run_without_observations_and_give_the_same_records(monkeypatch, tmp_path):
    """A policy that never reads its observation (a fixed or random path) gets none: building one embeds each
    module's input, most of a replayed table's time. The records are those of a run that built them."""
    from envs.rollout import NO_OBSERVATION, run_episodes
    from evaluation.frontier_runner import fixed_run, random_run
    from modules.tier import Tier

    comps = make_fake_components()
    items = make_fake_bank(n_per_type=2)
    seen: list[int] = []
    fixed = fixed_run((Tier.LOW, Tier.MID, Tier.HIGH, Tier.MID, Tier.LOW))
    assert not fixed.observes and not random_run(0).observes

    def watching(item):
        decide = fixed.decide_for(item)
        return lambda obs, module: (seen.append(obs.size), decide(obs, module))[1]

    built = run_episodes(items, watching, comps, progress=False)
    assert seen and min(seen) > 0  # observed: real observations
    seen.clear()

    def no_embedding(*args, **kwargs):
        raise AssertionError("an observation was built for a policy that does not read it")

    monkeypatch.setattr(comps.obs_builder, "embed", no_embedding)
    monkeypatch.setattr(comps.obs_builder, "embed_many", no_embedding)
    blind = run_episodes(items, watching, comps, progress=False, observe=False)
    assert set(seen) == {NO_OBSERVATION.size}
    strip = lambda r: {k: v for k, v in r.to_dict().items() if k != "latency_s"}  # noqa: E731
    assert [strip(r) for r in blind] == [strip(r) for r in built]
    # The frontier evaluates a fixed path's run spec the same way (no observation built).
    from evaluation.frontier_runner import RecordStore, evaluate_run

    records = evaluate_run(fixed, items, comps, RecordStore(tmp_path / "fixed.jsonl"), progress=False)
    assert [r["f1"] for r in records] == [r.f1 for r in built]
