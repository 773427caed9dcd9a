"""scripts/bench_engines.py and its throughput part (scripts/engine_throughput.py): cells, the throughput
report, and one results directory per CPU."""

from __future__ import annotations

import json

import pytest

from tests.support import load_script


def _bench():
    return load_script("bench_engines")


def _throughput():
    return load_script("engine_throughput")


def test_cells_parse_and_bad_ones_are_named():
    tp = _throughput()
    cells = "xllamacpp@1, native@4,vllm-bf16@16,native@8:lockstep,vllm-int8@16:per-path"
    assert tp.parse_cells(cells) == [
        ("xllamacpp", 1, None, "shared"), ("native", 4, None, "shared"), ("vllm-bf16", 16, None, "shared"),
        ("native", 8, "lockstep", "shared"), ("vllm-int8", 16, None, "per-path"),
    ]  # fmt: skip
    for bad in ("native", "native@0", "nope@2", "native@x", "native@4:async", "native@4:lockstep:lockstep"):
        with pytest.raises(SystemExit, match="--cells"):
            tp.parse_cells(bad)


def test_cells_are_labelled_by_dispatch_and_old_rows_ran_lockstep():
    tp = _throughput()
    assert tp.cell_label("native", 4, "direct") == "native@4"
    assert tp.cell_label("native", 4, "lockstep") == "native@4:lockstep"
    assert tp.cell_label("native", 1, "lockstep") == "native@1"  # one in flight: no barrier to speak of
    assert tp.cell_label("vllm-bf16", 8, "lockstep") == "vllm-bf16@8"  # in process: lockstep is all it has
    assert tp.row_label({"engine": "native", "concurrency": 4}) == "native@4:lockstep"
    assert tp.row_label({"engine": "native", "concurrency": 4, "dispatch": "direct"}) == "native@4"
    assert tp.cell_label("vllm-int8", 16, "lockstep", "per-path") == "vllm-int8@16:per-path"
    row = {"engine": "vllm-int8", "concurrency": 16, "queue": "per-path"}
    assert tp.row_label(row) == "vllm-int8@16:per-path"


def test_a_paths_workload_is_the_fixed_paths_and_is_paired_by_path():
    """`--policy paths`: every question on each fixed path (the powered study's shape); a table without the
    wheel compares with its first cell, and pairs F1 by (path, question)."""
    bench, tp = _bench(), _throughput()
    runs = tp.workload_runs("paths", "all-low,all-mid,all-high,single-module", 0)
    assert len(runs) == 13 and runs[0].run_id == "fixed-LLLLL" and not any(r.observes for r in runs)
    assert [r.run_id for r in tp.workload_runs("paths", "all-low,all-high,all-low", 0)] == [
        "fixed-LLLLL", "fixed-HHHHH"
    ]
    with pytest.raises(SystemExit, match="fixed tier paths"):
        tp.workload_runs("paths", "all-low,random", 0)

    def row(cell, queue, wall, f1s):
        r = _row(cell, 0, wall, f1s) | {"policy": "paths:x", "queue": queue, "dispatch": "lockstep"}
        r["per_question"] = [
            {"question_id": "q0", "path": path, "f1": f}
            for path, f in zip(("fixed-LLLLL", "fixed-HHHHH"), f1s, strict=True)
        ]
        return r

    table = tp.throughput_report(
        [row("vllm-int8@16", "per-path", 120.0, [0.2, 0.6]), row("vllm-int8@16", "shared", 100.0, [0.2, 0.8])]
    )["paths:x on 1 questions"]
    shared = table["vllm-int8@16"]
    assert shared["reference"] == "vllm-int8@16:per-path"
    assert shared["speedup_vs_reference"] == pytest.approx(1.2)
    assert shared["f1_minus_reference"][0] == pytest.approx(0.1)  # (0 + 0.2) / 2: paired path by path
    text = bench.format_report({"throughput": {"paths:x on 1 questions": table}})
    assert "speed-up vs vllm-int8@16:per-path" in text and "episodes/hour" in text


def _row(cell, rep, wall, f1s, prompt=100, cached=40):
    return {
        "cell": cell, "engine": cell.split("@")[0], "concurrency": int(cell.split("@")[1]),
        "dispatch": "direct", "policy": "all-high", "repeat": rep, "questions": len(f1s), "wall_s": wall,
        "q_per_hour": 3600 * len(f1s) / wall, "mean_batch": 1.0 if cell.endswith("@1") else 3.5,
        "prompt_tokens": prompt, "cached_tokens": cached, "f1": sum(f1s) / len(f1s),
        "per_question": [{"question_id": f"q{i}", "f1": f} for i, f in enumerate(f1s)],
    }  # fmt: skip


def test_throughput_report_takes_ratios_within_a_repeat_and_pairs_f1():
    bench, tp = _bench(), _throughput()
    rows = [
        _row("xllamacpp@1", 0, 100.0, [0.5, 0.5]), _row("native@4", 0, 25.0, [0.5, 1.0]),
        _row("xllamacpp@1", 1, 200.0, [0.5, 0.5]), _row("native@4", 1, 40.0, [0.5, 1.0]),
    ]  # fmt: skip
    table = tp.throughput_report(rows)["all-high on 2 questions"]
    assert table["native@4"]["speedup_vs_reference"] == pytest.approx(4.5)  # median of 4x and 5x
    assert table["native@4"]["median_wall_s"] == pytest.approx(32.5)
    assert table["native@4"]["cached_share"] == pytest.approx(0.4)
    assert table["native@4"]["f1_minus_reference"][0] == pytest.approx(0.25)
    assert table["xllamacpp@1"]["speedup_vs_reference"] == pytest.approx(1.0)
    text = bench.format_report({"throughput": {"all-high on 2 questions": table}})
    assert "| native@4 | 2 | 2 | 32 | " in text and "4.50×" in text


def test_numbers_of_another_cpu_are_never_mixed(tmp_path):
    bench = _bench()
    from common.cpu import cpu_record

    mine = cpu_record()
    (tmp_path / "new").mkdir()
    bench._check_machine(tmp_path / "new", mine)
    assert json.loads((tmp_path / "new" / "machine.json").read_text())["id"] == mine["id"]
    other = tmp_path / "other"
    other.mkdir()
    (other / "machine.json").write_text(json.dumps({**mine, "id": "amd-avx512-000000", "model": "AMD EPYC"}))
    with pytest.raises(SystemExit, match="measured on AMD EPYC"):
        bench._check_machine(other, mine)
    unknown = tmp_path / "unknown"
    unknown.mkdir()
    (unknown / "peak.json").write_text("{}")
    with pytest.raises(SystemExit, match=r"no machine\.json"):
        bench._check_machine(unknown, mine)


def test_workloads_of_other_sizes_are_separate_tables():
    """A paths workload of 16 questions at N = 16 fills every batch on either queue, one of 24 does not: the
    report never takes a median across the two, and older records (no ``limit``) count their questions."""
    bench, tp = _bench(), _throughput()
    old = _row("native@4", 0, 10.0, [0.5, 1.0])
    new = _row("native@4", 0, 30.0, [0.5, 1.0, 0.0]) | {"limit": 3}
    assert tp.workload_label(old) == "all-high on 2 questions"
    assert tp.workload_label(new) == "all-high on 3 questions"
    report = tp.throughput_report([old, new])
    assert report["all-high on 2 questions"]["native@4"]["median_wall_s"] == 10.0
    assert report["all-high on 3 questions"]["native@4"]["median_wall_s"] == 30.0
    assert "`all-high` policy on 3 questions" in bench.format_report({"throughput": report})
