#!/usr/bin/env python
"""Run the powered study (``configs/study/powered.yaml``) in resumable blocks, and say how far it is.

Every block is one ``evaluate.py frontier`` over the next stratified ``block`` questions of a split with
every designed path, on the study's engine, into the split's output dir: a complete outcome table over more
questions each time. After each block its records are compressed and the new calls exported as a delta pack,
so that a commit carries the piece and the next machine resumes from it (``run`` imports the study's packs
first).
Stopping (Ctrl-C, or ``kill PID``: SIGTERM, the signal a background job still gets, since a shell starts
those with Ctrl-C's SIGINT ignored) saves the finished chunks, compresses the records and exports the delta
pack, then exits with 130 or 143; the unsaved chunk's finished calls are in the cache, so ``run`` continues
from there.

    python scripts/powered_study.py status
    .venv-vllm/bin/python scripts/powered_study.py run --minutes 100     # blocks until ~100 minutes are spent
    .venv-vllm/bin/python scripts/powered_study.py run --benchmark locomo --split test --blocks 1
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "scripts"))

STUDY = ROOT / "configs" / "study" / "powered.yaml"


@dataclass(frozen=True)
class Piece:
    """One (benchmark, split) of the study: its question count and how many have every path's outcome."""

    benchmark: str
    split: str
    overrides: tuple[str, ...]
    out: Path
    n_questions: int
    done: int  # questions with a record on every designed path
    per_path: dict[str, int]
    fingerprint: str  # the records fingerprint of the study's current config and code: what `done` counts
    stale: tuple[str, ...]  # other fingerprints on disk (an earlier config or code): not counted
    failed: int = 0  # counted outcomes with a failed LLM call (a parse failure, or an engine error)

    @property
    def complete(self) -> bool:
        """Every question has every path's outcome."""
        return self.done >= self.n_questions


def load_study(path: Path = STUDY) -> dict[str, Any]:
    """The study's YAML, checked for the keys this script reads.

    Raises:
        SystemExit: A key is missing or of the wrong type (the file and key are named).
    """
    study = yaml.safe_load(path.read_text())
    need = {
        "pack_models": list,
        "pack_local": list,
        "experiment": str,
        "engine": list,
        "pipeline": list,
        "concurrency": int,
        "paths": str,
        "block": int,
        "chunk": int,
        "benchmarks": list,
        "out": str,
        "cache": str,
        "packs": str,
    }
    for key, kind in need.items():
        if not isinstance(study.get(key), kind):
            raise SystemExit(f"error: {path}: '{key}' must be a {kind.__name__}, got {study.get(key)!r}")
    for i, bench in enumerate(study["benchmarks"]):
        if not isinstance(bench.get("name"), str) or not isinstance(bench.get("splits"), list):
            raise SystemExit(f"error: {path}: benchmarks[{i}] needs 'name' and a list of 'splits'")
    return study


def path_run_ids(paths: str) -> list[str]:
    """The record-file stems (``fixed-LMMMM``) of the designed paths."""
    from evaluation.frontier_runner import safe_id
    from evaluation.frontier_systems import fixed_path_runs

    try:
        return [safe_id(run.run_id) for run in fixed_path_runs(paths)]
    except ValueError as exc:
        raise SystemExit(f"error: the study's paths must be fixed tier paths: {exc}") from None


def block_overrides(study: dict[str, Any], bench_set: Sequence[str]) -> list[str]:
    """The config overrides of one benchmark's blocks: the engine, the pipeline, then the benchmark's own."""
    return [*study["engine"], *study["pipeline"], *bench_set]


def piece_config(study: dict[str, Any], bench: dict[str, Any]) -> dict[str, Any]:
    """The resolved config of one benchmark's blocks, as ``evaluate.py frontier`` builds it from the argv."""
    from evaluation.frontier_config import script_config

    return script_config(study["experiment"], block_overrides(study, bench.get("set", [])), bench["name"])


def split_questions(study: dict[str, Any], bench: dict[str, Any], split: str) -> tuple[list[str], str]:
    """The split's question ids (every question of its samples) and the records fingerprint they get now.

    The fingerprint is the one ``evaluate.py frontier`` computes for the study's blocks: the record-relevant
    config and the data checksums, so a changed config or module code gives a new one.
    """
    from benchmarks.registry import get_benchmark
    from common.provenance import data_checksums
    from evaluation.frontier_runner import record_fingerprint

    cfg = piece_config(study, bench)
    opts = dict((cfg.get("benchmark") or {}).get("options") or {})
    data = get_benchmark(bench["name"], data_dir=cfg.get("data_dir"), **opts)
    qids = [str(q.question_id) for sample in data.load(split) for q in sample.questions]
    return qids, record_fingerprint(cfg, data_checksums(data.data_files()))


