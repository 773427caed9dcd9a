"""Budget tiers: how much compute a module may spend on one query."""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum


class Tier(IntEnum):
    """A module's budget tier; the router's action for that module (``Discrete(3)``)."""

    LOW = 0
    MID = 1
    HIGH = 2

    @classmethod
    def parse(cls, value: int | str | Tier) -> Tier:
        """Parse ``0/1/2``, ``"low"/"mid"/"high"``, ``"L"/"M"/"H"`` (any case, spaces ignored) or a ``Tier``.

        Raises:
            ValueError: For anything else, naming the value.
        """
        if isinstance(value, Tier):
            return value
        if isinstance(value, str):
            key = value.strip().upper()
            if key in cls.__members__:
                return cls[key]
            if key in _LETTERS:
                return _LETTERS[key]
            if key.isdigit():
                value = int(key)
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 2:
            return cls(value)
        raise ValueError(f"unknown tier {value!r}: expected one of LOW/MID/HIGH, L/M/H or 0/1/2")


#: One-letter spellings (``fixed:L,M,H,M,L`` baselines, tier-tuple CLIs).
_LETTERS: dict[str, Tier] = {t.name[0]: t for t in Tier}

#: The order in which the pipeline runs its modules and the router decides.
MODULE_ORDER: tuple[str, ...] = ("filter", "entity", "temporal", "topic", "summary")


def parse_tiers(spec: str | Sequence[int | str | Tier]) -> tuple[Tier, ...]:
    """Parse ``"L,M,H,M,L"`` (or ``"low,mid,..."``, or a sequence) into one tier per module.

    Example:
        >>> parse_tiers("L,M,H,M,L")[2]
        <Tier.HIGH: 2>
        >>> tiers_label(parse_tiers(["low", "mid", "mid", "mid", "high"]))
        'L,M,M,M,H'

    Raises:
        ValueError: If the count is not one per module in ``MODULE_ORDER`` or an entry is not a tier.
    """
    parts = [p.strip() for p in spec.split(",")] if isinstance(spec, str) else list(spec)
    if len(parts) != len(MODULE_ORDER):
        raise ValueError(
            f"tier tuple {spec!r} has {len(parts)} tiers, expected {len(MODULE_ORDER)} ({MODULE_ORDER})"
        )
    return tuple(Tier.parse(p) for p in parts)


def tiers_label(tiers: Sequence[int | str | Tier]) -> str:
    """Return the ``"L,M,H,M,L"`` spelling :func:`parse_tiers` reads (one letter per module)."""
    return ",".join(Tier.parse(t).name[0] for t in tiers)


def one_module_changes(base: Tier, to: Sequence[Tier]) -> list[tuple[str, Tier, tuple[Tier, ...]]]:
    """The paths that differ from the uniform ``base`` path in exactly one module.

    The single-module changes from all-MID (``to=(LOW, HIGH)``) are the issue's minimum oracle
    set besides the uniform paths; all-LOW with one module at MID is the headroom's upgrade set.

    Args:
        base: The tier every other module keeps.
        to: The tiers each module is changed to, in this order per module.

    Returns:
        ``(module, tier, tiers)`` per change: modules in ``MODULE_ORDER``, then tiers in ``to`` order.
    """
    n = len(MODULE_ORDER)
    return [
        (module, t, tuple(t if j == i else base for j in range(n)))
        for i, module in enumerate(MODULE_ORDER)
        for t in to
    ]
