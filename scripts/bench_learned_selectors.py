"""Can a selector trained in-domain pick the evidence chunks better than the retriever's own order?

Issue #13's headroom says the missing answer quality is *precision*: all-MID on only the retrieved chunks
that hold a gold turn (``evaluate.py headroom`` context ``gold filter, all-MID``) gains +0.094 F1 over
all-LOW on 100 LoCoMo test questions, while every filter tier keeps the whole neighbourhood of the answer.
A filter tier can only buy that gain if it ranks the retrieved chunks better than the retriever does.
This script trains two selectors on a train split's gold-evidence labels (a chunk is positive when it
holds a gold turn) and reports, on the evaluation splits, the share of gold turns inside each selector's
top-k next to the retriever's top-k:

  * ``lr``: logistic regression over rank, retriever score and its gap to the best, sentence-encoder
    cosine of the question with the chunk's turns (max, mean), question-word overlap (max, mean),
    whether a speaker named in the question speaks, and the number of turns;
  * ``ce``: the sentence encoder's weights (all-MiniLM-L6-v2) fine-tuned as a cross-encoder on
    (question, dated chunk) pairs with binary cross-entropy.

Usage: python scripts/bench_learned_selectors.py [--benchmark locomo] [--train-split train]
           [--eval-splits val,test] [--limit 100] [--experiment cpu_quality] [--selectors lr,ce]
           [--ce-epochs 1] [--ce-lr 3e-5] [--seed 0] [--set K=V] [--out DIR]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.recall import evidence_hit, evidence_recall
from common.atomic import atomic_write_json
from envs.components import make_components
from envs.question_bank import QuestionItem, question_bank_from
from evaluation.frontier_config import script_config
from evaluation.headroom import stratified
from memory.encoder import Encoder
from modules.nlp import content_words, short_date

#: Top-k cut-offs reported.
CUTS: tuple[int, ...] = (1, 2, 3, 5)
#: A ranking of one question's retrieved chunks: indices, best first.
Ranker = Callable[[QuestionItem], list[int]]


def labelled(items: Sequence[QuestionItem]) -> list[QuestionItem]:
    """The items whose question has gold evidence turns (the others cannot be scored)."""
    return [it for it in items if it.question.evidence_ids]


def labels(item: QuestionItem) -> list[float]:
    """1.0 for each retrieved chunk that holds a gold evidence turn, else 0.0."""
    return [float(evidence_hit(item.question.evidence_ids, (ev,)) or 0.0) for ev in item.evidence]


def features(item: QuestionItem, encoder: Encoder) -> np.ndarray:
    """One row of the ``lr`` selector's features per retrieved chunk (see the module docstring)."""
    query = item.question.question
    words = set(content_words(query))
    names = {w.strip("?,.'s") for w in query.split() if w[:1].isupper()}
    q_vec = encoder.encode([query])[0]
    best = max(ev.score for ev in item.evidence)
    rows = []
    for rank, ev in enumerate(item.evidence):
        turns = [t for t in ev.text.splitlines() if t.strip()] or [ev.text]
        cos = encoder.encode(turns) @ q_vec
        overlap = [len(words & set(content_words(t))) / max(len(words), 1) for t in turns]
        speaks = float(any(t.split(" said")[0].strip() in names for t in turns))
        rows.append(
            [
                rank,
                1.0 / (1 + rank),
                ev.score,
                best - ev.score,
                cos.max(),
                cos.mean(),
                max(overlap),
                float(np.mean(overlap)),
                speaks,
                len(turns),
            ]
        )
    return np.asarray(rows, dtype=np.float64)


def train_lr(train: Sequence[QuestionItem], encoder: Encoder, seed: int) -> Ranker:
    """Fit the ``lr`` selector; return a ranker by its predicted probability (ties by rank)."""
    from sklearn.linear_model import LogisticRegression

    x = np.vstack([features(it, encoder) for it in tqdm(train, desc="lr features", unit="q")])
    y = np.concatenate([labels(it) for it in train])
    mu, sd = x.mean(0), x.std(0) + 1e-9
    clf = LogisticRegression(max_iter=2000, random_state=seed).fit((x - mu) / sd, y)

    def rank(item: QuestionItem) -> list[int]:
        p = clf.predict_proba((features(item, encoder) - mu) / sd)[:, 1]
        return sorted(range(len(p)), key=lambda i: (-p[i], i))

    return rank


def _dated(ev: Any) -> str:
    date = short_date(ev.timestamp)
    return (f"({date}) " if date else "") + " ".join(ev.text.split())