def piece_status(study: dict[str, Any], bench: dict[str, Any], split: str, run_ids: list[str]) -> Piece:
    """How far one (benchmark, split) is, from the record files of the current fingerprint."""
    from evaluation.frontier_runner import RecordStore

    out = ROOT / study["out"] / f"{bench['name']}-{split}"
    ids, fp = split_questions(study, bench, split)
    qids = set(ids)
    on_disk = sorted(p.name for p in (out / "records").glob("*") if p.is_dir())
    per_path: dict[str, int] = {}
    have: set[str] | None = None
    failed = 0
    for rid in run_ids:
        records = RecordStore(out / "records" / fp / split / f"{rid}.jsonl").records
        got = set(records) & qids
        per_path[rid] = len(got)
        have = got if have is None else have & got
        failed += sum(1 for q in got if records[q].get("failures"))
    stale = tuple(f for f in on_disk if f != fp)
    overrides = tuple(bench.get("set", []))
    done = len(have or ())
    return Piece(bench["name"], split, overrides, out, len(qids), done, per_path, fp, stale, failed)


def statuses(study: dict[str, Any]) -> list[Piece]:
    """Every piece of the study, in its order."""
    run_ids = path_run_ids(study["paths"])
    return [piece_status(study, b, s, run_ids) for b in study["benchmarks"] for s in b["splits"]]


def format_status(pieces: list[Piece], n_paths: int) -> str:
    """A table: per piece, questions with every path, the least-covered path, and the record fingerprints."""
    head = f"{'benchmark/split':<26} {'questions':>9} {'complete':>9} {'least path':>11} {'failed':>7}"
    lines = [f"{head}  fingerprint", "-" * 80]
    for p in pieces:
        least = min(p.per_path.values()) if p.per_path else 0
        # Records of an earlier config or code are not this config's outcomes: name them, count nothing.
        stale = f"  (not counted: {', '.join(p.stale)}, an earlier config or code)" if p.stale else ""
        name = f"{p.benchmark}/{p.split}"
        lines.append(
            f"{name:<26} {p.n_questions:>9} {p.done:>9} {least:>11} {p.failed:>7}  {p.fingerprint}{stale}"
        )
    total = sum(p.n_questions for p in pieces)
    done = sum(p.done for p in pieces)
    lines.append(
        f"outcomes: {done * n_paths:,} of {total * n_paths:,} ({n_paths} paths x {total:,} questions)"
    )
    # A failed call is an outcome too (the pipeline's degraded answer), but an engine error is not: look.
    lines.append("failed: outcomes with a failed LLM call (a record's `errors` names each); an engine")
    lines.append("error (a closed backend) is not an outcome: remove those records, `run` redoes them")
    return "\n".join(lines)


def benchmark_kernels(pieces: list[Piece]) -> dict[str, tuple[str | None, list[Path]]]:
    """Per benchmark, the vLLM CPU kernel class its tables were computed with (None: no table yet), and those
    tables.

    A benchmark's splits are one engine's: validation chooses the path and the router that test scores, so
    both must come from the same numerics. Benchmarks are separate studies (no conclusion pools them), so each
    may be another class's: the first block of a benchmark sets its class.

    Raises:
        SystemExit: Two tables of one benchmark name different classes (the files and classes are named).
    """
    import json

    from scale.vllm_kernels import kernels_of

    out: dict[str, tuple[str | None, list[Path]]] = {}
    for bench in dict.fromkeys(p.benchmark for p in pieces):
        seen: dict[str, list[Path]] = {}
        for piece in (p for p in pieces if p.benchmark == bench):
            meta = piece.out / "metadata.json"
            if not meta.is_file():
                continue
            for engine in (json.loads(meta.read_text()).get("engines") or {}).values():
                kernels = kernels_of(engine.get("numerics"))
                if kernels is not None:
                    seen.setdefault(kernels, []).append(meta)
        if len(seen) > 1:
            named = "; ".join(
                f"{k}: {', '.join(sorted({str(m) for m in v}))}" for k, v in sorted(seen.items())
            )
            raise SystemExit(
                f"error: the {bench} tables were computed with different vLLM CPU kernels ({named}); "
                "a benchmark's splits must be one engine's"
            )
        out[bench] = next(((k, sorted(set(v))) for k, v in seen.items()), (None, []))
    return out


def this_cpu() -> tuple[str, str]:
    """This CPU's vLLM kernel class and its model name."""
    from common.cpu import cpu_info
    from scale.vllm_kernels import vllm_cpu_kernels

    return vllm_cpu_kernels(), cpu_info().model


