"""HTM-EAR benchmark data: the synthetic fact stream (scenarios A/B/C) and the BGL_2k real logs.

Synthetic fact ``i`` (1..n), with region, cause and service drawn in that order from
``random.Random(seed)``::

    "ENTRY {i}: {service} in {region} logged {cause} at Subsystem-{i % 1000}. Hex: 0x{i:04X}."
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from memory.entities import EntityExtractor

REGIONS: tuple[str, ...] = tuple(f"Region-{r}" for r in range(25))
CAUSES: tuple[str, ...] = (
    "Memory Overflow",
    "CPU Throttling",
    "Disk Saturation",
    "Kernel Panic",
    "I/O Wait",
    "OOM Killer",
)
SERVICES: tuple[str, ...] = ("Auth-Svc", "Inference-Engine", "Data-Lake", "API-Gateway", "Stream-Processor")

ESSENTIAL_IMPORTANCE = 0.95
NORMAL_IMPORTANCE = 0.5


@dataclass(frozen=True)
class Scenario:
    """Sizes of one synthetic scenario."""

    name: str
    n: int
    l1_capacity: int
    l2_capacity: int


#: The paper's scenarios (A overflow, B saturation, C control).
SCENARIOS: dict[str, Scenario] = {
    "A": Scenario("A", 3000, 500, 5000),
    "B": Scenario("B", 15000, 500, 5000),
    "C": Scenario("C", 5000, 1000, 14000),
}


@dataclass
class BenchmarkData:
    """Facts in ingestion order and the evaluation queries.

    Attributes:
        texts: Fact texts; fact ``j`` (0-based position) is ingested ``j``-th.
        importance: Importance per fact.
        queries: One query per fact (aligned with ``texts``).
        eval_sets: Named lists of fact positions whose queries are evaluated.
        name: Data set name for reports.
    """

    texts: list[str]
    importance: list[float]
    queries: list[str]
    eval_sets: dict[str, list[int]] = field(default_factory=dict)
    name: str = ""


def generate_synthetic(n: int, seed: int) -> BenchmarkData:
    """Generate the synthetic stream of ``n`` facts (see docs/design/memory.md).

    Raises:
        ValueError: If ``n`` < 1.
    """
    if n < 1:
        raise ValueError(f"generate_synthetic: n must be >= 1, got {n}")
    rng = random.Random(seed)
    texts, imp, queries = [], [], []
    for i in range(1, n + 1):
        region = rng.choice(REGIONS)
        cause = rng.choice(CAUSES)
        service = rng.choice(SERVICES)
        sub = f"Subsystem-{i % 1000}"
        texts.append(f"ENTRY {i}: {service} in {region} logged {cause} at {sub}. Hex: 0x{i:04X}.")
        essential = i % 10 == 0 or cause == "Kernel Panic"
        imp.append(ESSENTIAL_IMPORTANCE if essential else NORMAL_IMPORTANCE)
        queries.append(
            f"Retrieve the Hex Code for the {cause} event in {region} involving {service} at {sub}."
        )
    active = list(range(max(0, n - 101), n))  # facts n-100..n (1-based), as the reference
    history = list(range(min(100, n)))  # facts 1..100
    return BenchmarkData(
        texts, imp, queries, {"active": active, "history": history}, name=f"synthetic-n{n}-s{seed}"
    )


_BGL_TEMPLATES = (
    "Find the log entry containing {focus}",
    "Show me the system logs regarding {focus}",
    "What was the recorded error status involving {focus}?",
    "Retrieve the log entry with {focus}",
)
_BGL_IMPORTANT = ("fatal", "error", "panic", "fail")


def load_bgl(path: Path, seed: int = 42, n_queries: int = 200) -> BenchmarkData:
    """Build the BGL_2k benchmark from a loghub ``BGL_2k.log`` file.

    Args:
        path: The log file.
        seed: Seeds query construction and the choice of evaluated lines.
        n_queries: How many lines' queries are evaluated.

    Raises:
        ValueError: If the file holds no non-empty line.
    """
    lines = [ln.strip() for ln in path.read_text(encoding="utf-8", errors="replace").splitlines()]
    lines = [ln for ln in lines if ln]
    if not lines:
        raise ValueError(f"{path}: no log lines")
    rng = random.Random(seed)
    ext = EntityExtractor("bgl")
    imp, queries = [], []
    for idx, line in enumerate(lines, start=1):
        low = line.lower()
        imp.append(ESSENTIAL_IMPORTANCE if any(w in low for w in _BGL_IMPORTANT) else NORMAL_IMPORTANCE)
        ents = sorted(ext.extract(line))
        if ents:
            focus = " and ".join(rng.sample(ents, min(2, len(ents))))
            queries.append(rng.choice(_BGL_TEMPLATES).format(focus=focus))
        else:
            queries.append(f"Retrieve log entry {idx}")
    chosen = sorted(rng.sample(range(len(lines)), min(n_queries, len(lines))))
    return BenchmarkData(lines, imp, queries, {"all": chosen}, name=f"bgl-{path.name}-s{seed}")
