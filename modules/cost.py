"""Cost of one module call (or a sum of them) in tokens, latency and a configured unit."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Cost:
    """What a call cost. Costs add up with ``+``.

    Attributes:
        value: Cost in the configured unit (GFLOPs for local models, or USD from a price table).
        tokens_in: Prompt tokens (0 for non-LLM tiers).
        tokens_out: Generated tokens.
        latency_s: Wall-clock seconds spent (0 for a cache hit's replay is *not* used: the
            original latency is kept so that cost does not depend on cache state).
        calls: Number of LLM calls.
        cache_hits: How many of those calls were served from the call cache.
        failures: Calls that errored or whose output could not be parsed.
        models: Model ids involved (sorted, de-duplicated).
    """

    value: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0
    latency_s: float = 0.0
    calls: int = 0
    cache_hits: int = 0
    failures: int = 0
    models: tuple[str, ...] = field(default_factory=tuple)

    def __add__(self, other: Cost) -> Cost:
        if not isinstance(other, Cost):
            return NotImplemented
        return Cost(
            value=self.value + other.value,
            tokens_in=self.tokens_in + other.tokens_in,
            tokens_out=self.tokens_out + other.tokens_out,
            latency_s=self.latency_s + other.latency_s,
            calls=self.calls + other.calls,
            cache_hits=self.cache_hits + other.cache_hits,
            failures=self.failures + other.failures,
            models=tuple(sorted(set(self.models) | set(other.models))),
        )

    def to_dict(self) -> dict[str, object]:
        """Return a JSON-friendly dict."""
        return {
            "value": self.value,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "latency_s": self.latency_s,
            "calls": self.calls,
            "cache_hits": self.cache_hits,
            "failures": self.failures,
            "models": list(self.models),
        }
