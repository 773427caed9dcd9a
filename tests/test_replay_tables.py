"""scripts/replay_tables.py: every committed table replays from the packs alone, or the failing one is
named."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from modules.cache_pack import Filters, export_pack
from tests.reliability_support import cli_env
from tests.support import load_script

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "tests" / "data" / "custom_example.jsonl"


def _table(tmp_path: Path) -> tuple[Path, Path]:
    """A small frontier table made by the CLI (so that its metadata records the argv), and its LLM calls."""
    out, cache = tmp_path / "tables" / "custom-test", tmp_path / "made.sqlite"
    sets = [
        "backend=fake", "encoder=hashing", "memory=no_ce", f"question_bank.cache_dir={tmp_path / 'banks'}",
        f"benchmark.options.path={EXAMPLE}", f"cache.path={cache}",
    ]  # fmt: skip
    cmd = [
        sys.executable, "evaluate.py", "frontier", "--benchmark", "custom", "--split", "test",
        "--baselines", "all-low,all-mid;fixed:L,H,L,L,M", "--n-boot", "50", "--no-progress",
        "--out", str(out),
        *[a for s in sets for a in ("--set", s)],
    ]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, env=cli_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    pack = export_pack(
        cache, tmp_path / "packs" / "calls.pack.gz", filters=Filters(models=("fake-llm",))
    ).path
    return out, pack


def test_a_table_replays_from_its_pack_and_a_changed_cell_is_named(tmp_path, capsys):
    rt = load_script("replay_tables")
    table, pack = _table(tmp_path)
    args = ["--tables", str(table), "--packs", str(pack)]
    assert rt.main([*args, "--work", str(tmp_path / "w1"), "--report", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert "OK   " in out and "1 of 1 tables replayed with 0 cells differing" in out
    # A cell that the pipeline does not give back fails the check, and the table is named.
    rows = list(csv.DictReader((table / "frontier.csv").open()))
    rows[0]["f1"] = str(float(rows[0]["f1"]) + 0.25)
    with (table / "frontier.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert rt.main([*args, "--work", str(tmp_path / "w2")]) == 1
    assert f"FAIL {table}" in capsys.readouterr().out


def test_the_replay_argv_keeps_what_the_table_holds_and_sets_where_it_goes():
    rt = load_script("replay_tables")
    meta = {
        "argv": [
            "evaluate.py",
            "frontier",
            "--limit",
            "40",
            "--out",
            "results/x",
            "--no-progress",
            "--chunk=5",
        ]
    }
    argv = rt.replay_argv(meta, Path("results/x"), Path("/tmp/o"), Path("/tmp/c.sqlite"))
    assert argv == [
        "frontier", "--limit", "40", "--chunk=5", "--out", "/tmp/o", "--expect", "results/x", "--replay",
        "--no-progress", "--set", "cache.path=/tmp/c.sqlite",
    ]  # fmt: skip


def test_each_table_replays_from_its_own_pack_set_in_its_own_cache(tmp_path):
    # The study's tables (AMD) and the earlier frontier tables (Intel) hold different TextRank keyphrases
    # for the same evidence: one cache for both would replay one set with the other's values.
    rt = load_script("replay_tables")
    outcomes, frontier = ROOT / "results" / "outcomes" / "locomo-test", ROOT / "results" / "frontier" / "x"
    groups = dict((tuple(members), packs) for packs, members in rt.pack_sets([outcomes, frontier], None))
    assert all(p.parent.name == "powered" for p in groups[(outcomes,)])
    assert groups[(frontier,)] and all(p.parent.name == "packs" for p in groups[(frontier,)])
    named = [tmp_path / "a.pack.gz"]
    assert rt.pack_sets([outcomes, frontier], named) == [(named, [outcomes, frontier])]
    with pytest.raises(SystemExit, match="no default pack set covers"):
        rt.pack_sets([tmp_path / "elsewhere"], None)
