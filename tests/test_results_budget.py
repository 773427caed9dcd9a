"""The repository fits where it must go: the tracked tree within its budget, per-question records compressed,
no full PPO checkpoint in the tree.

A GPU machine for checks accepts a working tree of 64 MiB; the tracked tree is held to 60 MB so that the
measurements still to come have room. Per-question records are committed gzip-compressed
(``scripts/compact_results.py``) and every reader takes both forms; full PPO checkpoints stay in the history
(docs/results/locomo.md says how to fetch run 6's to continue it).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The budget of the tracked tree. Raising it is a decision: every clone and every GPU check carries it.
BUDGET_BYTES = 60_000_000


def _tracked(under: str = ".") -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", "-z", under], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if out.returncode != 0:  # not a git checkout (an sdist): every file on disk counts
        return [p for p in (ROOT / under).rglob("*") if p.is_file() and ".git" not in p.parts]
    return [ROOT / name for name in out.stdout.split("\0") if name and (ROOT / name).is_file()]


def test_the_tracked_tree_fits_its_budget() -> None:
    files = _tracked()
    total = sum(p.stat().st_size for p in files)
    largest = sorted(files, key=lambda p: p.stat().st_size)[-5:]
    assert total <= BUDGET_BYTES, (
        f"the tracked tree holds {total / 1e6:.1f} MB, over its {BUDGET_BYTES / 1e6:.0f} MB budget; largest: "
        + ", ".join(f"{p.relative_to(ROOT)} ({p.stat().st_size / 1e6:.1f} MB)" for p in largest)
    )


def test_committed_records_are_compressed() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "compact_results.py"), "--check"],
                         capture_output=True, text=True, check=False)  # fmt: skip
    assert out.returncode == 0, f"run scripts/compact_results.py; uncompressed:\n{out.stdout[:2000]}"


def test_no_full_checkpoint_in_the_tree() -> None:
    dirs = sorted({str(p.relative_to(ROOT)).split("/checkpoints/")[0] for p in _tracked("results")
                   if "/checkpoints/" in str(p.relative_to(ROOT))})  # fmt: skip
    assert not dirs, f"full PPO checkpoints committed (they belong in the history): {dirs}"


def test_compressed_records_read_and_write_like_plain_ones(tmp_path) -> None:
    from evaluation.frontier_runner import RecordStore, record_files, record_stem

    plain = RecordStore(tmp_path / "fixed-LLLLL.jsonl")
    plain.add([{"question_id": "q2", "f1": 0.5}, {"question_id": "q1", "f1": 1.0}])
    plain.save()
    sys.path.insert(0, str(ROOT / "scripts"))
    import compact_results

    compact_results.compress(tmp_path / "fixed-LLLLL.jsonl")
    again = RecordStore(tmp_path / "fixed-LLLLL.jsonl")  # the name a run asks for finds the .gz
    assert again.path.name == "fixed-LLLLL.jsonl.gz" and again.records == plain.records
    again.add([{"question_id": "q3", "f1": 0.0}])
    again.save()
    first = (tmp_path / "fixed-LLLLL.jsonl.gz").read_bytes()
    again.save()
    assert (tmp_path / "fixed-LLLLL.jsonl.gz").read_bytes() == first  # deterministic bytes
    assert len(RecordStore(tmp_path / "fixed-LLLLL.jsonl").records) == 3
    assert not (tmp_path / "fixed-LLLLL.jsonl").exists()
    assert [record_stem(p) for p in record_files(tmp_path, "fixed-*")] == ["fixed-LLLLL"]
