"""Strict field access for raw data records, with errors that name file, record and field."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.datadir import DataFileError

_MISSING = object()


@dataclass(frozen=True)
class RecordRef:
    """Where a raw record came from, for error messages.

    Attributes:
        path: The data file.
        record: A human-readable record name (id and/or index).
    """

    path: Path
    record: str

    def error(self, field_name: str, problem: str) -> DataFileError:
        """Build the error for ``field_name`` of this record."""
        return DataFileError(f"{self.path}: record {self.record}: field {field_name!r}: {problem}")


def _type_names(types: type | tuple[type, ...]) -> str:
    if isinstance(types, tuple):
        return " or ".join(t.__name__ for t in types)
    return types.__name__


def field(
    obj: Any,
    key: str,
    types: type | tuple[type, ...],
    ref: RecordRef,
    *,
    path: str | None = None,
    default: Any = _MISSING,
) -> Any:
    """Return ``obj[key]`` after checking that it exists and has one of ``types``.

    Args:
        obj: The raw mapping.
        key: Key to read.
        types: Accepted type(s). ``bool`` is never accepted where ``int`` is asked for.
        ref: Where ``obj`` came from.
        path: Field path used in the error message (defaults to ``key``).
        default: Returned when the key is absent (if given); otherwise absence is an error.

    Raises:
        DataFileError: If ``obj`` is not a mapping, the key is missing, or the type is wrong.
    """
    name = path or key
    if not isinstance(obj, dict):
        raise ref.error(name, f"parent is {type(obj).__name__}, expected an object")
    if key not in obj:
        if default is not _MISSING:
            return default
        raise ref.error(name, "missing")
    value = obj[key]
    accepted = types if isinstance(types, tuple) else (types,)
    if isinstance(value, bool) and bool not in accepted:
        raise ref.error(name, f"expected {_type_names(types)}, got bool {value!r}")
    if not isinstance(value, accepted):
        shown = repr(value)[:60]
        raise ref.error(name, f"expected {_type_names(types)}, got {type(value).__name__} {shown}")
    return value


def answer_text(value: Any, ref: RecordRef, path: str = "answer") -> str:
    """Gold answers are sometimes ints (LoCoMo, LongMemEval): convert them to text.

    Raises:
        DataFileError: For anything other than str/int/float.
    """
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ref.error(path, f"expected str or int, got {type(value).__name__} {value!r}")
    return value if isinstance(value, str) else str(value)


def load_json(path: str | os.PathLike[str]) -> Any:
    """Read a JSON file, turning a decode error (e.g. a truncated file) into a clear error.

    Raises:
        DataFileError: Naming the file, line and column of the problem.
    """
    p = Path(path)
    try:
        with open(p, encoding="utf-8") as fh:
            return json.load(fh)
    except json.JSONDecodeError as exc:
        raise DataFileError(
            f"{p}: record at line {exc.lineno} column {exc.colno} (char {exc.pos}): field <json>: "
            f"invalid or truncated JSON ({exc.msg})"
        ) from exc
    except UnicodeDecodeError as exc:
        raise DataFileError(f"{p}: byte {exc.start}: field <encoding>: not UTF-8 ({exc.reason})") from exc


def expect_list(value: Any, ref: RecordRef, what: str) -> list[Any]:
    """Check that a top-level document is a JSON list.

    Raises:
        DataFileError: If it is not.
    """
    if not isinstance(value, list):
        raise ref.error(what, f"expected a JSON list, got {type(value).__name__}")
    return value
