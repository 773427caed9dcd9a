"""`evaluate.py headroom`: contexts, stratified selection, gold rendering, summary maths, CLI run.

The CLI test runs the real code path (config composition, question bank on real LoCoMo, the
pipeline, the answer generator, record cache, CSV/JSON/PNG) with the fake LLM, hashing encoder
and no reranker, so it takes seconds.
"""

import argparse
import json
from types import SimpleNamespace

import numpy as np
import pytest

from benchmarks.metrics import answer_containment
from benchmarks.types import History, Question, Sample, Session, Turn
from evaluation import cli_headroom
from evaluation.headroom import (
    BASELINE,
    GOLD,
    GOLD_FILTER,
    RAW,
    Context,
    evaluate_context,
    format_categories,
    format_headroom,
    format_ladder,
    gold_texts,
    headroom_contexts,
    known_contexts,
    select_contexts,
    stratified,
    summarise_headroom,
    summarise_ladder,
)
from modules.tier import MODULE_ORDER, Tier
from tests.support import needs_locomo


def test_contexts_cover_uniform_paths_and_single_module_changes():
    ctxs = headroom_contexts()
    names = [c.name for c in ctxs]
    assert names[:6] == [GOLD, RAW, "all-LOW", "all-MID", "all-HIGH", GOLD_FILTER]
    assert len(ctxs) == 6 + 10
    by = {c.name: c for c in ctxs}
    assert by["all-HIGH"].tiers == (Tier.HIGH,) * 5
    assert by["MID, temporal=HIGH"].tiers == (Tier.MID, Tier.MID, Tier.HIGH, Tier.MID, Tier.MID)
    assert by["MID, filter=LOW"].tiers == (Tier.LOW, Tier.MID, Tier.MID, Tier.MID, Tier.MID)
    assert len(headroom_contexts(single_module=False)) == 6
    assert by[GOLD_FILTER].kind == "gold_filter" and by[GOLD_FILTER].tiers == (Tier.MID,) * 5


def test_gold_filter_runs_the_pipeline_on_the_gold_chunks_only():
    from modules.cost import Cost
    from modules.types import Evidence

    seen: list[tuple] = []

    class Run:
        def step(self, tier):
            pass

        def result(self):
            return SimpleNamespace(memory_text="memory", total_cost=Cost(value=2.0))

    def begin(query, evidence, date):
        seen.append(tuple(e.chunk_id for e in evidence))
        return Run()

    components = SimpleNamespace(
        pipeline=SimpleNamespace(begin=begin),
        answerer=SimpleNamespace(
            answer=lambda q, text: ("Tom", Cost(value=1.0)), llm=SimpleNamespace(count_tokens=len)
        ),
    )
    ids = [("D1:2",), ("D2:1",), ()]  # q1's gold turns are D2:1 and D1:1
    ev = tuple(Evidence(f"c{i}", f"text {i}", None, 1.0, turns) for i, turns in enumerate(ids))
    item = SimpleNamespace(question=_sample().questions[0], evidence=ev, benchmark="locomo")
    scorer = lambda q, pred, bench: {"f1": 1.0}  # noqa: E731
    ctx = next(c for c in headroom_contexts() if c.name == GOLD_FILTER)
    rec = evaluate_context(ctx, item, components, "", scorer)
    assert seen == [("c1",)] and rec["module_cost"] == 2.0 and rec["f1"] == 1.0
    # no retrieved chunk holds a gold turn: the filter has nothing to prefer, all chunks stay
    evaluate_context(ctx, SimpleNamespace(**{**vars(item), "evidence": ev[::2]}), components, "", scorer)
    evaluate_context(Context("all-MID", "pipeline", (Tier.MID,) * 5), item, components, "", scorer)
    assert seen[1:] == [("c0", "c2"), ("c0", "c1", "c2")]


def test_select_contexts_by_name_and_unknown():
    assert [c.name for c in select_contexts("all-LOW,all-HIGH")] == ["all-LOW", "all-HIGH"]
    assert [c.name for c in select_contexts("MID, filter=HIGH;all-MID")] == ["MID, filter=HIGH", "all-MID"]
    assert [c.name for c in select_contexts("MID, filter=LOW")] == ["MID, filter=LOW"]
    # the cheap side of the ladder is named, not in the default set
    (up,) = select_contexts("LOW, temporal=MID")
    assert up.tiers == (Tier.LOW, Tier.LOW, Tier.MID, Tier.LOW, Tier.LOW) and up.kind == "pipeline"
    assert "LOW, temporal=MID" not in [c.name for c in select_contexts("all")]
    assert [c.name for c in known_contexts()][-5:] == [f"LOW, {m}=MID" for m in MODULE_ORDER]
    with pytest.raises(ValueError, match=r"unknown headroom contexts.*all-ULTRA"):
        select_contexts("all-ULTRA")