def train_ce(
    train: Sequence[QuestionItem], *, epochs: int, lr: float, batch: int, seed: int, log: dict[str, Any]
) -> Ranker:
    """Fine-tune all-MiniLM-L6-v2 as a cross-encoder; return a ranker by its logit (ties by rank)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from memory.encoder import minilm_model_dir

    torch.manual_seed(seed)
    rng = random.Random(seed)
    pairs = [
        (it.question.question, _dated(ev), y)
        for it in train
        for ev, y in zip(it.evidence, labels(it), strict=True)
    ]
    tok = AutoTokenizer.from_pretrained(minilm_model_dir())
    model = AutoModelForSequenceClassification.from_pretrained(minilm_model_dir(), num_labels=1)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    losses: list[float] = []
    model.train()
    for _ in range(epochs):
        rng.shuffle(pairs)
        for i in tqdm(range(0, len(pairs), batch), desc="ce steps", unit="step"):
            chunk = pairs[i : i + batch]
            enc = tok(
                [p[0] for p in chunk],
                [p[1] for p in chunk],
                truncation=True,
                max_length=256,
                padding=True,
                return_tensors="pt",
            )
            loss = torch.nn.functional.binary_cross_entropy_with_logits(
                model(**enc).logits.squeeze(-1), torch.tensor([p[2] for p in chunk])
            )
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss))
    log.update(
        pairs=len(pairs), positives=sum(p[2] for p in pairs), last_100_loss=float(np.mean(losses[-100:]))
    )
    model.eval()

    def rank(item: QuestionItem) -> list[int]:
        with torch.no_grad():
            enc = tok(
                [item.question.question] * len(item.evidence),
                [_dated(e) for e in item.evidence],
                truncation=True,
                max_length=256,
                padding=True,
                return_tensors="pt",
            )
            s = model(**enc).logits.squeeze(-1).tolist()
        return sorted(range(len(s)), key=lambda i: (-s[i], i))

    return rank


def top_k_recall(items: Sequence[QuestionItem], rankers: dict[str, Ranker]) -> dict[str, dict[str, float]]:
    """``{selector: {"top-k": mean gold-turn recall}}``, with the retriever's order as ``retriever``."""
    out: dict[str, dict[str, list[float]]] = {name: {} for name in ["retriever", *rankers]}
    for it in items:
        orders = {"retriever": list(range(len(it.evidence)))} | {n: r(it) for n, r in rankers.items()}
        for name, order in orders.items():
            for k in CUTS:
                kept = tuple(it.evidence[i] for i in order[:k])
                out[name].setdefault(f"top-{k}", []).append(
                    evidence_recall(it.question.evidence_ids, kept) or 0.0
                )
    return {n: {k: float(np.mean(v)) for k, v in m.items()} for n, m in out.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", default="locomo")
    parser.add_argument("--train-split", default="train")
    parser.add_argument("--eval-splits", default="val,test")
    parser.add_argument("--limit", type=int, default=100, help="evaluation questions, stratified as headroom")
    parser.add_argument("--train-limit", type=int, default=None, help="first N training questions")
    parser.add_argument("--experiment", default="cpu_quality", help="configs/experiment/NAME, or 'none'")
    parser.add_argument("--selectors", default="lr,ce", help="comma list of lr, ce")
    parser.add_argument("--ce-epochs", type=int, default=1)
    parser.add_argument("--ce-lr", type=float, default=3e-5)
    parser.add_argument("--ce-batch", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override")
    parser.add_argument("--out", default="runs/learned_selectors")
    args = parser.parse_args(argv)
    selectors = [s.strip() for s in args.selectors.split(",") if s.strip()]
    unknown = sorted(set(selectors) - {"lr", "ce"})
    if unknown:
        parser.error(f"--selectors: unknown {unknown} (known: lr, ce)")
    cfg = script_config(args.experiment, args.set, args.benchmark)
    components = make_components(cfg)
    log: dict[str, Any] = {}
    try:
        train = labelled(question_bank_from(cfg, args.train_split, components.encoder, progress=False))
        train = train[: args.train_limit]
        start = time.perf_counter()
        rankers: dict[str, Ranker] = {}
        if "lr" in selectors:
            rankers["lr"] = train_lr(train, components.encoder, args.seed)
        if "ce" in selectors:
            rankers["ce"] = train_ce(
                train, epochs=args.ce_epochs, lr=args.ce_lr, batch=args.ce_batch, seed=args.seed, log=log
            )
        log["train_seconds"] = time.perf_counter() - start
        results = {}
        for split in [s.strip() for s in args.eval_splits.split(",") if s.strip()]:
            items = question_bank_from(cfg, split, components.encoder, progress=False)
            items = labelled(stratified(items, args.limit, lambda it: str(it.question.category)))
            results[split] = {"n": len(items), "recall": top_k_recall(items, rankers)}
    finally:
        components.close()
    print(f"\n{args.benchmark}: trained on {len(train)} {args.train_split} questions ({log})")
    print("| split | selector | " + " | ".join(f"top-{k}" for k in CUTS) + " |")
    print("|---|---|" + "---|" * len(CUTS))
    for split, res in results.items():
        for name, rec in res["recall"].items():
            print(
                f"| {split} (n={res['n']}) | {name} | "
                + " | ".join(f"{rec[f'top-{k}']:.3f}" for k in CUTS)
                + " |"
            )
    out = Path(args.out) / f"learned_selectors_{args.benchmark}.json"
    atomic_write_json(out, {"args": vars(args), "train": {"n": len(train), **log}, "results": results})
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
