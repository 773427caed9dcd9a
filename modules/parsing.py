"""Parse LLM module outputs: JSON lists, chain-of-thought answers, tagged ReAct sections."""

from __future__ import annotations

import json
import re
from typing import Any

from modules.prompts import Style


class ParseError(ValueError):
    """The model output could not be turned into the module's value."""


_FENCE_RE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)
_JSON_STRING_RE = re.compile(r'"((?:[^"\\]|\\.)*)"')
_INT_RE = re.compile(r"-?\d+")


def extract_section(text: str, style: Style) -> str:
    """Return the part of ``text`` that holds the final answer for a prompting ``style``.

    * ``direct`` / ``fewshot``: the whole text.
    * ``cot``: the text after the last ``Answer:`` line (the reasoning before it is dropped).
    * ``react``: the text after the last ``<answer>`` tag, up to ``</answer>`` if present
      (requests stop at ``</answer>``, so it is usually absent).

    Raises:
        ParseError: The marker of a ``cot``/``react`` answer is missing (typically the model
            ran out of tokens while still reasoning).
    """
    if style in ("direct", "fewshot"):
        return text.strip()
    if style == "cot":
        idx = text.lower().rfind("answer:")
        if idx < 0:
            raise ParseError("no 'Answer:' line after the reasoning")
        return text[idx + len("answer:") :].strip()
    if style == "react":
        idx = text.lower().rfind("<answer>")
        if idx < 0:
            raise ParseError("no <answer> section after PLAN/ACT/REFLECT")
        body = text[idx + len("<answer>") :]
        end = body.lower().find("</answer>")
        return (body if end < 0 else body[:end]).strip()
    raise ValueError(f"unknown prompting style {style!r}")


def _loads_lenient(text: str) -> Any:
    """json.loads on the text, a fenced block inside it, or its first {...}/[...] span."""
    candidates = [text.strip()]
    candidates += [m.strip() for m in _FENCE_RE.findall(text)]
    for open_c, close_c in (("{", "}"), ("[", "]")):
        start, end = text.find(open_c), text.rfind(close_c)
        if 0 <= start < end:
            candidates.append(text[start : end + 1])
    for cand in candidates:
        try:
            return json.loads(cand)
        except (json.JSONDecodeError, ValueError):
            continue
    raise ParseError("no valid JSON")


def parse_string_list(text: str, key: str = "items", max_items: int = 16) -> list[str]:
    """Parse ``{"items": ["...", ...]}`` (or a bare JSON list) into de-duplicated strings.

    Falls back to salvaging the complete quoted strings after ``"items": [`` when the JSON
    was truncated. Non-string items are converted with ``str``; blanks are dropped; order of
    first appearance is kept.

    Raises:
        ParseError: Nothing list-like could be found.
    """
    try:
        data = _loads_lenient(text)
    except ParseError:
        data = None
    items: list[Any]
    if isinstance(data, dict) and isinstance(data.get(key), list):
        items = data[key]
    elif isinstance(data, list):
        items = data
    elif isinstance(data, dict) and len(data) == 1 and isinstance(next(iter(data.values())), list):
        items = next(iter(data.values()))
    else:
        marker = re.search(rf'"{re.escape(key)}"\s*:\s*\[', text)
        if marker is None:
            raise ParseError(f"expected a JSON object with a {key!r} list")
        items = [json.loads(f'"{s}"') for s in _JSON_STRING_RE.findall(text[marker.end() :])]
        if not items:
            # Truncated before the first complete item: nothing was actually said.
            raise ParseError(f"truncated JSON with no complete {key!r} item")
    out: list[str] = []
    seen: set[str] = set()
    for it in items:
        s = " ".join(str(it).split()) if not isinstance(it, dict) else " | ".join(str(v) for v in it.values())
        if s and s.lower() not in seen:
            seen.add(s.lower())
            out.append(s)
        if len(out) >= max_items:
            break
    return out


def parse_indices(text: str, n: int, key: str = "relevant") -> list[int]:
    """Parse the filter's ``{"relevant": [1, 3]}`` (1-based) into sorted 0-based indices.

    Out-of-range and duplicate numbers are dropped. Falls back to the integers in the text
    after ``"relevant"`` when the JSON is truncated.

    Raises:
        ParseError: No list of numbers could be found.
    """
    try:
        data = _loads_lenient(text)
    except ParseError:
        data = None
    raw: list[Any]
    if isinstance(data, dict) and isinstance(data.get(key), list):
        raw = data[key]
    elif isinstance(data, list):
        raw = data
    else:
        marker = re.search(rf'"{re.escape(key)}"\s*:\s*\[', text)
        if marker is None:
            raise ParseError(f"expected a JSON object with a {key!r} list of numbers")
        raw = _INT_RE.findall(text[marker.end() :])
        if not raw:
            raise ParseError(f"truncated JSON with no {key!r} number")
    idx: set[int] = set()
    for v in raw:
        try:
            i = int(str(v).strip().strip("[]#"))
        except ValueError:
            continue
        if 1 <= i <= n:
            idx.add(i - 1)
    return sorted(idx)


def parse_summary(text: str) -> str:
    """Normalise a free-text summary; strips a leading ``Summary:`` label.

    Raises:
        ParseError: The summary is empty.
    """
    out = text.strip()
    if out.lower().startswith("summary:"):
        out = out[len("summary:") :].strip()
    if not out:
        raise ParseError("empty summary")
    return out
