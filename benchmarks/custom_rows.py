r"""Rows of a user's dataset -> histories and questions (the schema of ``benchmark=custom``)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from benchmarks.records import RecordRef, answer_text
from benchmarks.types import Session, Turn

#: The fields a row can map (see docs/design/benchmarks.md).
FIELDS: tuple[str, ...] = (
    "history_id",
    "sessions",
    "documents",
    "question",
    "answer",
    "answers",
    "question_id",
    "category",
    "evidence_ids",
    "question_date",
    "abstention",
    "split",
)

DEFAULT_CATEGORY = "default"
SPLIT_ALIASES = {"train": "train", "val": "val", "validation": "val", "dev": "val", "test": "test"}


def column_map(columns: Mapping[str, Any] | None) -> dict[str, str]:
    """``{field: column name}``: the identity mapping updated with the user's ``columns`` option.

    Raises:
        ValueError: For a field this schema does not know or a non-string column name.
    """
    out = {f: f for f in FIELDS}
    for key, value in dict(columns or {}).items():
        if key not in out:
            raise ValueError(f"benchmark.options.columns: unknown field {key!r}; fields: {', '.join(FIELDS)}")
        if not isinstance(value, str) or not value:
            raise ValueError(f"benchmark.options.columns.{key}: expected a column name, got {value!r}")
        out[key] = value
    return out


def as_text(value: Any) -> str:
    """Dates that Arrow parsed into timestamps back to text; anything else via ``str``."""
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d") if value.time() == dt.time() else value.isoformat(sep=" ")
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(value)


@dataclass(frozen=True)
class RowReader:
    """Reads mapped fields of one row with errors naming file, row and column."""

    row: Mapping[str, Any]
    cols: Mapping[str, str]
    ref: RecordRef

    def raw(self, name: str) -> Any:
        """The row's value of field ``name`` (None when the column is absent or empty)."""
        value = self.row.get(self.cols[name])
        return None if value == "" else value

    def error(self, name: str, problem: str) -> Exception:
        """The error for field ``name`` (named by its column)."""
        return self.ref.error(self.cols[name], problem)

    def text(self, name: str, required: bool = False) -> str | None:
        """A scalar field as text (numbers and dates converted); None when empty and optional."""
        value = self.raw(name)
        if isinstance(value, str) and not value.strip():
            # Whitespace is no text: a blank question would reach the pipeline as an empty prompt.
            if required:
                raise self.error(name, f"is only whitespace ({value!r}); give the text or drop the row")
            return None
        if value is None:
            if required:
                raise self.error(name, "missing (empty or no such column)")
            return None
        if isinstance(value, bool | list | dict):
            raise self.error(name, f"expected text, got {type(value).__name__} {str(value)[:60]}")
        return as_text(value)

    def structured(self, name: str) -> Any:
        """A list/dict field; JSON text (CSV cells) is decoded."""
        value = self.raw(name)
        if isinstance(value, str) and value.lstrip()[:1] in ("[", "{"):
            try:
                return json.loads(value)
            except json.JSONDecodeError as exc:
                raise self.error(name, f"invalid JSON text ({exc.msg})") from exc
        return value

    def flag(self, name: str) -> bool:
        """A boolean field (``true/false``, ``1/0`` or a bool; empty = False)."""
        value = self.raw(name)
        if value is None or isinstance(value, bool):
            return bool(value)
        if isinstance(value, int | float) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.strip().lower() in ("true", "1", "yes")
        raise self.error(name, f"expected true/false, got {value!r}")

    def string_list(self, name: str, sep: str | None = None) -> list[str]:
        """A list of strings (JSON text or, with ``sep``, a separated string in CSV)."""
        value = self.structured(name)
        if value is None:
            return []
        if isinstance(value, str):
            if sep is None:
                return [value]
            return [p.strip() for p in value.split(sep) if p.strip()]
        if not isinstance(value, list):
            raise self.error(name, f"expected a list, got {type(value).__name__} {str(value)[:60]}")
        out = []
        for i, item in enumerate(value):
            if isinstance(item, bool) or not isinstance(item, str | int | float):
                raise self.ref.error(f"{self.cols[name]}[{i}]", f"expected text, got {item!r}")
            out.append(as_text(item))
        return out


def _entry(reader: RowReader, items: Any, name: str) -> list[Any]:
    if not isinstance(items, list):
        raise reader.error(name, f"expected a list, got {type(items).__name__} {str(items)[:60]}")
    return items


def _opt_text(obj: Mapping[str, Any], key: str, reader: RowReader, where: str) -> str | None:
    value = obj.get(key)
    if value is None or value == "":
        return None
    if isinstance(value, bool | list | dict):
        raise reader.ref.error(f"{where}.{key}", f"expected text, got {type(value).__name__}")
    return as_text(value)


