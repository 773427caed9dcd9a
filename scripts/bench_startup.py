"""What a process pays before it does anything: the stemmer import, and a ``train.py`` launch that is refused.

Each case runs in a fresh interpreter, the cases interleaved, ``--repeats`` times; the table gives the median
wall and CPU seconds (user + system of the child). Two pairs are measured side by side:

  * **stemmer**: ``from nltk.stem import PorterStemmer`` (all of NLTK, scipy.stats with it) against
    ``common.stemming`` (NLTK's Porter stemmer alone);
  * **refused launch**: ``train.py`` on the fake stack with ``question_bank.k=0`` (a config error, found after
    the pipeline's modules are imported) as it runs now, and with ``import nltk`` done first: what every
    ``train.py``/``evaluate.py`` process paid when the stemmer came from ``nltk.stem``.

Usage: python scripts/bench_startup.py [--repeats 7] [--out results/bench/startup.json]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TRAIN_ARGS = [
    "backend=fake", "encoder=hashing", "memory=no_ce", "train=tiny", "ppo=tiny",
    "question_bank.max_samples=1", "question_bank.k=0",
]  # fmt: skip
RUN_TRAIN = (
    "import runpy, sys; sys.argv = [{script!r}, *{args!r}]; runpy.run_path({script!r}, run_name='__main__')"
)


def cases(workdir: Path) -> dict[str, str]:
    """``{name: python -c source}`` of every case."""
    args = [*TRAIN_ARGS, f"runs_dir={workdir / 'runs'}", f"cache.path={workdir / 'calls.sqlite'}",
            f"question_bank.cache_dir={workdir / 'banks'}"]  # fmt: skip
    train = RUN_TRAIN.format(script=str(ROOT / "train.py"), args=args)
    return {
        "stemmer: nltk.stem": "from nltk.stem import PorterStemmer; PorterStemmer().stem('running')",
        "stemmer: common.stemming": "from common.stemming import porter_stem; porter_stem('running')",
        "refused train.py launch, all of NLTK imported first": "import nltk; " + train,
        "refused train.py launch": train,
    }


def run_once(source: str, env: dict[str, str]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds and exit code of ``python -c source`` in a fresh interpreter."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", source], cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", type=Path, default=None, help="also write the rows as JSON here")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")

    from common.cpu import cpu_record

    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "WANDB_MODE": "disabled", "PYTHONHASHSEED": "0", "PYTHONPATH": str(ROOT)}  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        todo = cases(Path(tmp))
        samples: dict[str, list[tuple[float, float, int]]] = {name: [] for name in todo}
        for _ in range(args.repeats):  # interleaved: a slower minute of the machine hits every case alike
            for name, source in todo.items():
                samples[name].append(run_once(source, env))
    rows = []
    for name, runs in samples.items():
        codes = sorted({code for _, _, code in runs})
        rows.append({
            "case": name,
            "wall_s": statistics.median(w for w, _, _ in runs),
            "cpu_s": statistics.median(c for _, c, _ in runs),
            "exit_codes": codes,
            "repeats": len(runs),
        })  # fmt: skip
    machine = cpu_record()
    print(f"CPU: {machine['model']} ({machine['cores']} cores; {' '.join(map(str, machine['isa_flags']))})")
    print(f"{'case':<55} {'wall s':>7} {'CPU s':>7}  exit")
    for row in rows:
        print(f"{row['case']:<55} {row['wall_s']:7.2f} {row['cpu_s']:7.2f}  {row['exit_codes']}")
    if args.out:
        from common.atomic import atomic_write_json

        atomic_write_json(args.out, {"args": {"repeats": args.repeats}, "machine": machine, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
