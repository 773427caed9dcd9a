"""Cost of one module call (or a sum of them) in tokens, latency and a configured unit."""

from __future__ import annotations

from dataclasses import dataclass, field

from common.redact import redact_text

#: How many distinct failure reasons a cost keeps (the first ones seen).
MAX_ERRORS = 3
#: How long one kept reason may be (a server's whole HTML error page is not a reason).
MAX_ERROR_CHARS = 300


def merge_errors(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    """The first :data:`MAX_ERRORS` distinct reasons of ``a`` then ``b``, each cut to a readable length.

    Reasons are redacted (``common.redact``): a connection error quotes its URL, credentials included, and
    reasons reach episode records and error messages.
    """
    out: list[str] = []
    for raw in (*a, *b):
        e = redact_text(raw)
        e = e if len(e) <= MAX_ERROR_CHARS else e[: MAX_ERROR_CHARS - 1] + "…"
        if e not in out:
            out.append(e)
        if len(out) == MAX_ERRORS:
            break
    return tuple(out)


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
        errors: Why calls failed, the first :data:`MAX_ERRORS` distinct reasons (``HTTP 500: boom``, a
            reply field that does not parse): what a failure budget that stops a run prints. Not part
            of equality, and not in :meth:`to_dict` when empty, so records without failures are as before.
    """

    value: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0
    latency_s: float = 0.0
    calls: int = 0
    cache_hits: int = 0
    failures: int = 0
    models: tuple[str, ...] = field(default_factory=tuple)
    errors: tuple[str, ...] = field(default=(), compare=False)

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
            errors=merge_errors(self.errors, other.errors),
        )

    def to_dict(self) -> dict[str, object]:
        """Return a JSON-friendly dict."""
        extra: dict[str, object] = {"errors": list(self.errors)} if self.errors else {}
        return {
            "value": self.value,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "latency_s": self.latency_s,
            "calls": self.calls,
            "cache_hits": self.cache_hits,
            "failures": self.failures,
            "models": list(self.models),
            **extra,
        }