def _req_text(obj: Any, key: str, reader: RowReader, where: str) -> str:
    if not isinstance(obj, Mapping):
        raise reader.ref.error(where, f"expected an object, got {type(obj).__name__} {str(obj)[:60]}")
    value = _opt_text(obj, key, reader, where)
    if value is None:
        raise reader.ref.error(f"{where}.{key}", "missing")
    return value


def parse_sessions(reader: RowReader) -> tuple[Session, ...]:
    """The ``sessions`` field as dialogue sessions (ids ``s{i}:t{j}`` unless the data names them)."""
    col = reader.cols["sessions"]
    sessions = []
    for i, rs in enumerate(_entry(reader, reader.structured("sessions"), "sessions")):
        where = f"{col}[{i}]"
        if not isinstance(rs, Mapping):
            raise reader.ref.error(where, f"expected an object with 'turns', got {type(rs).__name__}")
        date = _opt_text(rs, "date", reader, where)
        sid = _opt_text(rs, "session_id", reader, where) or f"s{i}"
        raw_turns = rs.get("turns")
        if not isinstance(raw_turns, list):
            raise reader.ref.error(f"{where}.turns", f"expected a list, got {type(raw_turns).__name__}")
        turns = []
        for j, rt in enumerate(raw_turns):
            tw = f"{where}.turns[{j}]"
            turns.append(
                Turn(
                    turn_id=(_opt_text(rt, "turn_id", reader, tw) if isinstance(rt, Mapping) else None)
                    or f"s{i}:t{j}",
                    speaker=_req_text(rt, "speaker", reader, tw),
                    text=_req_text(rt, "text", reader, tw),
                    timestamp=date,
                )
            )
        sessions.append(Session(session_id=sid, turns=tuple(turns), timestamp=date))
    return tuple(sessions)


def parse_documents(reader: RowReader) -> tuple[Session, ...]:
    """The ``documents`` field: one session per titled document, one turn per sentence."""
    col = reader.cols["documents"]
    sessions = []
    for i, doc in enumerate(_entry(reader, reader.structured("documents"), "documents")):
        where = f"{col}[{i}]"
        if isinstance(doc, list) and len(doc) == 2 and isinstance(doc[0], str):
            title, sentences = doc
        elif isinstance(doc, Mapping):
            title = _req_text(doc, "title", reader, where)
            sentences = doc.get("sentences")
            if sentences is None:
                sentences = [_req_text(doc, "text", reader, where)]
        else:
            raise reader.ref.error(
                where, f"expected {{title, text}} or [title, [sentences]], got {doc!r:.60}"
            )
        if not isinstance(sentences, list):
            raise reader.ref.error(f"{where}.sentences", f"expected a list, got {type(sentences).__name__}")
        turns = []
        for k, sent in enumerate(sentences):
            if not isinstance(sent, str):
                raise reader.ref.error(f"{where}.sentences[{k}]", f"expected text, got {type(sent).__name__}")
            turns.append(Turn(turn_id=f"{title}#{k}", speaker=title, text=sent.strip()))
        sessions.append(Session(session_id=title, turns=tuple(turns)))
    return tuple(sessions)


def check_unique_turns(sessions: tuple[Session, ...], reader: RowReader, name: str) -> None:
    """Turn ids must be unique within a history (evidence refers to them).

    Raises:
        DataFileError: Naming the repeated id.
    """
    seen: set[str] = set()
    for s in sessions:
        for t in s.turns:
            if t.turn_id in seen:
                raise reader.error(name, f"turn id {t.turn_id!r} occurs twice in the history")
            seen.add(t.turn_id)


def resolve_evidence(ids: list[str], sessions: tuple[Session, ...], reader: RowReader) -> tuple[str, ...]:
    """Evidence ids as turn ids: a session id (or document title) stands for all its turns.

    Raises:
        DataFileError: For an id that names no turn or session of the history.
    """
    turn_ids = {t.turn_id for s in sessions for t in s.turns}
    by_session = {s.session_id: [t.turn_id for t in s.turns] for s in sessions}
    out: list[str] = []
    for i, eid in enumerate(ids):
        if eid in turn_ids:
            found = [eid]
        elif eid in by_session:
            found = by_session[eid]
        else:
            raise reader.ref.error(
                f"{reader.cols['evidence_ids']}[{i}]", f"{eid!r} names no turn or session of the history"
            )
        out.extend(t for t in found if t not in out)
    return tuple(out)


def answers_of(reader: RowReader) -> tuple[str, list[str]]:
    """``(gold answer, all accepted answers)`` from ``answer`` and/or ``answers``.

    Raises:
        DataFileError: When neither is given, or for a value that is not text or a number.
    """
    alternatives = reader.string_list("answers")
    value = reader.raw("answer")
    if value is None:
        if not alternatives:
            raise reader.error(
                "answer", f"missing (give {reader.cols['answer']!r} or {reader.cols['answers']!r})"
            )
        return alternatives[0], alternatives
    gold = answer_text(
        as_text(value) if isinstance(value, dt.date) else value, reader.ref, reader.cols["answer"]
    )
    return gold, [gold, *(a for a in alternatives if a != gold)]
