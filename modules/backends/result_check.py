"""One check of a call's result, wherever a result enters: a backend's reply, a cache row, a call pack.

A result that fails it is never stored and never replayed: from a backend it becomes a counted failure
(``finish_reason="error"``), in the cache it is a miss (the call is computed again), in a pack it stops the
import before anything is written. The check is about types and ranges, so that a malformed value cannot
crash a run later (``'list' object has no attribute 'strip'``, a negative cost); what a reply *means* (an
empty answer, a content filter) is the backend's to judge (``modules.backends.openai_http``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from modules.backends.base import GenerationResult

#: Why a generation stopped: a natural end, the token limit, or a failed call (never stored).
FINISH_REASONS = ("stop", "length", "error")
#: The fields of a stored result (cache rows and pack entries); ``truncated`` is optional in old rows.
STORED_FIELDS = ("text", "tokens_in", "tokens_out", "latency_s", "model_id", "finish_reason", "truncated")
_REQUIRED = STORED_FIELDS[:-1]


class InvalidResult(ValueError):
    """A result whose fields have the wrong type or range; the message names the field and value."""


def _seconds(name: str, value: Any) -> float:
    """A finite number >= 0 (seconds, GFLOPs)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise InvalidResult(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


def _count(name: str, value: Any) -> int:
    # bool is an int subclass: a JSON true is not a token count.
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidResult(f"{name} must be an integer >= 0, got {value!r}")
    return value


def check_result(result: GenerationResult) -> GenerationResult:
    """Return ``result`` if every field has its type and range.

    Raises:
        InvalidResult: Naming the first field that does not.
    """
    if not isinstance(result.text, str):
        kind = type(result.text).__name__
        raise InvalidResult(f"text must be a string, got {kind} {result.text!r:.80}")
    _count("tokens_in", result.tokens_in)
    _count("tokens_out", result.tokens_out)
    _seconds("latency_s", result.latency_s)
    if not isinstance(result.model_id, str) or not result.model_id:
        raise InvalidResult(f"model_id must be a non-empty string, got {result.model_id!r}")
    if result.finish_reason not in FINISH_REASONS:
        raise InvalidResult(f"finish_reason must be one of {FINISH_REASONS}, got {result.finish_reason!r}")
    if not isinstance(result.truncated, bool):
        raise InvalidResult(f"truncated must be true or false, got {result.truncated!r}")
    return result


def result_from_stored(value: Any) -> GenerationResult:
    """The :class:`GenerationResult` an LLM call's cache row or pack entry holds, checked (``cached``).

    Raises:
        InvalidResult: If ``value`` is not an object, lacks a field, holds a failed call or a field of the
            wrong type or range.
    """
    if not isinstance(value, Mapping):
        raise InvalidResult(f"a stored call must be a JSON object, got {type(value).__name__}")
    missing = [f for f in _REQUIRED if f not in value]
    if missing:
        raise InvalidResult(f"a stored call lacks {', '.join(missing)}")
    if value["finish_reason"] == "error":
        raise InvalidResult("a stored call holds a failed call (finish_reason 'error'), never stored")
    fields = {f: value[f] for f in STORED_FIELDS if f in value}
    return check_result(GenerationResult(**fields, cached=True))


def as_failure(result: GenerationResult, reason: str) -> GenerationResult:
    """``result`` turned into a counted failure (empty text, no tokens) that says why."""
    try:
        latency = _seconds("latency_s", result.latency_s)
    except InvalidResult:
        latency = 0.0
    return GenerationResult(
        text="",
        tokens_in=0,
        tokens_out=0,
        latency_s=latency,
        model_id=result.model_id if isinstance(result.model_id, str) else "unknown",
        finish_reason="error",
        error=f"invalid result: {reason}",
    )


def check_local_output(value: Any) -> Mapping[str, Any]:
    """Return a local tier's stored output (``{raw, gflops, latency_s}``, ``modules.local_tier``) if valid.

    Raises:
        InvalidResult: If it is not an object, lacks a field, or its cost or latency is not a finite
            number >= 0.
    """
    if not isinstance(value, Mapping) or "raw" not in value:
        raise InvalidResult("a stored local-tier output must be an object with raw, gflops and latency_s")
    _seconds("gflops", value.get("gflops"))
    _seconds("latency_s", value.get("latency_s"))
    return value


def check_stored(value: Any) -> None:
    """Check any cache row or pack entry: an LLM call's result or a local tier's output.

    Raises:
        InvalidResult: As :func:`result_from_stored` or :func:`check_local_output`.
    """
    if isinstance(value, Mapping) and "raw" in value and "text" not in value:
        check_local_output(value)
    else:
        result_from_stored(value)
