"""History -> memory chunks."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass

from benchmarks.types import History, Session, Turn

_TOKEN_RE = re.compile(r"\w+|[^\w\s]")
GRANULARITIES = ("packed", "turn")


def count_tokens(text: str) -> int:
    """Words plus punctuation marks: a model-free, deterministic token count."""
    return len(_TOKEN_RE.findall(text))


@dataclass(frozen=True)
class ChunkingConfig:
    """How histories are cut into chunks.

    Attributes:
        max_tokens: Upper bound on a chunk's :func:`count_tokens` (long turns are split).
        granularity: ``"packed"`` (consecutive turns up to ``max_tokens``) or ``"turn"``.
    """

    max_tokens: int = 128
    granularity: str = "packed"

    def __post_init__(self) -> None:
        if self.granularity not in GRANULARITIES:
            raise ValueError(
                f"ChunkingConfig.granularity must be one of {GRANULARITIES}, got {self.granularity!r}"
            )
        if not isinstance(self.max_tokens, int) or self.max_tokens < 8:
            raise ValueError(f"ChunkingConfig.max_tokens must be an int >= 8, got {self.max_tokens!r}")


@dataclass(frozen=True)
class Chunk:
    """One unit of memory.

    Attributes:
        chunk_id: ``{history_id}#c{n}`` with ``n`` the chunk's position in the history.
        text: Rendered text (what is embedded and shown to the modules).
        turn_ids: Ids of the turns the chunk contains (in order, without duplicates).
        session_id: The session it comes from.
        timestamp: The session's date/time.
    """

    chunk_id: str
    text: str
    turn_ids: tuple[str, ...]
    session_id: str
    timestamp: str | None


def render_turn(turn: Turn) -> str:
    """``{speaker} said, "{text}"`` plus `` and shared {caption}`` for an image."""
    text = f'{turn.speaker} said, "{turn.text}"'
    if turn.image_caption:
        text += f" and shared {turn.image_caption}"
    return text


def split_long(text: str, max_tokens: int) -> list[str]:
    """Cut ``text`` into consecutive pieces of at most ``max_tokens`` tokens (at token starts)."""
    starts = [m.start() for m in _TOKEN_RE.finditer(text)]
    if len(starts) <= max_tokens:
        return [text]
    cuts = [*starts[::max_tokens], len(text)]
    return [text[a:b].strip() for a, b in itertools.pairwise(cuts) if text[a:b].strip()]


def _session_units(session: Session, kind: str, max_tokens: int) -> tuple[str, list[tuple[str, str]]]:
    """(chunk prefix, [(turn id, rendered unit)]) of a session, long units already split."""
    units: list[tuple[str, str]] = []
    if kind == "document":
        prefix = f"{session.session_id}: "
        budget = max_tokens - count_tokens(prefix)
        for turn in session.turns:
            units.extend((turn.turn_id, piece) for piece in split_long(turn.text, budget))
        return prefix, units
    for turn in session.turns:
        units.extend((turn.turn_id, piece) for piece in split_long(render_turn(turn), max_tokens))
    return "", units


def chunk_history(history: History, config: ChunkingConfig | None = None) -> list[Chunk]:
    """Cut a history into chunks in time order (see docs/design/benchmarks.md).

    Args:
        history: The history (``kind`` ``"dialogue"`` or ``"document"``).
        config: Chunking options (default :class:`ChunkingConfig`).

    Returns:
        The chunks, in session and turn order.

    Raises:
        ValueError: For an unknown history kind.
    """
    cfg = config or ChunkingConfig()
    if history.kind not in ("dialogue", "document"):
        raise ValueError(f"history {history.history_id}: unknown kind {history.kind!r}")
    joiner = " " if history.kind == "document" else "\n"
    chunks: list[Chunk] = []

    def emit(session: Session, prefix: str, parts: list[tuple[str, str]]) -> None:
        ids = tuple(dict.fromkeys(tid for tid, _ in parts))
        text = prefix + joiner.join(p for _, p in parts)
        chunks.append(
            Chunk(f"{history.history_id}#c{len(chunks)}", text, ids, session.session_id, session.timestamp)
        )

    size: Callable[[str], int] = count_tokens
    for session in history.sessions:
        prefix, units = _session_units(session, history.kind, cfg.max_tokens)
        current: list[tuple[str, str]] = []
        used = size(prefix)
        for tid, unit in units:
            n = size(unit)
            new_turn = cfg.granularity == "turn" and tid != current[-1][0] if current else False
            if current and (new_turn or used + n > cfg.max_tokens):
                emit(session, prefix, current)
                current, used = [], size(prefix)
            current.append((tid, unit))
            used += n
        if current:
            emit(session, prefix, current)
    return chunks
