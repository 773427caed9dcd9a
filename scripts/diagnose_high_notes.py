"""Do the HIGH summary's notes help the answerer? Score what the notes say against the answerer.

For the questions of a headroom run, the all-HIGH pipeline is replayed (from the call cache: run
``evaluate.py headroom`` with the same settings first, or every Qwen call is recomputed) and the
memory text the answerer read is split into the HIGH summary's notes and the LOW template behind
them. Per question and category it reports:

  * **notes answer F1**: token F1 of the notes' own ``Answer:`` line (``high_notes=answer``), i.e.
    what the HIGH tier proposes before the answerer reads anything;
  * **answerer F1** at all-LOW and all-HIGH, read from the headroom records (``--records``).

If the notes' answers score below the answerer reading the LOW memory, the notes can only steer
the answerer away from what it would have found itself (issue #13).

Usage: python scripts/diagnose_high_notes.py --records DIR [--benchmark locomo] [--split test]
           [--limit 100] [--experiment cpu_quality] [--set K=V ...] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.metrics import token_f1
from common.atomic import atomic_write_json
from envs.components import make_components
from envs.question_bank import question_bank_from
from evaluation.frontier_config import script_config
from evaluation.frontier_runner import RecordStore
from evaluation.headroom import stratified
from modules.tier import MODULE_ORDER, Tier

_ANSWER_RE = re.compile(r"Answer:\s*(.*)")


def notes_answer(memory_text: str) -> str:
    """The last ``Answer:`` line of the notes in front of the template (``""`` if none)."""
    notes = memory_text.split("\n\nQuestion:", 1)[0]
    found = _ANSWER_RE.findall(notes)
    return found[-1].strip() if found else ""


def _records(path: Path) -> dict[str, dict[str, Any]]:
    store = RecordStore(path)  # <path> or its committed <path>.gz
    if not store.path.is_file():
        raise SystemExit(f"error: no headroom records at {path} (run evaluate.py headroom first)")
    return store.records


def main(argv: list[str] | None = None) -> int:
    """Replay all-HIGH, score the notes' answers and print them next to the answerer's F1."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", required=True, help="headroom records dir (all-LOW.jsonl, all-HIGH.jsonl)")
    p.add_argument("--benchmark", default="locomo")
    p.add_argument("--split", default="test")
    p.add_argument("--limit", type=int, default=100, help="questions, stratified as in headroom")
    p.add_argument("--experiment", default="cpu_quality")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--out", default=None, help="write per-question results as JSON")
    args = p.parse_args(argv)
    low = _records(Path(args.records) / "all-LOW.jsonl")
    high = _records(Path(args.records) / "all-HIGH.jsonl")
    cfg = script_config(args.experiment, args.set, args.benchmark)
    cfg["question_bank"]["max_samples"] = None
    components = make_components(cfg)
    try:
        items = question_bank_from(cfg, args.split, components.encoder, progress=False)
        items = stratified(items, args.limit, lambda it: str(it.question.category))
        rows = []
        for it in tqdm(items, desc="all-HIGH replay", unit="q"):
            q = it.question
            qid = str(q.question_id)
            if qid not in low or qid not in high:
                continue
            run = components.pipeline.begin(q.question, it.evidence, q.question_date)
            for _ in MODULE_ORDER:
                run.step(Tier.HIGH)
            proposed = notes_answer(run.result().memory_text)
            rows.append(
                {
                    "question_id": qid,
                    "category": str(q.category),
                    "notes_answer": proposed,
                    "notes_f1": token_f1(proposed, str(q.answer)),
                    "low_f1": float(low[qid]["f1"]),
                    "high_f1": float(high[qid]["f1"]),
                }
            )
    finally:
        components.close()
    if not rows:
        raise SystemExit("error: none of the selected questions has both an all-LOW and an all-HIGH record")
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[r["category"]].append(r)
        groups["all"].append(r)
    print(f"{'category':>8} {'n':>4} {'notes answer F1':>16} {'all-LOW F1':>11} {'all-HIGH F1':>12}")
    for cat in sorted(groups, key=lambda c: (c == "all", c)):
        g = groups[cat]
        means = [statistics.mean(r[k] for r in g) for k in ("notes_f1", "low_f1", "high_f1")]
        print(f"{cat:>8} {len(g):>4} {means[0]:>16.3f} {means[1]:>11.3f} {means[2]:>12.3f}")
    if args.out:
        atomic_write_json(Path(args.out), {"rows": rows, "args": vars(args)})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
