"""Per-encoder calibration of the gate's similarity threshold."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from common.atomic import atomic_write_json
from memory.encoder import Encoder, get_encoder

#: Where calibrated thresholds are stored (committed with the code).
THRESHOLDS_FILE = Path(__file__).with_name("gate_thresholds.json")

#: Thresholds published with other encoders (not calibrated here).
REFERENCE_THRESHOLDS: dict[str, float] = {"e5-large-v2": 0.84}

#: Calibration data: synthetic seed and size (no benchmark run uses seed 7).
CALIBRATION_SEED = 7
CALIBRATION_N = 2000


@dataclass(frozen=True)
class Calibration:
    """A calibrated gate threshold and the evidence behind it."""

    encoder: str
    threshold: float
    quantile: float
    n_queries: int
    n_answerable: int
    false_pass_rate: float
    source: str
    created: str


def top1_similarities(fact_vecs: np.ndarray, query_vecs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-1 fact index and similarity for each query (brute force, unit vectors)."""
    sims = query_vecs @ fact_vecs.T
    best = sims.argmax(axis=1)
    return best, sims[np.arange(len(best)), best]


def calibrate_gate_threshold(
    encoder: Encoder,
    facts: Sequence[str],
    queries: Sequence[str],
    gold: Sequence[int],
    quantile: float = 0.05,
    source: str = "custom",
) -> Calibration:
    """Compute a gate threshold for ``encoder`` (method: docs/design/memory.md).

    Args:
        encoder: The encoder the memory will use.
        facts: Fact texts.
        queries: Query texts.
        gold: For each query, the index of its answer in ``facts``.
        quantile: Quantile of answerable queries' top-1 similarity used as the threshold.
        source: Free-text description of the calibration data (recorded).

    Returns:
        The calibration record.

    Raises:
        ValueError: On misaligned inputs, a bad quantile, or no answerable query.
    """
    if len(queries) != len(gold):
        raise ValueError(f"calibrate_gate_threshold: {len(queries)} queries but {len(gold)} gold indices")
    if not 0.0 < quantile < 1.0:
        raise ValueError(f"calibrate_gate_threshold: quantile must be in (0, 1), got {quantile}")
    gold_arr = np.asarray(gold, dtype=np.int64)
    fv = encoder.encode(list(facts))
    qv = encoder.encode(list(queries))
    best, top1 = top1_similarities(fv, qv)
    answerable = best == gold_arr
    if not answerable.any():
        raise ValueError("calibrate_gate_threshold: no query retrieves its gold fact at rank 1")
    threshold = float(np.quantile(top1[answerable], quantile))
    # Queries whose answer is absent: mask the gold fact and look at the best remaining similarity.
    sims = qv @ fv.T
    sims[np.arange(len(gold_arr)), gold_arr] = -np.inf
    false_pass = float((sims.max(axis=1) >= threshold).mean())
    return Calibration(
        encoder=encoder.name,
        threshold=round(threshold, 4),
        quantile=quantile,
        n_queries=len(queries),
        n_answerable=int(answerable.sum()),
        false_pass_rate=round(false_pass, 4),
        source=source,
        created=_dt.date.today().isoformat(),
    )


def load_thresholds(path: Path = THRESHOLDS_FILE) -> dict[str, dict[str, object]]:
    """Return the stored calibrations ``{encoder: record}`` (empty if the file does not exist)."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected an object mapping encoder names to calibrations")
    return data


def gate_threshold_for(encoder_name: str, path: Path = THRESHOLDS_FILE) -> float:
    """Return the calibrated gate threshold for an encoder.

    Raises:
        ValueError: If the encoder was never calibrated (names the fix).
    """
    stored = load_thresholds(path)
    if encoder_name in stored:
        return float(stored[encoder_name]["threshold"])  # type: ignore[arg-type]
    if encoder_name in REFERENCE_THRESHOLDS:
        return REFERENCE_THRESHOLDS[encoder_name]
    raise ValueError(
        f"no calibrated gate threshold for encoder {encoder_name!r} (known: {sorted(stored)}). "
        f"Run `python -m memory.calibration --encoder {encoder_name}` or set MemoryConfig(gate_threshold=...)"
    )


def calibrate_on_synthetic(encoder: Encoder, quantile: float = 0.05) -> Calibration:
    """Calibrate ``encoder`` on the synthetic generator (seed :data:`CALIBRATION_SEED`)."""
    from memory.scenarios import generate_synthetic

    data = generate_synthetic(CALIBRATION_N, CALIBRATION_SEED)
    return calibrate_gate_threshold(
        encoder,
        data.texts,
        data.queries,
        list(range(len(data.texts))),
        quantile=quantile,
        source=f"synthetic seed={CALIBRATION_SEED} n={CALIBRATION_N}",
    )


def main(argv: list[str] | None = None) -> int:
    """CLI: calibrate encoders and store the thresholds in :data:`THRESHOLDS_FILE`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoder", action="append", default=None, help="encoder name (repeatable)")
    parser.add_argument("--quantile", type=float, default=0.05)
    args = parser.parse_args(argv)
    stored = load_thresholds()
    for name in args.encoder or ["minilm", "hashing"]:
        cal = calibrate_on_synthetic(get_encoder(name), args.quantile)
        stored[name] = asdict(cal)
        print(json.dumps(asdict(cal)))
    atomic_write_json(THRESHOLDS_FILE, stored)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
