"""wandb as its users know it (issue 48): artifacts, groups and tags, one run across a resume, a summary.

Offline runs of ``train.py`` on the fake stack, read back from their ``.wandb`` run files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.reliability_support import RUN_NAME, run_cli
from tests.support import needs_locomo
from tests.wandb_offline import records, run_files

pytest.importorskip("wandb")


def _read(path: Path) -> dict[str, Any]:
    runs, artifacts, summary = [], [], {}
    for record in records(path):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            runs.append(record.run)
        elif kind == "artifact":
            artifacts.append(record.artifact)
        elif kind == "summary":
            summary.update({item.key: json.loads(item.value_json) for item in record.summary.update})
    return {"runs": runs, "artifacts": artifacts, "summary": summary}


@needs_locomo
def test_an_offline_run_holds_artifacts_tags_summary_and_resume_continues_it(tmp_path):
    first = run_cli(tmp_path, "wandb.mode=offline", "train.total_timesteps=40")
    assert first.returncode == 0, first.stderr[-3000:]
    run = tmp_path / "runs" / RUN_NAME
    (file_1,) = run_files(run)
    one = _read(file_1)
    (info,) = {r.run_id: r for r in one["runs"]}.values()
    assert info.display_name == RUN_NAME and info.run_group == "locomo__implementation"
    assert {"locomo", "implementation", "lam0", "seed0", "single"} <= set(info.tags)
    by_type = {a.type: a for a in one["artifacts"]}
    assert {"model", "checkpoint", "reports"} <= set(by_type)
    assert by_type["model"].name == f"router-{RUN_NAME}"
    assert by_type["checkpoint"].name == f"checkpoint-{RUN_NAME}"
    meta = json.loads(by_type["model"].metadata)
    assert meta["config"]["run_name"] == RUN_NAME and "f1" in meta["validation"]
    files = {entry.path for entry in by_type["model"].manifest.contents}
    assert {"router.pt", "metadata.json"} <= files
    reports = {entry.path for entry in by_type["reports"].manifest.contents}
    assert {"validation.md", "validation.json", "episodes.jsonl", "result.json"} <= reports
    summary = one["summary"]
    calls = summary["llm_calls_replayed"] + summary["llm_calls_computed"]
    assert summary["verdict"] and summary["llm_calls"] == calls
    assert summary["timesteps"] == 40 and summary["wall_s"] > 0 and summary["router"].endswith("router")
    run_id = (run / "wandb_run_id").read_text().strip()
    assert info.run_id == run_id

    # resume= continues the same wandb run (one id), with new versions of the artifacts
    again = run_cli(tmp_path, "wandb.mode=offline", "train.total_timesteps=60", f"resume={run}")
    assert again.returncode == 0, again.stderr[-3000:]
    files_2 = [f for f in run_files(run) if f != file_1]
    assert len(files_2) == 1
    two = _read(files_2[0])
    assert {r.run_id for r in two["runs"]} == {run_id}
    assert two["summary"]["timesteps"] == 60
    assert {a.name for a in two["artifacts"]} >= {f"router-{RUN_NAME}", f"checkpoint-{RUN_NAME}"}


@needs_locomo
def test_the_runs_of_a_sweep_share_its_name_as_group_and_tag(tmp_path):
    proc = run_cli(tmp_path, "-m", "seed=0,1", "wandb.mode=offline")
    assert proc.returncode == 0, proc.stderr[-3000:]
    groups, tags = set(), []
    for seed in (0, 1):
        run = tmp_path / "runs" / RUN_NAME.replace("s0", f"s{seed}")
        (file,) = run_files(run)
        (info,) = {r.run_id: r for r in _read(file)["runs"]}.values()
        groups.add(info.run_group)
        tags.append(set(info.tags))
    (group,) = groups  # one group for the sweep
    assert group.startswith("sweep-")
    for seed, run_tags in zip((0, 1), tags, strict=True):
        assert {"sweep", f"sweep:{group}", f"seed{seed}"} <= run_tags