def runnable(pieces: list[Piece], here: str) -> tuple[list[Piece], dict[str, str]]:
    """The unfinished pieces a CPU of class ``here`` may compute, in the study's order, and the benchmarks it
    may not (benchmark -> their tables' class)."""
    classes = benchmark_kernels(pieces)
    skipped = {b: k for b, (k, _) in classes.items() if k is not None and k != here}
    todo = [p for p in pieces if not p.complete and p.benchmark not in skipped]
    return todo, {b: k for b, k in skipped.items() if any(not p.complete for p in pieces if p.benchmark == b)}


def kernels_lines(pieces: list[Piece]) -> list[str]:
    """Per benchmark, which vLLM CPU kernels its tables were computed with, and whether this CPU continues
    them."""
    here, model = this_cpu()
    lines = [f"vLLM CPU kernels: this CPU ({model}) runs {here}; per benchmark (a replay runs on any CPU):"]
    for bench, (kernels, _) in benchmark_kernels(pieces).items():
        if all(p.complete for p in pieces if p.benchmark == bench):
            verdict = "complete"
        elif kernels is None:
            verdict = f"no table yet: `run` would start it here as {here}"
        else:
            verdict = "`run` continues it here" if kernels == here else "`run` skips it here"
        lines.append(f"  {bench:<24} {kernels or '-':<18} {verdict}")
    return lines


def refusal(bench: str, kernels: str, tables: list[Path], here: str, model: str) -> str:
    """Why this CPU may not add blocks to a benchmark whose tables another kernel class computed."""
    shown = tables[0].relative_to(ROOT) if tables[0].is_relative_to(ROOT) else tables[0]
    return (
        f"the {bench} tables were computed with vLLM's {kernels} CPU kernels ({shown}); this CPU ({model}) "
        f"runs its {here} kernels, which round bf16 differently, so its blocks would mix two engines' "
        "answers in one benchmark. Continue it on a CPU of that class (docs/how-to/powered-study.md); "
        "replaying the tables (scripts/replay_tables.py) works on any CPU"
    )


def frontier_argv(study: dict[str, Any], piece: Piece, limit: int | None) -> list[str]:
    """``evaluate.py frontier`` arguments of one block (``limit`` None: the whole split)."""
    argv = [
        "frontier",
        "--benchmark",
        piece.benchmark,
        "--split",
        piece.split,
        "--baselines",
        study["paths"],
        "--chunk",
        str(study["chunk"]),
        "--concurrency",
        str(study["concurrency"]),
        "--out",
        str(piece.out),
    ]
    if study["experiment"] != "none":
        argv += ["--experiment", study["experiment"]]
    for ov in [*block_overrides(study, piece.overrides), f"cache.path={ROOT / study['cache']}"]:
        argv += ["--set", ov]
    if limit is not None:
        argv += ["--stratified", "--limit", str(limit)]
    return argv


def import_study_packs(study: dict[str, Any]) -> None:
    """Merge the study's committed packs into its cache (entries it holds already are skipped)."""
    from modules.cache import CallCache
    from modules.cache_pack import import_pack

    packs = sorted((ROOT / study["packs"]).glob("calls-*.pack.gz"))
    if not packs:
        return
    cache = CallCache(ROOT / study["cache"])
    try:
        added = sum(import_pack(p, cache).imported for p in packs)
    finally:
        cache.close()
    print(f"imported {len(packs)} study pack(s) into {study['cache']}: {added:,} new entries")


def export_delta(study: dict[str, Any]) -> Path | None:
    """Export the LLM calls (``pack_models``) and local-tier outputs (``pack_local``) the study's committed
    packs lack (None: nothing new)."""
    from modules.cache_pack import Filters, export_pack

    cache = ROOT / study["cache"]
    if not cache.is_file():
        return None
    dest = ROOT / study["packs"]
    dest.mkdir(parents=True, exist_ok=True)
    bases = sorted(dest.glob("calls-*.pack.gz"))
    keep = Filters(models=[str(m) for m in study["pack_models"]], local=[str(m) for m in study["pack_local"]])
    report = export_pack(cache, dest, filters=keep, base_packs=bases)
    if report.manifest["count"] == 0:  # every call is in a committed pack already: no empty delta
        report.path.unlink()
        return None
    shown = report.path.relative_to(ROOT) if report.path.is_relative_to(ROOT) else report.path
    print(f"delta pack {shown}: {report.manifest['count']:,} calls")
    return report.path


