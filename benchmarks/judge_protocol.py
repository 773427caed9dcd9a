"""What a judge protocol is: versioned prompt templates, which questions it judges, and a strict parser."""

from __future__ import annotations

import abc
import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any, ClassVar

from benchmarks.types import Question


def hash_templates(version: str, templates: Mapping[str, str]) -> str:
    """16-hex sha256 of a version tag and its templates.

    One template hashes as the version, a newline and the template (the form
    :mod:`benchmarks.judge` has always used, so existing records keep their hash); several hash in
    key order with their keys.
    """
    if len(templates) == 1:
        blob = f"{version}\n{next(iter(templates.values()))}"
    else:
        blob = version + "".join(f"\n[{k}]\n{templates[k]}" for k in sorted(templates))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


class JudgeProtocol(abc.ABC):
    """Base class of judge protocols (stateless; one shared instance per protocol).

    Attributes:
        name: Registry name (``judge.protocol`` in configs).
        version: Version tag, part of the hash.
        json_schema: Output schema for backends that constrain decoding, or None.
        max_tokens: Generation cap of a verdict.
    """

    name: ClassVar[str]
    version: ClassVar[str]
    json_schema: ClassVar[dict[str, Any] | None] = None
    max_tokens: ClassVar[int] = 160

    @abc.abstractmethod
    def templates(self) -> dict[str, str]:
        """Every prompt template, by key (format fields ``question``, ``gold``, ``prediction``)."""

    def template_key(self, question: Question) -> str:
        """The key of the template used for ``question`` (``default`` for one-template protocols)."""
        return "default"

    @abc.abstractmethod
    def parse(self, raw: str) -> tuple[float, str]:
        """``(score in [0, 1], explanation)`` from the judge's output.

        Raises:
            ValueError: If no verdict can be read.
        """

    def excluded(self, question: Question) -> str | None:
        """Why the protocol does not judge ``question`` (then no call is made), or None."""
        return None

    @property
    def prompt_hash(self) -> str:
        """Hash of :attr:`version` and all :meth:`templates`."""
        return hash_templates(self.version, self.templates())

    def prompt(self, question: Question, prediction: str) -> str:
        """The filled-in prompt judging ``prediction`` for ``question``."""
        template = self.templates()[self.template_key(question)]
        return template.format(question=question.question, gold=question.answer, prediction=prediction)


def one_label(raw: str, labels: Mapping[str, float], what: str, first_word: bool = True) -> float:
    """The score of the single label word found in ``raw`` (case-insensitive, whole words).

    With ``first_word``, a leading label decides ("No, because ..."); otherwise exactly one of the
    labels may occur. Output naming none or several labels is ambiguous.

    Raises:
        ValueError: For no label or several different labels.
    """
    words = re.findall(r"[a-z]+", raw.lower())
    keys = {k.lower(): v for k, v in labels.items()}
    if first_word and words and words[0] in keys:
        return keys[words[0]]
    found = {w for w in words if w in keys}
    if len(found) != 1:
        shown = "none" if not found else " and ".join(sorted(found))
        raise ValueError(f"{what}: expected one of {sorted(labels)} in {raw[:80]!r}, found {shown}")
    return keys[found.pop()]


def json_object(raw: str) -> dict[str, Any] | None:
    """The JSON object between the first ``{`` and the last ``}`` of ``raw``, or None.

    Judges often wrap the object in code fences or chatter; None when there is no object or it does
    not decode.
    """
    start, end = raw.find("{"), raw.rfind("}")
    if start == -1 or end <= start:
        return None
    try:
        obj = json.loads(raw[start : end + 1])
    except json.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) else None
