"""Stream the elements of a top-level JSON list without holding the whole document."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from common.datadir import DataFileError

#: Characters read per block.
BLOCK = 1 << 22
#: A decode error further than this from the buffer's end is a real syntax error, not a cut element.
_SLACK = 1 << 20


def iter_json_list(fh: TextIO, path: Path, block: int = BLOCK) -> Iterator[Any]:
    """Yield the elements of the JSON list read from ``fh``.

    Args:
        fh: Text stream positioned at the start of the document.
        path: File name for error messages.
        block: Characters per read.

    Raises:
        DataFileError: If the document is not a list, is malformed, or ends early
            (the message names the file and the element index).
    """
    decoder = json.JSONDecoder()
    buf = ""
    pos = 0
    eof = False

    def fill() -> bool:
        nonlocal buf, pos, eof
        if eof:
            return False
        more = fh.read(block)
        if not more:
            eof = True
            return False
        buf = buf[pos:] + more
        pos = 0
        return True

    def skip_ws() -> str | None:
        nonlocal pos
        while True:
            while pos < len(buf) and buf[pos] in " \t\r\n":
                pos += 1
            if pos < len(buf):
                return buf[pos]
            if not fill():
                return None

    if skip_ws() != "[":
        raise DataFileError(
            f"{path}: record <top level>: field <json>: expected a JSON list starting with '['"
        )
    pos += 1
    index = 0
    while True:
        ch = skip_ws()
        if ch is None:
            raise DataFileError(
                f"{path}: record index {index}: field <json>: file ends inside the list (truncated)"
            )
        if ch == "]":
            return
        if index > 0:
            if ch != ",":
                raise DataFileError(
                    f"{path}: record index {index}: field <json>: expected ',' between records"
                )
            pos += 1
            if skip_ws() is None:
                raise DataFileError(
                    f"{path}: record index {index}: field <json>: file ends after ',' (truncated)"
                )
        while True:
            try:
                obj, end = decoder.raw_decode(buf, pos)
                break
            except json.JSONDecodeError as exc:
                may_be_cut = exc.pos >= len(buf) - _SLACK or exc.msg.startswith("Unterminated")
                if may_be_cut and fill():
                    continue
                # With the whole rest of the file in the buffer, an error at its very end (or an
                # unterminated string) means the file stops early; anything else is bad syntax.
                cut = exc.pos >= len(buf.rstrip()) or exc.msg.startswith("Unterminated")
                what = "file ends inside this record (truncated)" if cut else f"invalid JSON ({exc.msg})"
                raise DataFileError(f"{path}: record index {index}: field <json>: {what}") from exc
        yield obj
        pos = end
        index += 1
        if pos > block:  # drop consumed text so the buffer does not grow with the file
            buf = buf[pos:]
            pos = 0