def test_stratified_selection_keeps_category_shares_and_order():
    items = [SimpleNamespace(cat=c, i=i) for i, c in enumerate("AAAAAABBBC")]
    got = stratified(items, 5, lambda it: it.cat)
    # quotas 3.0 / 1.5 / 0.5 -> 3 A + 1 B, then one more by largest remainder: B and C tie at 0.5, B by name
    assert [it.cat for it in got] == ["A", "A", "A", "B", "B"]
    # quotas 4.2 / 2.1 / 0.7 -> 4 A + 2 B, and C has the largest remainder
    assert [it.cat for it in stratified(items, 7, lambda it: it.cat)] == ["A"] * 4 + ["B"] * 2 + ["C"]
    assert [it.i for it in got] == sorted(it.i for it in got)
    assert stratified(items, None, lambda it: it.cat) == items
    assert len(stratified(items, 100, lambda it: it.cat)) == 10
    with pytest.raises(ValueError, match="limit must be > 0"):
        stratified(items, 0, lambda it: it.cat)


def _sample() -> Sample:
    s1 = Session("S1", (Turn("D1:1", "Ann", "I adopted a cat."), Turn("D1:2", "Bo", "Nice!")), "8 May, 2023")
    s2 = Session("S2", (Turn("D2:1", "Ann", "The cat is called Tom.", image_caption="a cat"),), None)
    qs = (
        Question("q1", "What is Ann's cat called?", "Tom", "1", ("D2:1", "D1:1")),
        Question("q2", "Who?", "nobody", "2", ()),
    )
    return Sample("s", History("s", (s1, s2)), qs)


def test_gold_texts_are_dated_in_history_order():
    gold = gold_texts([_sample()])
    assert gold["q1"].splitlines() == [
        '(8 May 2023) Ann said, "I adopted a cat."',
        'Ann said, "The cat is called Tom." and shared a cat',
    ]
    assert gold["q2"] == ""


def test_answer_containment():
    q = Question("q", "?", "the old Prius", "4")
    assert answer_containment(q, "Evan drove his old Prius.", "locomo") == 1.0
    assert answer_containment(q, "Evan drove a Prius.", "locomo") == 0.5  # "old" missing
    assert answer_containment(q, "", "locomo") == 0.0


def _recs(name: str, f1s: list[float], cost: float = 0.0) -> list[dict]:
    return [
        {
            "question_id": f"q{i}",
            "category": "1" if i % 2 else "2",
            "f1": f,
            "em": float(f == 1.0),
            "containment": f,
            "context_tokens": 10,
            "context_chars": 40,
            "module_cost": cost,
            "answer_cost": 1.0,
            "failures": 0,
        }
        for i, f in enumerate(f1s)
    ]


def test_summary_means_paired_differences_and_categories():
    qids = [f"q{i}" for i in range(4)]
    records = {
        BASELINE: _recs(BASELINE, [0.0, 0.5, 0.0, 0.5]),
        "all-HIGH": _recs("all-HIGH", [1.0, 0.5, 1.0, 0.5], 9),
    }
    rows = summarise_headroom(records, qids, n_boot=500, seed=0, alpha=0.05)
    low, high = rows
    assert low["f1"]["mean"] == pytest.approx(0.25) and high["f1"]["mean"] == pytest.approx(0.75)
    assert high["vs_low"]["f1"]["mean"] == pytest.approx(0.5)
    # per-question differences are 1, 0, 1, 0: every resample mean lies in [0, 1], and is > 0 unless
    # the resample holds only q1/q3, so the 95% interval is inside [0, 1] and above 0
    assert 0.0 <= high["vs_low"]["f1"]["lo"] <= 0.5 <= high["vs_low"]["f1"]["hi"] <= 1.0
    assert high["module_cost"]["mean"] == 9.0 and low["vs_low"]["f1"]["mean"] == 0.0
    assert high["per_category"] == {"1": {"f1": 0.5, "n": 2}, "2": {"f1": 1.0, "n": 2}}
    table = format_headroom(rows)
    assert "| all-HIGH | 0.750 [" in table and "| all-LOW | 0.250 [" in table
    assert "cat 1 (n=2)" in format_categories(rows)


