"""The catalogue of benchmark data files: what each is, where it officially comes from, its pinned sha256.

One owner for the facts the loaders, the fetcher (``python -m benchmarks.fetch``) and the "missing file"
errors quote. A file with a ``url`` is downloaded on demand and must match ``sha256`` byte for byte; the
URLs pin an upstream revision where the host allows it, so the checksum cannot drift under a moving
branch. A file without one is derived (a split, a re-compressed copy): the entry says how to get it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DataFile:
    """One benchmark data file.

    Attributes:
        name: File name inside the data directory.
        benchmark: The benchmark (or group) it belongs to: ``locomo``, ``longmemeval``, ``hotpotqa``, ``bgl``.
        size: Size in bytes of the pinned version; ``None`` where only its checksum is known.
        sha256: Hex digest of the pinned version.
        licence: Its licence, as upstream states it.
        source: Human-readable source (project page or paper).
        url: Direct download URL of exactly the pinned bytes; ``None`` for a file that cannot be fetched.
        how: For a file without ``url``: how a user obtains it.
        required: Whether its benchmark's default loader reads it (``benchmarks.fetch`` fetches those).
    """

    name: str
    benchmark: str
    size: int | None
    sha256: str
    licence: str
    source: str
    url: str | None = None
    how: str = ""
    required: bool = True


_LOCOMO_REV = "3eb6f2c585f5e1699204e3c3bdf7adc5c28cb376"
_LME_REV = "98d7416c24c778c2fee6e6f3006e7a073259d48f"
_LOGHUB_REV = "dd61d0952749ee7963bde24220d1be5ede023033"
_LME_DERIVED = (
    "derived from LongMemEval by the BudgetMem paper's split (github.com/ViktorAxelsen/BudgetMem); "
    "not published as a file: copy it from a machine that has it"
)

#: Every data file the project reads, by name.
CATALOGUE: dict[str, DataFile] = {
    f.name: f
    for f in (
        DataFile(
            "locomo10.json", "locomo", 2_805_274,
            "79fa87e90f04081343b8c8debecb80a9a6842b76a7aa537dc9fdf651ea698ff4",
            "CC BY-NC 4.0", "snap-research/locomo (Maharana et al., ACL 2024)",
            url=f"https://raw.githubusercontent.com/snap-research/locomo/{_LOCOMO_REV}/data/locomo10.json",
        ),
        DataFile(
            "longmemeval_oracle.json", "longmemeval", 14_230_736,
            "ee09026407933fe180fcf0d3a98f3b6e4f2a1c1e5ed16af1b75311265f816dc0",
            "MIT", "xiaowu0162/LongMemEval (Wu et al., ICLR 2025), the cleaned release",
            url="https://huggingface.co/datasets/xiaowu0162/longmemeval-cleaned/resolve/"
            f"{_LME_REV}/longmemeval_oracle.json",
        ),
        DataFile(
            "longmemeval_s_splits_qids.json", "longmemeval", 7_824,
            "eeb77b93499a547e60ca511bf88051bde2a558727afc5255db2ad8fe523a8337",
            "derived", "train/val/test question ids of the BudgetMem paper's LongMemEval split",
            how=_LME_DERIVED,
        ),
        DataFile(
            "longmemeval_s_cleaned_498.json.xz", "longmemeval", 41_551_376,
            "3f68cfe10f7939107347f5ed55a4c5f09118e7d038651c98ce4a7f06a67fb9e9",
            "MIT", "LongMemEval_S, cleaned release, 498 of 500 questions, xz-compressed",
            how="download longmemeval_s_cleaned.json from huggingface.co/datasets/xiaowu0162/"
            "longmemeval-cleaned and compress it with `xz -k`; its 498-question copy is what the "
            "committed LongMemEval_S tables used",
            required=False,
        ),
        DataFile(
            "longmemeval_s_splits.json", "longmemeval", 4_440,
            "d13012b04e6e2d23aa2c57df6ee121ec55be710d7f19b2d0527a1b5457d7031f",
            "Apache-2.0", "the BudgetMem paper's LongMemEval split as indices", how=_LME_DERIVED,
            required=False,
        ),
        DataFile(
            "longmemeval_question_order.json", "longmemeval", 15_463,
            "d17828e613fa4246837201a3ae0ab5748a7f821707aa5a99728f9109172137bc",
            "derived", "the upstream LongMemEval question order", how=_LME_DERIVED, required=False,
        ),
        DataFile(
            "hotpotqa_aflow_validate200.jsonl", "hotpotqa", 1_226_848,
            "fbdd1b94e371947246fa018d1620ad81e539904134f0a43d058d230a6ef33f61",
            "CC BY-SA 4.0", "HotpotQA (Yang et al., EMNLP 2018), the 200-question validation set of AFlow",
            how="it comes with the AFlow project's dataset archive (its HotpotQA validation file); "
            "the official dev questions need no manual step: --option file=hotpot_dev_distractor_v1.json",
        ),
        DataFile(
            "hotpot_dev_distractor_v1.json", "hotpotqa", 46_320_117,
            "4e9ecb5c8d3b719f624d66b60f8d56bf227f03914f5f0753d6fa1b359d7104ea",
            "CC BY-SA 4.0", "HotpotQA (Yang et al., EMNLP 2018), dev set, distractor setting",
            url="http://curtis.ml.cmu.edu/datasets/hotpot/hotpot_dev_distractor_v1.json",
            required=False,
        ),
        DataFile(
            "BGL_2k.log", "bgl", 317_150,
            "2a819ea540909db682005c9cf948387a40729b5c2e9f19d430e29ce704825496",
            "loghub research licence (cite Zhu et al., ISSRE 2023)", "logpai/loghub",
            url=f"https://raw.githubusercontent.com/logpai/loghub/{_LOGHUB_REV}/BGL/BGL_2k.log",
        ),
        DataFile(
            "BGL_2k.log_structured.csv", "bgl", 425_129,
            "3fe74103c0b02a28514534e2a47257a3f770135ca61afd425bbd3b9d6a31fe26",
            "loghub research licence (cite Zhu et al., ISSRE 2023)", "logpai/loghub",
            url=f"https://raw.githubusercontent.com/logpai/loghub/{_LOGHUB_REV}/BGL/BGL_2k.log_structured.csv",
            required=False,
        ),
    )
}


def files_of(benchmark: str, *, required_only: bool = True) -> list[DataFile]:
    """The catalogue entries of one benchmark (``"all"``: every benchmark).

    Example:
        >>> [f.name for f in files_of("locomo")]
        ['locomo10.json']

    Raises:
        ValueError: For a benchmark the catalogue does not know (the message lists the known ones).
    """
    known = sorted({f.benchmark for f in CATALOGUE.values()})
    if benchmark != "all" and benchmark not in known:
        raise ValueError(f"unknown benchmark {benchmark!r}: expected one of {', '.join(known)} or all")
    return [
        f for f in CATALOGUE.values()
        if (benchmark == "all" or f.benchmark == benchmark) and (f.required or not required_only)
    ]
