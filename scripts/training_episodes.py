#!/usr/bin/env python
"""What a router chose while it trained: tier shares by λ, block of episodes and question category.

    python scripts/training_episodes.py runs/cpuq2/<run> --block 80          # markdown tables + PNG

Reads the run's ``episodes.jsonl`` and, for a resumed run, its ``episodes-from-<step>.jsonl``
pieces (one line per training episode, written by ``EpisodeStatsCallback``). Actions in it are
sampled from the stochastic policy, so the shares follow the policy's probabilities. It prints

* per block of ``--block`` episodes and per λ: episodes, mean F1, and the LOW/MID/HIGH shares
  pooled over the five modules;
* for the last ``--last`` episodes: the shares per module, per λ and per question category
  (does the router route the temporal questions differently?);
* what each tier earned while it trained: per λ and module, the mean F1 of the episodes that
  chose each tier minus their question's mean F1 over the whole run, with the episode count
  (a tier that earns more but was rarely tried is an exploration shortfall, not a missing signal);

and writes ``training_episodes.png`` (pooled shares over training, one panel per λ) in the run
directory (``--out`` to change).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from modules.tier import MODULE_ORDER as MODULES
from modules.tier import Tier

#: The one-letter tier spelling of the log (``modules.tier.tiers_label``).
TIERS = tuple(t.name[0] for t in Tier)


def piece_key(path: Path) -> int:
    """``episodes.jsonl`` first, then the resumed pieces by their starting step."""
    stem = path.stem
    return int(stem.rsplit("-", 1)[1]) if stem.startswith("episodes-from-") else -1


def load_episodes(run_dir: Path) -> list[dict[str, Any]]:
    """Every episode of the run in step order; a piece's episodes past the next piece's start
    (written by a run killed after its last checkpoint) are dropped, as the resumed run redid them.

    Raises:
        FileNotFoundError: If the run has no ``episodes*.jsonl``.
        ValueError: On a malformed line (file and line number named).
    """
    pieces = sorted(run_dir.glob("episodes*.jsonl"), key=piece_key)
    if not pieces:
        raise FileNotFoundError(f"{run_dir}: no episodes*.jsonl (runs before this log existed have none)")
    out: list[dict[str, Any]] = []
    for i, path in enumerate(pieces):
        stop = piece_key(pieces[i + 1]) if i + 1 < len(pieces) else None
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                ep = json.loads(line)
                step, tiers = int(ep["step"]), str(ep["tiers"]).split(",")
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                raise ValueError(f"{path}:{n}: malformed episode line ({exc})") from exc
            if len(tiers) != len(MODULES) or not set(tiers) <= set(TIERS):
                raise ValueError(f"{path}:{n}: tiers {ep['tiers']!r} is not five of L/M/H")
            if stop is None or step <= stop:
                out.append(ep)
    return out


def shares(episodes: Iterable[dict[str, Any]], module: str | None = None) -> dict[str, float]:
    """LOW/MID/HIGH shares over the episodes, of one module or pooled over all five."""
    counts = dict.fromkeys(TIERS, 0)
    for ep in episodes:
        tiers = ep["tiers"].split(",")
        for m, t in zip(MODULES, tiers, strict=True):
            if module is None or m == module:
                counts[t] += 1
    total = sum(counts.values()) or 1
    return {t: counts[t] / total for t in TIERS}


def _fmt(s: dict[str, float]) -> str:
    return " / ".join(f"{s[t]:.2f}" for t in TIERS)


def block_table(episodes: Sequence[dict[str, Any]], block: int) -> list[str]:
    """Markdown rows: per block of episodes and λ, the count, mean F1 and pooled L/M/H shares."""
    lines = ["| episodes | λ | n | F1 | L / M / H |", "|---|---|---|---|---|"]
    for start in range(0, len(episodes), block):
        chunk = episodes[start : start + block]
        by_lam: dict[float, list[dict[str, Any]]] = defaultdict(list)
        for ep in chunk:
            by_lam[float(ep["cost_lambda"])].append(ep)
        for lam in sorted(by_lam):
            eps = by_lam[lam]
            f1 = sum(float(e["f1"]) for e in eps) / len(eps)
            span = f"{start + 1}-{start + len(chunk)}"
            lines.append(f"| {span} | {lam:g} | {len(eps)} | {f1:.3f} | {_fmt(shares(eps))} |")
    return lines


def final_table(episodes: Sequence[dict[str, Any]]) -> list[str]:
    """Markdown rows: per λ and category (and all), L/M/H shares of every module."""
    lines = ["| λ | category | n | " + " | ".join(MODULES) + " |", "|---|---|---|" + "---|" * len(MODULES)]
    groups: dict[tuple[float, str], list[dict[str, Any]]] = defaultdict(list)
    for ep in episodes:
        lam = float(ep["cost_lambda"])
        groups[(lam, "all")].append(ep)
        groups[(lam, str(ep["category"]))].append(ep)
    for (lam, cat), eps in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] != "all", kv[0][1])):
        cells = " | ".join(_fmt(shares(eps, m)) for m in MODULES)
        lines.append(f"| {lam:g} | {cat} | {len(eps)} | {cells} |")
    return lines


def tier_gains(episodes: Sequence[dict[str, Any]]) -> dict[tuple[float, str, str], tuple[float, int]]:
    """Per (λ, module, tier): mean F1 minus the question's run-mean F1, and the episode count.

    Subtracting each question's mean over all of the run's episodes (every λ) removes question
    difficulty, which otherwise dominates: a tier tried mostly on easy questions would look good.
    A question seen once contributes 0 (its own mean). The gains are marginal: an episode counts
    for all five modules, so tiers that were chosen together share one another's gains.
    """
    by_q: dict[str, list[float]] = defaultdict(list)
    for ep in episodes:
        by_q[str(ep["question_id"])].append(float(ep["f1"]))
    q_mean = {q: sum(v) / len(v) for q, v in by_q.items()}
    acc: dict[tuple[float, str, str], list[float]] = defaultdict(list)
    for ep in episodes:
        gain = float(ep["f1"]) - q_mean[str(ep["question_id"])]
        for m, t in zip(MODULES, ep["tiers"].split(","), strict=True):
            acc[(float(ep["cost_lambda"]), m, t)].append(gain)
    return {k: (sum(v) / len(v), len(v)) for k, v in acc.items()}


def gains_table(episodes: Sequence[dict[str, Any]]) -> list[str]:
    """Markdown rows: per λ and module, each tier's F1 gain over its questions' means (episodes)."""
    gains = tier_gains(episodes)
    lines = ["| λ | module | LOW | MID | HIGH |", "|---|---|---|---|---|"]
    for lam in sorted({k[0] for k in gains}):
        for m in MODULES:
            cells = [
                f"{gains[(lam, m, t)][0]:+.3f} ({gains[(lam, m, t)][1]})" if (lam, m, t) in gains else "–"
                for t in TIERS
            ]
            lines.append(f"| {lam:g} | {m} | " + " | ".join(cells) + " |")
    return lines


def plot(episodes: Sequence[dict[str, Any]], block: int, path: Path) -> Path:
    """Pooled L/M/H shares per block of each λ's episodes, one stacked-area panel per λ."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lams = sorted({float(e["cost_lambda"]) for e in episodes})
    fig, axes = plt.subplots(1, len(lams), figsize=(3.6 * len(lams), 3.2), sharey=True, squeeze=False)
    colours = {"L": "#c6dbef", "M": "#6baed6", "H": "#08519c"}
    for ax, lam in zip(axes[0], lams, strict=True):
        eps = [e for e in episodes if float(e["cost_lambda"]) == lam]
        xs, ys = [], {t: [] for t in TIERS}  # type: ignore[var-annotated]
        per = max(1, block // max(1, len(lams)))  # about `block` episodes of all λ per point
        for start in range(0, len(eps), per):
            chunk = eps[start : start + per]
            s = shares(chunk)
            xs.append(int(chunk[-1]["step"]))
            for t in TIERS:
                ys[t].append(s[t])
        ax.stackplot(
            xs, *[ys[t] for t in TIERS], labels=["LOW", "MID", "HIGH"], colors=[colours[t] for t in TIERS]
        )
        ax.set_title(f"λ = {lam:g} ({len(eps)} episodes)", fontsize=9)
        ax.set_xlabel("timestep")
        ax.set_ylim(0, 1)
    axes[0][0].set_ylabel("tier share (5 modules pooled)")
    axes[0][-1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    """Print the tables and write the plot; returns the exit code."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("run_dir", type=Path, help="a training run directory")
    parser.add_argument("--block", type=int, default=80, help="episodes per row of the training table")
    parser.add_argument("--last", type=int, default=120, help="episodes in the final per-module table")
    parser.add_argument(
        "--out", type=Path, default=None, help="PNG path (default <run_dir>/training_episodes.png)"
    )
    args = parser.parse_args(argv)
    if args.block < 1 or args.last < 1:
        parser.error("--block and --last must be >= 1")
    try:
        episodes = load_episodes(args.run_dir)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    first, last = episodes[0]["step"], episodes[-1]["step"]
    print(f"{args.run_dir}: {len(episodes)} training episodes, steps {first}-{last}\n")
    print("\n".join(block_table(episodes, args.block)))
    print(f"\nlast {min(args.last, len(episodes))} episodes, L / M / H share per module:\n")
    print("\n".join(final_table(episodes[-args.last :])))
    print("\nF1 each tier earned (mean F1 minus the question's run-mean F1; episodes in brackets):\n")
    print("\n".join(gains_table(episodes)))
    png = plot(episodes, args.block, args.out or args.run_dir / "training_episodes.png")
    print(f"\nwrote {png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