def test_ladder_rungs_paired_verdicts():
    qids = [f"q{i}" for i in range(4)]
    records = {
        BASELINE: _recs(BASELINE, [0.0, 0.2, 0.4, 0.6]),
        "all-MID": _recs("all-MID", [0.1, 0.3, 0.5, 0.7]),  # +0.1 on every question
        "all-HIGH": _recs("all-HIGH", [0.1, 0.3, 0.5, 0.7]),  # = MID on every question
        "MID, filter=LOW": _recs("MID, filter=LOW", [0.3, 0.5, 0.7, 0.9]),  # LOW filter beats MID's
        "LOW, temporal=MID": _recs("LOW, temporal=MID", [0.0, 0.2, 0.4, 0.8]),  # pays on one question
    }
    steps = {s["step"]: s for s in summarise_ladder(records, qids, n_boot=200, seed=0, alpha=0.05)}
    # only rungs with both contexts evaluated; constant per-question differences give point CIs
    assert set(steps) == {f"all: {r}" for r in ("MID over LOW", "HIGH over MID", "HIGH over LOW")} | {
        "filter: MID over LOW",
        "temporal: MID over LOW, rest LOW",
    }
    rest_low = steps["temporal: MID over LOW, rest LOW"]
    assert (rest_low["dearer"], rest_low["cheaper"]) == ("LOW, temporal=MID", BASELINE)
    assert rest_low["df1"]["mean"] == pytest.approx(0.05) and rest_low["ordered"]
    mid = steps["all: MID over LOW"]
    assert mid["df1"]["mean"] == pytest.approx(0.1) and mid["df1"]["lo"] == pytest.approx(0.1)
    assert mid["ordered"] and mid["pays"]
    flat = steps["all: HIGH over MID"]
    assert flat["ordered"] and not flat["pays"] and flat["df1"]["mean"] == pytest.approx(0.0)
    inv = steps["filter: MID over LOW"]
    assert (inv["dearer"], inv["cheaper"]) == ("all-MID", "MID, filter=LOW")
    assert inv["df1"]["hi"] == pytest.approx(-0.2) and not inv["ordered"]
    table = format_ladder(list(steps.values()))
    assert "| filter: MID over LOW | all-MID − MID, filter=LOW | -0.200 [-0.200, -0.200] | INVERTED |" in (
        table
    )
    assert "| all: MID over LOW | all-MID − all-LOW | +0.100 [+0.100, +0.100] | ordered, pays |" in table


def test_summary_rejects_missing_records():
    with pytest.raises(ValueError, match="'all-LOW' has no record for questions \\['q3'\\]"):
        summarise_headroom(
            {BASELINE: _recs(BASELINE, [0, 0, 0])}, ["q0", "q1", "q2", "q3"], n_boot=10, seed=0, alpha=0.05
        )


