"""Resolve the benchmark data directory and give clear errors for missing files."""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "BUDGET_ROUTER_DATA"
PROJECT_ROOT = Path(__file__).resolve().parent.parent

#: Where each file officially comes from, quoted in "missing file" errors.
OFFICIAL_SOURCES: dict[str, str] = {
    "locomo10.json": "https://github.com/snap-research/locomo (data/locomo10.json)",
    "longmemeval_oracle.json": "https://huggingface.co/datasets/xiaowu0162/longmemeval-cleaned",
    "longmemeval_s_cleaned_498.json.xz": "https://huggingface.co/datasets/xiaowu0162/longmemeval-cleaned "
    "(longmemeval_s_cleaned.json, xz-compressed)",
    "longmemeval_s_splits_qids.json": "BudgetMem paper split (github.com/ViktorAxelsen/BudgetMem), "
    "as question ids",
    "longmemeval_s_splits.json": "BudgetMem paper split (github.com/ViktorAxelsen/BudgetMem)",
    "longmemeval_question_order.json": "derived from the upstream LongMemEval question order",
    "hotpotqa_aflow_validate200.jsonl": "https://hotpotqa.github.io (distractor format; "
    "AFlow validation 200)",
    "hotpot_dev_distractor_v1.json": "http://curtis.ml.cmu.edu/datasets/hotpot/hotpot_dev_distractor_v1.json "
    "(https://hotpotqa.github.io)",
    "BGL_2k.log": "https://github.com/logpai/loghub (BGL/BGL_2k.log)",
}


class DataFileError(FileNotFoundError, ValueError):
    """A data file is missing or malformed; the message names the file, record and field."""


def resolve_data_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """Return the data directory to use.

    Args:
        explicit: A directory from config or the command line; wins when given.

    Returns:
        An existing directory.

    Raises:
        DataFileError: If no candidate directory exists.
    """
    candidates: list[tuple[str, Path]] = []
    if explicit:
        candidates.append(("config/CLI", Path(explicit).expanduser()))
    elif os.environ.get(ENV_VAR):
        candidates.append((f"${ENV_VAR}", Path(os.environ[ENV_VAR]).expanduser()))
    else:
        candidates.append(("default", PROJECT_ROOT.parent / "shared" / "data"))
        candidates.append(("default", PROJECT_ROOT / "data"))
    for _, cand in candidates:
        if cand.is_dir():
            return cand.resolve()
    tried = ", ".join(f"{src}: {p}" for src, p in candidates)
    raise DataFileError(
        f"benchmark data directory not found (tried {tried}). Set {ENV_VAR}=/path/to/data or pass "
        "data_dir=... ; the directory must hold the official files (e.g. locomo10.json)."
    )


def data_file(name: str, data_dir: str | os.PathLike[str] | None = None) -> Path:
    """Return the path of a named data file, or raise a clear error naming its source.

    Args:
        name: File name inside the data directory, e.g. ``"locomo10.json"``.
        data_dir: Optional explicit data directory.

    Returns:
        Path to the existing file.

    Raises:
        DataFileError: If the file does not exist.
    """
    root = resolve_data_dir(data_dir)
    path = root / name
    if not path.is_file():
        source = OFFICIAL_SOURCES.get(name, "see the data README")
        raise DataFileError(f"missing data file {path}: download {name!r} from {source} into {root}")
    return path
