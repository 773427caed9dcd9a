"""The ``Benchmark`` base class: one loading interface for every QA benchmark."""

from __future__ import annotations

import abc
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from benchmarks.checksums import verify_checksums
from benchmarks.types import Sample
from common.datadir import data_file, resolve_data_dir
from common.fetch import fetchable

#: The split names every benchmark accepts.
SPLITS: tuple[str, ...] = ("train", "val", "test", "all")


def check_one_of(value: str, choices: tuple[str, ...], what: str) -> str:
    """Return ``value`` if it is one of ``choices``.

    Raises:
        ValueError: ``{what}{value!r}: expected one of ...``.
    """
    if value not in choices:
        raise ValueError(f"{what}{value!r}: expected one of {', '.join(choices)}")
    return value


def check_split(split: str) -> str:
    """Return ``split`` if it is a known split name, else raise naming the choices.

    Raises:
        ValueError: For an unknown split.
    """
    return check_one_of(split, SPLITS, "unknown split ")


class Benchmark(abc.ABC):
    """Base class of all benchmark loaders.

    Subclasses set :attr:`name` and :attr:`files` and implement :meth:`load`.

    Attributes:
        name: Registry name (``"locomo"``, ``"longmemeval"``, ...).
        files: Data file names this benchmark reads (inside the data directory).
        data_dir: The resolved data directory.
        checksums: ``{file name: sha256}`` of the files read so far (recorded for provenance).
    """

    name: ClassVar[str]
    files: ClassVar[tuple[str, ...]]

    def __init__(self, data_dir: str | os.PathLike[str] | None = None) -> None:
        # A fresh machine has no data directory: create the default one when a download can fill it.
        self.data_dir: Path = resolve_data_dir(data_dir, create=any(fetchable(n) for n in self.files))
        self.checksums: dict[str, str] = {}
        self._raw: dict[str, Any] = {}

    def data_files(self) -> list[Path]:
        """Paths of the data files this benchmark reads (each must exist).

        Raises:
            DataFileError: If a file is missing (the message names where to get it).
        """
        return [data_file(name, self.data_dir) for name in self.files]

    def _path(self, name: str) -> Path:
        """Resolve one data file and record (and verify, where SHA256SUMS lists it) its sha256."""
        path = data_file(name, self.data_dir)
        self.checksums.update(verify_checksums([path]))
        return path

    def _read(self, name: str, reader: Callable[[Path], Any]) -> tuple[Path, Any]:
        """Read (once per instance) and return ``(path, reader(path))`` for a data file.

        Loading several splits re-parses nothing: the raw document is kept on the instance.
        """
        path = self._path(name)
        if name not in self._raw:
            self._raw[name] = reader(path)
        return path, self._raw[name]

    @abc.abstractmethod
    def load(self, split: str) -> list[Sample]:
        """Load the samples of one split (``"train"``, ``"val"``, ``"test"`` or ``"all"``).

        Raises:
            ValueError: For an unknown split.
            DataFileError: For a missing or malformed data file.
        """

    def describe(self) -> dict[str, Any]:
        """Counts per split: samples, questions, sessions, turns, categories.

        Returns:
            ``{"benchmark": name, "splits": {split: {...counts...}}, "checksums": {...}}``.
        """
        out: dict[str, Any] = {"benchmark": self.name, "splits": {}}
        for split in SPLITS:
            samples = self.load(split)
            cats: Counter[str] = Counter(q.category for s in samples for q in s.questions)
            out["splits"][split] = {
                "samples": len(samples),
                "questions": sum(len(s.questions) for s in samples),
                "sessions": sum(len(s.history.sessions) for s in samples),
                "turns": sum(len(s.history.turns()) for s in samples),
                "with_evidence": sum(1 for s in samples for q in s.questions if q.evidence_ids),
                "abstention": sum(1 for s in samples for q in s.questions if q.is_abstention),
                "categories": dict(sorted(cats.items())),
            }
        out["checksums"] = dict(sorted(self.checksums.items()))
        return out
