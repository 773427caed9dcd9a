"""Helpers shared by several test files (not a test module itself)."""

from __future__ import annotations

import pytest

from common.datadir import DataFileError, data_file

#: Hydra overrides for an in-seconds training run on real LoCoMo questions with the fake LLM.
TINY_TRAIN_OVERRIDES = [
    "backend=fake",
    "encoder=hashing",
    "memory=no_ce",
    "train=tiny",
    "ppo=tiny",
    "question_bank.max_samples=1",
]


def has_locomo() -> bool:
    """True when the LoCoMo file can be found in the resolved data directory."""
    try:
        data_file("locomo10.json")
    except DataFileError:
        return False
    return True


#: Skip a test (with a message) when the benchmark data directory is absent.
needs_locomo = pytest.mark.skipif(not has_locomo(), reason="LoCoMo data directory absent (locomo10.json)")
