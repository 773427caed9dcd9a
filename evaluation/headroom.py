"""Headroom: how much answer quality each context buys, before any router is trained."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from benchmarks.chunking import render_turn
from benchmarks.metrics import answer_containment
from benchmarks.recall import evidence_hit
from benchmarks.types import Sample
from common.atomic import atomic_write_with
from envs.components import EnvComponents
from envs.protocols import Scorer
from envs.question_bank import QuestionItem
from evaluation.bootstrap import Estimate, bootstrap_mean, make_resampler, paired_difference
from modules.nlp import short_date
from modules.prompts import evidence_lines
from modules.tier import MODULE_ORDER, Tier, one_module_changes

T = TypeVar("T")

GOLD = "gold evidence"
RAW = "raw top-k"
#: all-MID behind a perfect filter: the upper bound of what choosing chunks can buy.
GOLD_FILTER = "gold filter, all-MID"
#: The reference every paired difference is taken against.
BASELINE = "all-LOW"
#: Metrics summarised per context (record keys).
METRICS: tuple[str, ...] = ("f1", "em", "containment", "context_tokens", "module_cost", "answer_cost")


@dataclass(frozen=True)
class Context:
    """One way of building what the answerer reads.

    Attributes:
        name: Display name (``"all-HIGH"``, ``"MID, filter=HIGH"``, ...).
        kind: ``"gold"``, ``"raw"``, ``"pipeline"`` or ``"gold_filter"`` (the pipeline on only the
            retrieved chunks that hold a gold evidence turn; on all of them when none does).
        tiers: The pipeline's tier per module (pipeline and gold-filter contexts).
    """

    name: str
    kind: str
    tiers: tuple[Tier, ...] = ()


def headroom_contexts(single_module: bool = True) -> list[Context]:
    """Gold, raw top-k, the uniform paths, the gold filter and (optionally) the single-module changes."""
    out = [Context(GOLD, "gold"), Context(RAW, "raw")]
    out += [Context(f"all-{t.name}", "pipeline", (t,) * len(MODULE_ORDER)) for t in Tier]
    out.append(Context(GOLD_FILTER, "gold_filter", (Tier.MID,) * len(MODULE_ORDER)))
    if single_module:
        changes = one_module_changes(Tier.MID, (Tier.HIGH, Tier.LOW))
        out += [Context(f"MID, {module}={t.name}", "pipeline", tiers) for module, t, tiers in changes]
    return out


def upgrade_contexts() -> list[Context]:
    """``LOW, m=MID`` per module: all-LOW with one module raised to MID.

    The cheap side of the ladder: what one module's MID buys on its own, and at what cost, when
    every other module stays at its cheapest tier (the path a cost-aware router starts from).
    Not in the default set (five more answer passes); name them in ``--contexts``.
    """
    changes = one_module_changes(Tier.LOW, (Tier.MID,))
    return [Context(f"LOW, {module}=MID", "pipeline", tiers) for module, _, tiers in changes]


def known_contexts() -> list[Context]:
    """Every context ``--contexts`` can name: the default set, then :func:`upgrade_contexts`."""
    return headroom_contexts(single_module=True) + upgrade_contexts()


def select_contexts(names: str | None, single_module: bool = True) -> list[Context]:
    """The contexts named in a comma list (``None``/``"all"``: every context).

    Raises:
        ValueError: For an unknown context name (the known ones are listed).
    """
    known = known_contexts()
    if names in (None, "", "all"):
        return headroom_contexts(single_module)
    by_name = {c.name: c for c in known}
    text = str(names).strip()
    # Names of single-module contexts contain a comma ("MID, filter=LOW"): one such name alone is
    # taken whole; lists of them are separated by ';'.
    if text in by_name:
        wanted = [text]
    else:
        wanted = [n.strip() for n in text.split(";" if ";" in text else ",") if n.strip()]
    unknown = [n for n in wanted if n not in by_name]
    if unknown:
        raise ValueError(f"unknown headroom contexts {unknown}; known: {[c.name for c in known]}")
    return [by_name[n] for n in wanted]


def gold_texts(samples: Sequence[Sample]) -> dict[str, str]:
    """``question_id -> rendered gold evidence`` (dated lines in history order; ``""`` if none).

    Dialogue turns are rendered as in the memory (``Speaker said, "..."``), document sentences
    as ``title: sentence``; each line starts with its session's date, like retrieved evidence.
    """
    out: dict[str, str] = {}
    for sample in samples:
        where: dict[str, tuple[int, str]] = {}
        for session in sample.history.sessions:
            date = short_date(session.timestamp)
            for turn in session.turns:
                text = (
                    f"{session.session_id}: {turn.text}"
                    if sample.history.kind == "document"
                    else render_turn(turn)
                )
                where[turn.turn_id] = (len(where), (f"({date}) " if date else "") + text)
        for q in sample.questions:
            found = sorted(where[e] for e in dict.fromkeys(q.evidence_ids) if e in where)
            out[q.question_id] = "\n".join(text for _, text in found)
    return out


def stratified(items: Sequence[T], limit: int | None, category: Callable[[T], str]) -> list[T]:
    """At most ``limit`` items, categories in proportion to their share (largest remainder).

    Within a category the first items in ``items`` order are taken (the question bank's seeded
    order), and the result keeps ``items`` order.
    """
    if limit is None or limit >= len(items):
        return list(items)
    if limit <= 0:
        raise ValueError(f"headroom limit must be > 0, got {limit}")
    groups: dict[str, list[int]] = defaultdict(list)
    for i, it in enumerate(items):
        groups[category(it)].append(i)
    quota = {c: limit * len(ix) / len(items) for c, ix in groups.items()}
    take = {c: int(q) for c, q in quota.items()}
    for c in sorted(quota, key=lambda c: (-(quota[c] - take[c]), c))[: limit - sum(take.values())]:
        take[c] += 1
    chosen = sorted(i for c, ix in groups.items() for i in ix[: take[c]])
    return [items[i] for i in chosen]


def evaluate_context(
    context: Context, item: QuestionItem, components: EnvComponents, gold_text: str, scorer: Scorer
) -> dict[str, Any]:
    """Answer one question bank item from ``context`` and score it (one headroom record)."""
    q = item.question
    module_cost = 0.0
    failures = 0
    if context.kind == "gold":
        text = gold_text
    elif context.kind == "raw":
        text = evidence_lines(item.evidence)
    else:
        evidence = item.evidence
        if context.kind == "gold_filter":
            evidence = tuple(e for e in evidence if evidence_hit(q.evidence_ids, (e,))) or evidence
        run = components.pipeline.begin(q.question, evidence, q.question_date)
        for tier in context.tiers:
            run.step(tier)
        result = run.result()
        text = result.memory_text
        module_cost = float(result.total_cost.value)
        failures += int(result.total_cost.failures)
    prediction, answer_cost = components.answerer.answer(q, text)
    failures += int(answer_cost.failures)
    scores = scorer(q, prediction, item.benchmark)
    return {
        "question_id": q.question_id,
        "category": str(q.category),
        "context": context.name,
        "tiers": [t.name for t in context.tiers],
        "f1": float(scores["f1"]),
        "em": float(scores.get("em", 0.0)),
        "containment": answer_containment(q, text, item.benchmark),
        "context_chars": len(text),
        "context_tokens": int(components.answerer.llm.count_tokens(text)),
        "module_cost": module_cost,
        "answer_cost": float(answer_cost.value),
        "failures": failures,
        "prediction": prediction,
        "gold": q.answer,
    }


def _bootstrap(
    records: Mapping[str, Sequence[Mapping[str, Any]]],
    question_ids: Sequence[str],
    metrics: Sequence[str],
    n_boot: int,
    seed: int,
    alpha: float,
) -> tuple[dict[str, list[Mapping[str, Any]]], dict[str, dict[str, tuple[Estimate, np.ndarray]]]]:
    """Records per context in ``question_ids`` order, and bootstrap means with replicates per metric.

    One seeded resampler for every context, so replicates pair across contexts.

    Raises:
        ValueError: A context lacks a record for one of ``question_ids``.
    """
    resampler = make_resampler(len(question_ids), n_boot=n_boot, seed=seed, alpha=alpha)
    ordered_by_context: dict[str, list[Mapping[str, Any]]] = {}
    estimates: dict[str, dict[str, tuple[Estimate, np.ndarray]]] = {}
    for name, recs in records.items():
        by_id = {str(r["question_id"]): r for r in recs}
        missing = [q for q in question_ids if q not in by_id]
        if missing:
            raise ValueError(f"headroom context {name!r} has no record for questions {missing[:5]}")
        ordered = ordered_by_context[name] = [by_id[q] for q in question_ids]
        estimates[name] = {
            m: bootstrap_mean(np.array([float(r[m]) for r in ordered]), resampler) for m in metrics
        }
    return ordered_by_context, estimates


def summarise_headroom(
    records: Mapping[str, Sequence[Mapping[str, Any]]],
    question_ids: Sequence[str],
    *,
    n_boot: int,
    seed: int,
    alpha: float,
) -> list[dict[str, Any]]:
    """One row per context: means with bootstrap CIs, paired F1/containment differences vs all-LOW.

    Args:
        records: Records by context name, each covering ``question_ids``.
        question_ids: The evaluated questions (the bootstrap resamples them, paired across contexts).
        n_boot: Bootstrap replicates.
        seed: Bootstrap seed.
        alpha: 1 - confidence level.

    Returns:
        Rows in ``records`` order with ``{metric: {mean, lo, hi, n}}``, ``vs_low`` differences,
        ``failures``, ``per_category`` F1 means and question counts.
    """
    ordered_by_context, estimates = _bootstrap(records, question_ids, METRICS, n_boot, seed, alpha)
    reps = {
        name: {m: (est.mean, rep) for m, (est, rep) in by_metric.items()}
        for name, by_metric in estimates.items()
    }
    rows: list[dict[str, Any]] = []
    for name, ordered in ordered_by_context.items():
        row: dict[str, Any] = {"context": name, "n": len(ordered)}
        for metric in METRICS:
            row[metric] = estimates[name][metric][0].to_dict()
        row["context_chars"] = float(np.mean([r["context_chars"] for r in ordered]))
        row["failures"] = int(sum(int(r["failures"]) for r in ordered))
        cats: dict[str, list[float]] = defaultdict(list)
        for r in ordered:
            cats[str(r["category"])].append(float(r["f1"]))
        row["per_category"] = {c: {"f1": float(np.mean(v)), "n": len(v)} for c, v in sorted(cats.items())}
        rows.append(row)
    if BASELINE in reps:
        for row in rows:
            row["vs_low"] = {
                m: paired_difference(*reps[row["context"]][m], *reps[BASELINE][m], alpha).to_dict()
                for m in ("f1", "containment")
            }
    return rows


#: ``(rung, dearer context, cheaper context)`` for every rung of the tier ladder: the uniform
#: rungs, then per module its MID over its LOW (all-MID against ``MID, m=LOW``) and its HIGH
#: over its MID (``MID, m=HIGH`` against all-MID), the per-module ordering the quality ladder is
#: built to show; last, per module its MID over its LOW with every other module at LOW (``LOW, m=MID``).
LADDER_STEPS: tuple[tuple[str, str, str], ...] = (
    ("all: MID over LOW", "all-MID", "all-LOW"),
    ("all: HIGH over MID", "all-HIGH", "all-MID"),
    ("all: HIGH over LOW", "all-HIGH", "all-LOW"),
    *(
        step
        for m in MODULE_ORDER
        for step in (
            (f"{m}: MID over LOW", "all-MID", f"MID, {m}=LOW"),
            (f"{m}: HIGH over MID", f"MID, {m}=HIGH", "all-MID"),
        )
    ),
    *((f"{m}: MID over LOW, rest LOW", f"LOW, {m}=MID", "all-LOW") for m in MODULE_ORDER),
)


def summarise_ladder(
    records: Mapping[str, Sequence[Mapping[str, Any]]],
    question_ids: Sequence[str],
    *,
    n_boot: int,
    seed: int,
    alpha: float,
) -> list[dict[str, Any]]:
    """Paired F1 differences along the ladder, for the rungs whose two contexts were evaluated.

    A rung is ``ordered`` when the dearer context is not worse within noise (the upper CI bound
    of ``dearer - cheaper`` is >= 0) and ``inverted`` otherwise; ``pays`` marks a lower bound > 0.
    Same resampler (seed) as :func:`summarise_headroom`, so the intervals match its table.
    """
    _, estimates = _bootstrap(records, question_ids, ("f1",), n_boot, seed, alpha)
    f1 = {name: (by_metric["f1"][0].mean, by_metric["f1"][1]) for name, by_metric in estimates.items()}
    out = []
    for step, dearer, cheaper in LADDER_STEPS:
        if dearer in f1 and cheaper in f1:
            d = paired_difference(*f1[dearer], *f1[cheaper], alpha).to_dict()
            out.append(
                {
                    "step": step,
                    "dearer": dearer,
                    "cheaper": cheaper,
                    "df1": d,
                    # a tolerance: equal records give differences like -1e-17, not an inversion
                    "ordered": d["hi"] >= -1e-12,
                    "pays": d["lo"] > 1e-12,
                }
            )
    return out


def format_ladder(steps: Sequence[Mapping[str, Any]]) -> str:
    """A markdown table of :func:`summarise_ladder` rungs."""
    lines = ["| rung | dearer − cheaper | ΔF1 [95% CI] | verdict |", "|---|---|---|---|"]
    for s in steps:
        d = s["df1"]
        verdict = ("ordered, pays" if s["pays"] else "ordered (within noise)") if s["ordered"] else "INVERTED"
        diff = f"{d['mean']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}]"
        lines.append(f"| {s['step']} | {s['dearer']} − {s['cheaper']} | {diff} | {verdict} |")
    return "\n".join(lines)


def format_headroom(rows: Sequence[Mapping[str, Any]]) -> str:
    """A markdown table of :func:`summarise_headroom` rows (F1 and its difference with 95% CIs)."""

    def ci(e: Mapping[str, float]) -> str:
        return f"{e['mean']:.3f} [{e['lo']:.3f}, {e['hi']:.3f}]"

    head = (
        "| context | F1 [95% CI] | ΔF1 vs all-LOW [95% CI] | EM | containment | context tokens "
        "| module cost | answer cost | failures |"
    )
    lines = [head, "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        diff = ci(r["vs_low"]["f1"]) if "vs_low" in r and r["context"] != BASELINE else "–"
        lines.append(
            f"| {r['context']} | {ci(r['f1'])} | {diff} | {r['em']['mean']:.3f} "
            f"| {r['containment']['mean']:.2f} "
            f"| {r['context_tokens']['mean']:.0f} | {r['module_cost']['mean']:.1f} "
            f"| {r['answer_cost']['mean']:.1f} | {r['failures']} |"
        )
    return "\n".join(lines)


def format_categories(rows: Sequence[Mapping[str, Any]]) -> str:
    """F1 per question category and context (markdown)."""
    cats = sorted({c for r in rows for c in r["per_category"]})
    counts = {c: next(r["per_category"][c]["n"] for r in rows if c in r["per_category"]) for c in cats}
    lines = [
        "| context | " + " | ".join(f"cat {c} (n={counts[c]})" for c in cats) + " |",
        "|---|" + "---|" * len(cats),
    ]
    for r in rows:
        cells = [f"{r['per_category'][c]['f1']:.3f}" if c in r["per_category"] else "–" for c in cats]
        lines.append(f"| {r['context']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_headroom(rows: Sequence[Mapping[str, Any]], path: Any, title: str) -> None:
    """Two panels: F1 with 95% CIs per context, and F1 against module cost."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["context"] for r in rows]
    f1 = np.array([r["f1"]["mean"] for r in rows])
    err = np.array(
        [[r["f1"]["mean"] - r["f1"]["lo"] for r in rows], [r["f1"]["hi"] - r["f1"]["mean"] for r in rows]]
    )
    cont = np.array([r["containment"]["mean"] for r in rows])
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 0.35 * len(rows) + 2.5))
    y = np.arange(len(rows))[::-1]
    ax1.barh(y, f1, xerr=err, color="tab:blue", alpha=0.8, label="token F1 (95% CI)")
    ax1.scatter(cont, y, color="tab:orange", zorder=3, label="answer containment")
    ax1.set_yticks(y, names)
    ax1.set_xlabel("score")
    ax1.legend(loc="lower right", fontsize=8)
    for r, f in zip(rows, f1, strict=True):
        x = r["module_cost"]["mean"]
        ax2.errorbar(x, f, yerr=[[f - r["f1"]["lo"]], [r["f1"]["hi"] - f]], fmt="o", capsize=2)
        ax2.annotate(r["context"], (x, f), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax2.set_xlabel("module cost (mean per question)")
    ax2.set_ylabel("token F1")
    fig.suptitle(title)
    fig.tight_layout()
    atomic_write_with(path, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))
    plt.close(fig)