def compact(out: Path) -> None:
    """Compress the piece's new record files (committed records are gzip; readers take both)."""
    import compact_results  # a sibling script: scripts/ is on sys.path (see the top of this file)

    for path in compact_results.record_files(out):
        compact_results.compress(path)


def run(study: dict[str, Any], args: argparse.Namespace) -> int:
    """Run blocks in order until the study, the ``--blocks`` or the ``--minutes`` are used up.

    Benchmarks whose tables another vLLM CPU kernel class computed are skipped (:func:`benchmark_kernels`);
    if they are all that is left of what was asked for, nothing runs and the refusal says why.
    """
    import evaluate

    def asked(pieces: list[Piece]) -> list[Piece]:
        return [
            p
            for p in pieces
            if (not args.benchmark or p.benchmark == args.benchmark)
            and (not args.split or p.split == args.split)
        ]

    here, model = this_cpu()
    pieces = statuses(study)
    todo, skipped = runnable(pieces, here)
    left = [p for p in asked(pieces) if not p.complete]
    if left and not asked(todo):
        classes = benchmark_kernels(pieces)
        why = "; ".join(
            refusal(b, skipped[b], classes[b][1], here, model)
            for b in dict.fromkeys(p.benchmark for p in left)
        )
        raise SystemExit(f"error: nothing left that this CPU may compute: {why}")
    for bench, kernels in skipped.items():
        print(
            f"skipping {bench}: its tables are of vLLM's {kernels} CPU kernels; this CPU ({model}) "
            f"runs {here}"
        )
    import_study_packs(study)
    start, blocks, last_block_s = time.monotonic(), 0, 0.0
    while True:
        pieces = asked(runnable(statuses(study), here)[0])
        if not pieces:
            print("nothing left to run" + (" on this CPU" if skipped else ""))
            return 0
        if args.blocks is not None and blocks >= args.blocks:
            return 0
        spent = time.monotonic() - start
        if args.minutes is not None and spent + last_block_s > args.minutes * 60:
            print(
                f"stopping after {spent / 60:.0f} min: the next block would take ~{last_block_s / 60:.0f} min"
            )
            return 0
        piece = pieces[0]
        target = piece.done + study["block"]
        limit = None if target >= piece.n_questions else target
        print(
            f"\n== {piece.benchmark}/{piece.split}: block to {limit or piece.n_questions} of "
            f"{piece.n_questions} questions ({piece.done} complete)"
        )
        t0 = time.monotonic()
        argv, sys_argv = frontier_argv(study, piece, limit), sys.argv
        # The table's metadata records sys.argv: make it the command that reproduces the table (what
        # scripts/replay_tables.py reruns), not this script's.
        sys.argv = ["evaluate.py", *argv]
        try:
            code = evaluate.main(argv)
        finally:
            sys.argv = sys_argv
            compact(piece.out)
            export_delta(study)
        last_block_s = time.monotonic() - t0
        blocks += 1
        print(f"block took {last_block_s / 60:.1f} min")
        if code != 0:
            return code


def main(argv: list[str] | None = None) -> int:
    """``status`` or ``run``; returns the exit code."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("command", choices=["status", "run"])
    parser.add_argument("--study", type=Path, default=STUDY, help="the study's YAML")
    parser.add_argument("--benchmark", default=None, help="`run`: only this benchmark")
    parser.add_argument("--split", default=None, help="`run`: only this split")
    parser.add_argument("--blocks", type=int, default=None, help="`run`: at most this many blocks")
    parser.add_argument(
        "--minutes",
        type=float,
        default=None,
        help="`run`: start no block that would end after this many minutes",
    )
    args = parser.parse_args(argv)
    study = load_study(args.study)
    if args.command == "status":
        pieces = statuses(study)
        print(format_status(pieces, len(path_run_ids(study["paths"]))))
        print("\n".join(kernels_lines(pieces)))
        return 0
    stopped_by = [signal.SIGINT]

    def on_term(signum: int, frame: object) -> None:
        stopped_by[0] = signal.SIGTERM
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second kill ends it at once
        raise KeyboardInterrupt  # unwinds like Ctrl-C: the block's `finally` saves and exports

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        return run(study, args)
    except KeyboardInterrupt:
        sig = stopped_by[0]
        print(
            f"\n{sig.name}: stopped; finished chunks are saved and their calls exported (see above); "
            "`run` again continues",
            file=sys.stderr,
            flush=True,
        )
        sys.stdout.flush()
        # Everything is saved. Leave now rather than through interpreter teardown: a worker thread may still
        # be inside the engine's native code (vLLM on a CPU), and tearing down under it aborted the process
        # ("terminate called without an active exception", exit 134 instead of 143).
        os._exit(128 + int(sig))
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
