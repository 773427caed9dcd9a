"""Results as Hugging Face ``datasets``: episode records, question banks and frontier systems."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from common.atomic import atomic_write_with

KINDS: tuple[str, ...] = ("records", "bank", "frontier")
FORMATS: tuple[str, ...] = ("arrow", "parquet")


def flatten(obj: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}, "c": [1]}`` -> ``{"a.b": 1, "c": [1]}`` (lists are kept as values)."""
    out: dict[str, Any] = {}
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            # An empty mapping has no columns to give (and Arrow cannot store an empty struct).
            out.update(flatten(value, f"{name}.") if value else {name: None})
        else:
            out[name] = value
    return out


def _read_json_rows(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSON Lines file (plain or, as committed records are, gzip-compressed) or a JSON list file."""
    raw = path.read_bytes()
    text = (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode("utf-8")
    if text.lstrip().startswith("["):
        rows = json.loads(text)
    else:
        rows = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{n}: invalid JSON record ({exc.msg})") from exc
    bad = [i for i, r in enumerate(rows) if not isinstance(r, dict)]
    if bad:
        raise ValueError(f"{path}: record {bad[0]} is not a JSON object")
    return rows


def _files(inputs: Sequence[str | os.PathLike[str]], patterns: tuple[str, ...]) -> list[tuple[Path, str]]:
    """``(file, name relative to the input it came from)`` for files and directories searched recursively."""
    out: list[tuple[Path, str]] = []
    for item in inputs:
        p = Path(item)
        if p.is_dir():
            found = sorted({f for pat in patterns for f in p.rglob(pat) if f.is_file()})
            out.extend((f, str(f.relative_to(p))) for f in found)
        elif p.is_file():
            out.append((p, p.name))
        else:
            raise FileNotFoundError(f"export input not found: {p}")
    if not out:
        raise ValueError(f"no {' or '.join(patterns)} files under {', '.join(map(str, inputs))}")
    return out


def record_rows(inputs: Sequence[str | os.PathLike[str]]) -> list[dict[str, Any]]:
    """Flattened episode records with a ``source`` column (see docs/design/evaluation.md)."""
    rows: list[dict[str, Any]] = []
    for path, name in _files(inputs, ("*.jsonl", "*.jsonl.gz", "validation_records*.json")):
        rows.extend({"source": name, **flatten(r)} for r in _read_json_rows(path))
    return rows


def bank_rows(inputs: Sequence[str | os.PathLike[str]]) -> list[dict[str, Any]]:
    """One flattened row per question-bank item, with a ``bank`` column (the cache file name).

    Raises:
        ValueError: For a JSON file that is not a question-bank cache (``{"ident", "items"}``).
    """
    rows: list[dict[str, Any]] = []
    for path, name in _files(inputs, ("*.json",)):
        doc = json.loads(path.read_text(encoding="utf-8"))
        if not (isinstance(doc, dict) and isinstance(doc.get("items"), list)):
            raise ValueError(f"{path}: not a question-bank cache file (expected {{'ident', 'items'}})")
        for item in doc["items"]:
            evidence = item.get("evidence", [])
            rows.append(
                {
                    "bank": name,
                    **flatten({k: v for k, v in item.items() if k != "evidence"}),
                    "evidence": evidence,
                }
            )
    return rows


def frontier_rows(inputs: Sequence[str | os.PathLike[str]]) -> list[dict[str, Any]]:
    """One flattened row per system of ``frontier.json`` files, with a ``source`` column."""
    rows: list[dict[str, Any]] = []
    for path, name in _files(inputs, ("frontier.json",)):
        doc = json.loads(path.read_text(encoding="utf-8"))
        if not (isinstance(doc, dict) and isinstance(doc.get("systems"), list)):
            raise ValueError(f"{path}: not a frontier.json (expected a 'systems' list)")
        rows.extend({"source": name, **flatten(s)} for s in doc["systems"])
    return rows


ROW_READERS = {"records": record_rows, "bank": bank_rows, "frontier": frontier_rows}


def to_dataset(rows: Iterable[Mapping[str, Any]]) -> Any:
    """A ``datasets.Dataset`` of ``rows``: columns in first-seen order, ``None`` where a row lacks one.

    Raises:
        ValueError: For no rows.
    """
    import datasets
    import pyarrow as pa

    rows = list(rows)
    if not rows:
        raise ValueError("nothing to export: no rows")
    names: dict[str, None] = {}
    for r in rows:
        names.update(dict.fromkeys(r))
    columns = {n: [r.get(n) for r in rows] for n in names}
    as_json = []
    for name, values in columns.items():
        try:
            pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            columns[name] = [
                None if v is None else json.dumps(v, sort_keys=True, default=str) for v in values
            ]
            as_json.append(name)
    info = datasets.DatasetInfo(
        description="budget-router export" + (f"; JSON-text columns: {', '.join(as_json)}" if as_json else "")
    )
    return datasets.Dataset.from_dict(columns, info=info)


def write_dataset(ds: Any, out: str | os.PathLike[str], fmt: str = "arrow") -> Path:
    """Write ``ds`` atomically: a ``save_to_disk`` directory (``arrow``) or one Parquet file.

    Raises:
        ValueError: For an unknown format.
    """
    out = Path(out)
    if fmt == "parquet":
        return atomic_write_with(out, lambda tmp: ds.to_parquet(str(tmp)))
    if fmt != "arrow":
        raise ValueError(f"unknown export format {fmt!r}; choose one of {FORMATS}")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        ds.save_to_disk(str(tmp / "ds"))
        if out.exists():
            shutil.rmtree(out)  # replaced only once the new copy is complete
        os.replace(tmp / "ds", out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def export(
    kind: str, inputs: Sequence[str | os.PathLike[str]], out: str | os.PathLike[str], fmt: str = "arrow"
) -> Any:
    """Read ``inputs`` as ``kind`` rows, write them to ``out``; returns the Dataset.

    Raises:
        ValueError: For an unknown kind or format, or inputs without rows.
    """
    if kind not in ROW_READERS:
        raise ValueError(f"unknown export kind {kind!r}; choose one of {KINDS}")
    ds = to_dataset(ROW_READERS[kind](inputs))
    write_dataset(ds, out, fmt)
    return ds
