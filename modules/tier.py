"""Budget tiers: how much compute a module may spend on one query."""

from __future__ import annotations

from enum import IntEnum


class Tier(IntEnum):
    """A module's budget tier; the router's action for that module (``Discrete(3)``)."""

    LOW = 0
    MID = 1
    HIGH = 2

    @classmethod
    def parse(cls, value: int | str | Tier) -> Tier:
        """Parse ``0/1/2``, ``"low"/"mid"/"high"`` (any case) or a ``Tier``.

        Raises:
            ValueError: For anything else, naming the value.
        """
        if isinstance(value, Tier):
            return value
        if isinstance(value, str):
            key = value.strip().upper()
            if key in cls.__members__:
                return cls[key]
            if key.isdigit():
                value = int(key)
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 2:
            return cls(value)
        raise ValueError(f"unknown tier {value!r}: expected one of LOW/MID/HIGH or 0/1/2")


#: The order in which the pipeline runs its modules and the router decides.
MODULE_ORDER: tuple[str, ...] = ("filter", "entity", "temporal", "topic", "summary")
