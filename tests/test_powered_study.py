"""``scripts/powered_study.py`` on the fake stack: blocks grow a complete outcome table, each block leaves a
delta pack, a finished study runs nothing, a new machine resumes from the packs, and the table replays without
its engine."""

from __future__ import annotations

import contextlib
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
        "pipeline": ["strategy.options.anchor_times_of_day=true"],
        "concurrency": 2,
        "paths": "all-low,all-high;fixed:L,H,L,L,L",
        "block": 2,
        "chunk": 1,
        "benchmarks": [{"name": "custom", "splits": ["test"], "set": [f"benchmark.options.path={EXAMPLE}"]}],
        "out": str(tmp_path / "outcomes"),
        "cache": str(tmp_path / "study.sqlite"),
        "packs": str(tmp_path / "packs"),
        "pack_models": ["fake-llm"],
        "pack_local": ["keyword"],
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
    records_dir = tmp_path / "outcomes" / "custom-test" / "records"
    assert [p.name for p in records_dir.iterdir()] == [piece.fingerprint]
    # A changed pipeline gives new records: the old ones are named, not counted as this config's outcomes.
    raw = yaml.safe_load(study.read_text())
    changed = tmp_path / "changed.yaml"
    changed.write_text(yaml.safe_dump({**raw, "pipeline": []}))
    (moved,) = ps.statuses(ps.load_study(changed))
    assert moved.fingerprint != piece.fingerprint and moved.stale == (piece.fingerprint,)
    assert moved.done == 0 and set(moved.per_path.values()) == {0}
    assert f"not counted: {piece.fingerprint}" in ps.format_status([moved], len(moved.per_path))
    # An outcome whose call failed is counted and shown, so that an engine error cannot pass unseen.
    from evaluation.frontier_runner import RecordStore

    (one,) = [p for p in records if "fixed-LLLLL" in p.name]
    store = RecordStore(one.with_suffix(""))
    first = next(iter(store.records))
    original = dict(store.records[first])
    store.add([{**store.records[first], "failures": 1, "errors": ["vLLM BackendError: backend closed"]}])
    store.save()
    (failing,) = ps.statuses(ps.load_study(study))
    assert failing.failed == 1
    assert " 1  " + failing.fingerprint in ps.format_status([failing], len(failing.per_path))
    store.add([original])
    store.save()

    assert ps.main(["run", "--study", str(study)]) == 0  # the last block: the whole split
    (piece,) = ps.statuses(ps.load_study(study))
    assert piece.complete and len(list((tmp_path / "packs").glob("calls-*.pack.gz"))) == 2
    # The packs keep the LLM calls and the listed local methods' outputs; the others are recomputed on replay.
    from modules.cache_pack import read_pack

    entries = [v for p in (tmp_path / "packs").glob("*.pack.gz") for v in dict(read_pack(p).entries).values()]
    assert {v.get("model_id") for v in entries} == {"fake-llm", None}
    assert {v["tags"]["method"] for v in entries if "model_id" not in v} == {"keyword"}
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
    # The recorded command is the block's `evaluate.py frontier` (what scripts/replay_tables.py reruns).
    assert meta["argv"][:2] == ["evaluate.py", "frontier"] and str(out) in meta["argv"]
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


def test_kill_stops_a_block_saving_its_chunks_and_exporting_its_calls(tmp_path):
    """SIGTERM (what ``kill`` sends, and all a background job can get: shells start those with SIGINT
    ignored) unwinds like Ctrl-C: the finished chunks' records are kept, the calls exported, exit 143."""
    import signal
    import sqlite3
    import subprocess
    import sys
    import time

    from tests.reliability_support import cli_env

    slow = ["backend.latency_s=0.4", "backend.sleep=true"]
    study = _study(tmp_path, block=3, concurrency=1)
    raw = yaml.safe_load(study.read_text())
    study.write_text(yaml.safe_dump({**raw, "engine": [*raw["engine"], *slow]}))
    cmd = [sys.executable, str(ROOT / "scripts" / "powered_study.py"), "run", "--study", str(study)]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    db, deadline = tmp_path / "study.sqlite", time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:  # wait for the first question's calls
        time.sleep(0.5)
        if db.exists():
            with contextlib.suppress(sqlite3.Error), contextlib.closing(sqlite3.connect(db)) as con:
                if con.execute("select count(*) from calls").fetchone()[0] >= 6:
                    break
    assert proc.poll() is None, "the block ended before the signal: make the fake engine slower"
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err[-3000:]
    assert "SIGTERM: stopped" in err and "Traceback" not in err, err[-3000:]
    packs = list((tmp_path / "packs").glob("calls-*.pack.gz"))
    assert len(packs) == 1 and "delta pack" in out  # the calls made before the signal are shipped


