"""Read an offline wandb run file (``run-<id>.wandb``) back, for tests.

The file is wandb's transaction log: a 7-byte header (``:W&B``, a 2-byte magic, a version byte), then
LevelDB-style log blocks of 32 KiB whose records (7-byte header: CRC32, length, type FULL/FIRST/MIDDLE/LAST)
carry serialised ``wandb_internal_pb2.Record`` messages. wandb 0.31 ships no Python reader for it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BLOCK = 32 * 1024
HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def _payloads(data: bytes) -> Iterator[bytes]:
    pos, pending = HEADER, b""
    while pos + 7 <= len(data):
        left = BLOCK - (pos % BLOCK)
        if left < 7:  # the block's tail is padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        body = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind == 0 and length == 0:  # zero padding
            continue
        if kind == FULL:
            yield body
        elif kind == FIRST:
            pending = body
        elif kind == MIDDLE:
            pending += body
        elif kind == LAST:
            yield pending + body
            pending = b""


def records(path: Path) -> list[Any]:
    """Every record of the run file, in order (``wandb_internal_pb2.Record``)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a wandb run file"
    out = []
    for payload in _payloads(data):
        record = pb.Record()
        record.ParseFromString(payload)
        out.append(record)
    return out


def run_files(root: Path) -> list[Path]:
    """The ``.wandb`` files under ``root`` (one per offline run directory)."""
    return sorted(root.rglob("*.wandb"))