def _cli_args(tmp_path, *extra: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli_headroom.add_arguments(parser)
    fake = ["--set", "backend=fake", "--set", "encoder=hashing", "--set", "memory=no_ce"]
    return parser.parse_args(
        [
            "--benchmark",
            "locomo",
            "--split",
            "test",
            "--limit",
            "6",
            "--out",
            str(tmp_path),
            "--no-progress",
            "--n-boot",
            "200",
            *fake,
            *extra,
        ]
    )


@needs_locomo
def test_headroom_cli_end_to_end_and_resume(tmp_path, capsys, monkeypatch):
    assert cli_headroom.run(_cli_args(tmp_path)) == 0
    out = capsys.readouterr().out
    assert (
        "locomo / test: 6 questions" in out and "| gold evidence |" in out and "| MID, summary=LOW |" in out
    )
    data = json.loads((tmp_path / "headroom.json").read_text())
    assert [r["context"] for r in data["rows"]] == [c.name for c in headroom_contexts()]
    assert all(r["n"] == 6 for r in data["rows"])
    assert data["metadata"]["n_questions"] == 6 and data["metadata"]["data_checksums"]
    assert (tmp_path / "headroom.png").stat().st_size > 1000
    assert len((tmp_path / "headroom.csv").read_text().splitlines()) == 1 + 16
    gold = next(r for r in data["rows"] if r["context"] == GOLD)
    raw = next(r for r in data["rows"] if r["context"] == RAW)
    assert gold["module_cost"]["mean"] == 0.0 and raw["module_cost"]["mean"] == 0.0
    assert gold["containment"]["mean"] >= raw["containment"]["mean"] - 0.5  # both real, finite numbers
    high = next(r for r in data["rows"] if r["context"] == "all-HIGH")
    low = next(r for r in data["rows"] if r["context"] == "all-LOW")
    assert high["module_cost"]["mean"] > low["module_cost"]["mean"]

    # A second run answers nothing again: every record comes from the per-context cache.
    from evaluation import headroom

    def boom(*_a, **_k):
        raise AssertionError("re-evaluated a cached record")

    monkeypatch.setattr(headroom, "evaluate_context", boom)
    monkeypatch.setattr(cli_headroom, "evaluate_context", boom)
    assert cli_headroom.run(_cli_args(tmp_path)) == 0
    again = json.loads((tmp_path / "headroom.json").read_text())
    assert [r["f1"] for r in again["rows"]] == [r["f1"] for r in data["rows"]]

    # Another ladder (other filter budgets) re-answers its pipeline contexts only: gold and raw
    # records do not depend on the strategy.
    seen = []

    def record(ctx, *_a, **_k):
        seen.append(ctx.name)
        boom()

    monkeypatch.setattr(cli_headroom, "evaluate_context", record)
    ladder = ["--set", "strategy.options.module_topk=2", "--contexts", "gold evidence,raw top-k,all-LOW"]
    with pytest.raises(AssertionError, match="re-evaluated"):
        cli_headroom.run(_cli_args(tmp_path, *ladder))
    assert seen == ["all-LOW"]


def test_headroom_cli_lists_contexts(tmp_path, capsys):
    assert cli_headroom.run(_cli_args(tmp_path, "--list-contexts")) == 0
    assert capsys.readouterr().out.splitlines()[:3] == [GOLD, RAW, "all-LOW"]


def test_experiment_cannot_combine_with_config(tmp_path):
    from evaluation.frontier_config import resolve_config

    args = argparse.Namespace(
        config=str(tmp_path / "c.yaml"), experiment="cpu_quality", set=[], benchmark=None
    )
    with pytest.raises(ValueError, match="cannot be combined with --config"):
        resolve_config(args, [])


def test_cpu_quality_experiment_composes():
    from policies.training.config import load_config

    cfg = load_config(["+experiment=cpu_quality"])
    assert (
        cfg["llms"]["high"]["model"] == "qwen2.5-1.5b" and cfg["answer"]["backend"]["model"] == "qwen2.5-1.5b"
    )
    assert cfg["strategy"]["options"]["keep_evidence"] is True and cfg["question_bank"]["k"] == 10
    assert cfg["strategy"]["options"]["module_topk"] == 5
    assert "cpu_quality" in cfg["run_name"]
    assert np.isfinite(cfg["question_bank"]["k"])


@needs_locomo
def test_cached_only_summarises_the_questions_done_everywhere(tmp_path, capsys, monkeypatch):
    with pytest.raises(SystemExit, match="--cached-only: none of the 6 selected questions"):
        cli_headroom.run(_cli_args(tmp_path, "--contexts", "gold evidence", "--cached-only"))
    assert cli_headroom.run(_cli_args(tmp_path, "--contexts", "gold evidence")) == 0
    args = _cli_args(tmp_path, "--contexts", "all-LOW")
    args.limit = 3
    assert cli_headroom.run(args) == 0
    done = {json.loads(line)["question_id"] for line in next(tmp_path.rglob("all-LOW.jsonl")).open()}
    assert len(done) == 3

    def boom(*_a, **_k):
        raise AssertionError("--cached-only answered a question")

    monkeypatch.setattr(cli_headroom, "evaluate_context", boom)
    capsys.readouterr()
    assert cli_headroom.run(_cli_args(tmp_path, "--contexts", "gold evidence,all-LOW", "--cached-only")) == 0
    assert "(cached only: 3 of 6 selected questions done in every context)" in capsys.readouterr().out
    data = json.loads((tmp_path / "headroom.json").read_text())
    assert data["metadata"]["n_questions"] == 3 and data["metadata"]["n_selected"] == 6
    assert data["metadata"]["cached_only"] is True


def test_headroom_with_questions_in_flight_gives_the_same_table(tmp_path):
    """`evaluate.py headroom --concurrency N`: the same records and table as one question at a time."""
    tables = []
    for n in (1, 3):
        out = tmp_path / f"n{n}"
        assert cli_headroom.run(_cli_args(out, "--concurrency", str(n))) == 0
        rows = json.loads((out / "headroom.json").read_text())["rows"]
        tables.append([{k: r[k] for k in ("context", "n", "f1", "module_cost")} for r in rows])
    assert tables[0] == tables[1]