def test_run_refuses_a_cpu_whose_vllm_kernels_are_not_the_tables(tmp_path, capsys):
    ps = load_script("powered_study")
    study = _study(tmp_path)
    assert ps.main(["run", "--study", str(study), "--blocks", "1"]) == 0
    out = tmp_path / "outcomes" / "custom-test"
    meta = json.loads((out / "metadata.json").read_text())
    # The fake engine has no kernel class: nothing to check. A table of vLLM on an ARM CPU has one, which
    # this machine (x86 in CI) does not run.
    role = next(iter(meta["engines"]))
    meta["engines"][role]["numerics"] = {"engine": "vllm", "device": "cpu", "kernels": "aarch64"}
    (out / "metadata.json").write_text(json.dumps(meta))
    capsys.readouterr()
    assert ps.main(["status", "--study", str(study)]) == 0
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.strip().startswith("custom ")]
    assert "aarch64" in line and "`run` skips it here" in line
    before = sorted(p.name for p in (tmp_path / "packs").iterdir())
    with pytest.raises(
        SystemExit, match=r"custom tables were computed with vLLM's aarch64 CPU kernels .*metadata"
    ):
        ps.main(["run", "--study", str(study), "--blocks", "1"])
    assert sorted(p.name for p in (tmp_path / "packs").iterdir()) == before  # nothing ran


def _piece(tmp_path: Path, bench: str, split: str, kernels: str | None, done: int = 0):
    """A study piece whose table (if ``kernels`` is not None) was computed with vLLM kernels of that class."""
    ps = load_script("powered_study")
    out = tmp_path / f"{bench}-{split}"
    if kernels is not None:
        out.mkdir(parents=True)
        numerics = {"engine": "vllm", "device": "cpu", "kernels": kernels}
        (out / "metadata.json").write_text(json.dumps({"engines": {"answer": {"numerics": numerics}}}))
    return ps.Piece(bench, split, (), out, 10, done, {}, "fp", ())


def test_each_benchmark_keeps_the_kernel_class_that_started_it(tmp_path):
    """A benchmark's splits are one engine's; benchmarks may each be another class's: a CPU continues those of
    its class, starts those with no table, and skips the rest."""
    ps = load_script("powered_study")
    pieces = [
        _piece(tmp_path, "a", "test", "avx512_bf16", done=10),
        _piece(tmp_path, "a", "val", None),  # no table yet, but its test split fixed the class
        _piece(tmp_path, "b", "test", "avx512"),
        _piece(tmp_path, "c", "test", None),
    ]
    assert {b: k for b, (k, _) in ps.benchmark_kernels(pieces).items()} == {
        "a": "avx512_bf16",
        "b": "avx512",
        "c": None,
    }
    todo, skipped = ps.runnable(pieces, "avx512")
    assert [(p.benchmark, p.split) for p in todo] == [("b", "test"), ("c", "test")]
    assert skipped == {"a": "avx512_bf16"}
    todo, skipped = ps.runnable(pieces, "avx512_bf16")
    assert [(p.benchmark, p.split) for p in todo] == [("a", "val"), ("c", "test")] and skipped == {
        "b": "avx512"
    }
    # Two classes in one benchmark's tables: named, never picked between.
    mixed = [*pieces, _piece(tmp_path, "c", "val", "avx2")]
    mixed[3] = _piece(tmp_path / "x", "c", "test", "avx512")
    with pytest.raises(SystemExit, match=r"the c tables were computed with different vLLM CPU kernels"):
        ps.benchmark_kernels(mixed)
