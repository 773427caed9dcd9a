"""One-pass, per-question on-disk cache of the LongMemEval S file."""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import lzma
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from filelock import FileLock
from tqdm import tqdm

from benchmarks.cachedir import cache_root
from benchmarks.jsonstream import iter_json_list
from common.datadir import DataFileError
from common.provenance import sha256_file

log = logging.getLogger(__name__)

#: Bump when the cache layout changes.
CACHE_VERSION = 1
INDEX = "index.json"
_SAFE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")


def question_file_name(question_id: str) -> str:
    """File name of one question inside the cache (ids are hashed if not filename-safe)."""
    if _SAFE_NAME.fullmatch(question_id):
        return f"{question_id}.json.gz"
    return f"q_{hashlib.sha256(question_id.encode()).hexdigest()[:24]}.json.gz"


def _open_text(path: Path) -> TextIO:
    if path.suffix == ".xz":
        return lzma.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


class QuestionCache:
    """A finished per-question cache directory.

    Attributes:
        directory: The cache directory.
        question_ids: Question ids in the source file's order.
        source_sha256: sha256 of the source file.
    """

    def __init__(self, directory: Path) -> None:
        index_path = directory / INDEX
        index = json.loads(index_path.read_text(encoding="utf-8"))
        if index.get("version") != CACHE_VERSION:
            raise DataFileError(
                f"{index_path}: record <index>: field 'version': {index.get('version')!r} "
                f"!= {CACHE_VERSION}; delete the directory to rebuild"
            )
        self.directory = directory
        self.question_ids: list[str] = list(index["question_ids"])
        self.source_sha256: str = index["sha256"]
        #: question id -> position in the source file.
        self.position: dict[str, int] = {q: i for i, q in enumerate(self.question_ids)}

    def __contains__(self, question_id: str) -> bool:
        return question_id in self.position

    def read(self, question_id: str) -> dict[str, Any]:
        """Return the raw record of one question.

        Raises:
            KeyError: If the source file has no such question.
        """
        if question_id not in self.position:
            raise KeyError(f"question {question_id!r} is not in the cached file ({self.directory})")
        with gzip.open(self.directory / question_file_name(question_id), "rt", encoding="utf-8") as fh:
            return json.load(fh)


def build_question_cache(
    source: Path,
    validate: Callable[[Any, int], str] | None = None,
    root: Path | None = None,
) -> QuestionCache:
    """Return the per-question cache of ``source``, building it on first use.

    Args:
        source: The JSON list file (``.json`` or ``.json.xz``).
        validate: Called as ``validate(record, index)`` for every record during the build; must
            return the question id and raise ``DataFileError`` for a malformed record.
        root: Cache root (default :func:`benchmarks.cachedir.cache_root`).

    Returns:
        The finished cache.

    Raises:
        DataFileError: For a malformed or truncated source (nothing is left in the cache then).
    """
    digest = sha256_file(source)
    parent = (root or cache_root()) / "longmemeval_s"
    parent.mkdir(parents=True, exist_ok=True)
    final = parent / digest
    if (final / INDEX).is_file():
        return QuestionCache(final)
    with FileLock(str(parent / f"{digest}.lock")):
        if (final / INDEX).is_file():  # another process built it while we waited
            return QuestionCache(final)
        log.info("building per-question cache of %s in %s (one pass, ~15 s)", source.name, final)
        tmp = Path(tempfile.mkdtemp(prefix=f".{digest[:12]}.", dir=parent))
        try:
            ids: list[str] = []
            seen: set[str] = set()
            with _open_text(source) as fh:
                for i, rec in enumerate(
                    tqdm(iter_json_list(fh, source), desc=f"caching {source.name}", unit="q", leave=False)
                ):
                    qid = validate(rec, i) if validate else str(rec["question_id"])
                    if qid in seen:
                        raise DataFileError(
                            f"{source}: record {qid} (index {i}): field 'question_id': duplicate"
                        )
                    with gzip.open(
                        tmp / question_file_name(qid), "wt", encoding="utf-8", compresslevel=1
                    ) as out:
                        json.dump(rec, out, ensure_ascii=False)
                    ids.append(qid)
                    seen.add(qid)
            index = {"version": CACHE_VERSION, "source": source.name, "sha256": digest, "question_ids": ids}
            (tmp / INDEX).write_text(json.dumps(index, indent=1), encoding="utf-8")
            if final.exists():  # a stale, unfinished directory (no index): replace it
                shutil.rmtree(final)
            os.replace(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return QuestionCache(final)
