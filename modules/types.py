"""Plain data types passed between memory retrieval, the modules and the environment."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Evidence:
    """One retrieved memory chunk as the extraction modules see it.

    Attributes:
        chunk_id: Stable id of the chunk inside its history.
        text: The chunk text (already rendered, e.g. ``Alice said, "..."``).
        timestamp: Free-text date/time of the chunk's session, if known.
        score: Retrieval score (higher is better).
        source_ids: Ids of the underlying turns/paragraphs (for evidence recall).
    """

    chunk_id: str
    text: str
    timestamp: str | None = None
    score: float = 0.0
    source_ids: tuple[str, ...] = field(default_factory=tuple)
