"""``scripts/powered_study.py`` on the fake stack: blocks grow a complete outcome table, each block leaves a
delta pack, a finished study runs nothing, a new machine resumes from the packs, and the table replays without
its engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import evaluate
from tests.support import load_script

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "tests" / "data" / "custom_example.jsonl"


def _study(tmp_path: Path, **over) -> Path:
    study = {
        "experiment": "none",
        "engine": ["backend=fake", "encoder=hashing", "memory=no_ce", f"question_bank.cache_dir={tmp_path}"],
        "concurrency": 2,
        "paths": "all-low,all-high;fixed:L,H,L,L,L",
        "block": 2,
        "chunk": 1,
        "benchmarks": [{"name": "custom", "splits": ["test"], "set": [f"benchmark.options.path={EXAMPLE}"]}],
        "out": str(tmp_path / "outcomes"),
        "cache": str(tmp_path / "study.sqlite"),
        "packs": str(tmp_path / "packs"),
        "pack_models": ["fake-llm"],
        **over,
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    return path


def test_blocks_grow_a_complete_table_with_a_delta_pack_each_and_resume_from_the_packs(tmp_path, capsys):
    ps = load_script("powered_study")
    study = _study(tmp_path)
    assert ps.main(["run", "--study", str(study), "--blocks", "1"]) == 0
    (piece,) = ps.statuses(ps.load_study(study))
    assert (piece.n_questions, piece.done) == (3, 2) and set(piece.per_path.values()) == {2}
    assert len(list((tmp_path / "packs").glob("calls-*.pack.gz"))) == 1
    # Records are committed compressed.
    records = list((tmp_path / "outcomes").rglob("*.jsonl*"))
    assert records and all(p.suffix == ".gz" for p in records)

    assert ps.main(["run", "--study", str(study)]) == 0  # the last block: the whole split
    (piece,) = ps.statuses(ps.load_study(study))
    assert piece.complete and len(list((tmp_path / "packs").glob("calls-*.pack.gz"))) == 2
    # The packs keep the LLM calls alone: the local tiers' results are recomputed on replay.
    from modules.cache_pack import read_pack

    entries = [v for p in (tmp_path / "packs").glob("*.pack.gz") for v in dict(read_pack(p).entries).values()]
    assert entries and {v.get("model_id") for v in entries} == {"fake-llm"}
    capsys.readouterr()
    assert ps.main(["run", "--study", str(study)]) == 0
    assert "nothing left to run" in capsys.readouterr().out
    assert ps.main(["status", "--study", str(study)]) == 0
    assert "custom/test" in capsys.readouterr().out

    # A new machine: no cache; the packs give every call back, so the table replays without its engine.
    (tmp_path / "study.sqlite").unlink()
    ps.import_study_packs(ps.load_study(study))
    out = tmp_path / "outcomes" / "custom-test"
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["n_questions"] == 3 and "engines" in meta
    argv = ps.frontier_argv(ps.load_study(study), piece, None)
    replay = [a if a != str(out) else str(tmp_path / "replayed") for a in argv]
    assert evaluate.main([*replay, "--replay", "--expect", str(out), "--no-progress"]) == 0
    assert "frontier.csv: reproduced" in capsys.readouterr().out


def test_a_study_file_with_a_bad_key_or_a_path_that_is_not_fixed_is_named(tmp_path):
    ps = load_script("powered_study")
    with pytest.raises(SystemExit, match=r"study\.yaml: 'block' must be a int"):
        ps.load_study(_study(tmp_path, block="forty"))
    with pytest.raises(SystemExit, match="must be fixed tier paths"):
        ps.path_run_ids("all-low,random")
