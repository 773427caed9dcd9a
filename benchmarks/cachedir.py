"""Where derived caches live: ``$BUDGET_ROUTER_CACHE`` or ``~/.cache/budget_router``."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "BUDGET_ROUTER_CACHE"


def cache_root() -> Path:
    """The root directory for derived caches (created on demand)."""
    root = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "budget_router").expanduser()
    root.mkdir(parents=True, exist_ok=True)
    return root
