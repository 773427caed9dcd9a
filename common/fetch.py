"""Download a catalogued data file from its official source and verify its pinned sha256.

What ``torchvision``'s ``download=True`` does for a dataset, for the files of :mod:`common.datafiles`:
the bytes stream into a temporary file next to the destination, are hashed on the way, and only a file
whose digest is the pinned one is moved into place (atomically), so an interrupted or corrupted download
never leaves a file a loader would trust. Every failure is one line naming the URL, the checksum and
where the file belongs, which is also what a user offline needs to fetch it by hand.

Environment:
    ``BUDGET_ROUTER_DOWNLOAD=0`` turns downloads off (a missing file is then an error naming its source).
    ``BUDGET_ROUTER_DATA_URL=<base URL>`` fetches every file as ``<base URL>/<name>`` instead of from its
    official host: a mirror, or a local server in tests.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import urllib.error
import urllib.request
from http.client import HTTPException
from pathlib import Path

from tqdm import tqdm

from common.datadir import DataFileError
from common.datafiles import CATALOGUE, DataFile

DOWNLOAD_ENV = "BUDGET_ROUTER_DOWNLOAD"
MIRROR_ENV = "BUDGET_ROUTER_DATA_URL"
_CHUNK = 1 << 20


class DataFetchError(DataFileError):
    """A data file could not be downloaded or did not match its pinned checksum."""


def download_enabled() -> bool:
    """Whether a missing catalogued file may be downloaded (``BUDGET_ROUTER_DOWNLOAD`` is not ``0``)."""
    return os.environ.get(DOWNLOAD_ENV, "1").strip().lower() not in {"0", "false", "no", "off"}


def fetchable(name: str) -> bool:
    """Whether a missing ``name`` would be downloaded: it is catalogued with a URL and downloads are on."""
    entry = CATALOGUE.get(name)
    return entry is not None and entry.url is not None and download_enabled()


def source_url(entry: DataFile) -> str | None:
    """The URL ``entry`` is fetched from: the mirror (``BUDGET_ROUTER_DATA_URL``) if set, else its own."""
    mirror = os.environ.get(MIRROR_ENV, "").strip()
    if mirror and entry.url:
        return f"{mirror.rstrip('/')}/{entry.name}"
    return entry.url


def manual_hint(entry: DataFile, dest: Path) -> str:
    """How to put ``entry`` in place by hand: source, checksum and destination."""
    where = entry.url or entry.how or entry.source
    return f"get {entry.name} from {where} (sha256 {entry.sha256}) and put it at {dest}"


def fetch(entry: DataFile, dest_dir: Path, *, timeout: float = 60.0, quiet: bool = False) -> Path:
    """Download ``entry`` into ``dest_dir`` and verify it (a file already there is replaced only on success).

    Args:
        entry: The catalogue entry.
        dest_dir: The data directory (created if missing).
        timeout: Seconds a connection may stay silent before the download fails.
        quiet: Print nothing (the default reports what was fetched, from where, and its size on stderr).

    Returns:
        The path of the verified file.

    Raises:
        DataFetchError: When the file has no download URL, the download fails or is cut short, or the
            bytes do not match the pinned sha256. Nothing is left at the destination in any of these cases.
    """
    dest = Path(dest_dir) / entry.name
    url = source_url(entry)
    if url is None:
        raise DataFetchError(f"{entry.name} cannot be downloaded ({entry.how}); {manual_hint(entry, dest)}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{entry.name}.", suffix=".part", dir=dest.parent)
    tmp = Path(tmp_name)
    digest = hashlib.sha256()
    received = 0
    try:
        with os.fdopen(fd, "wb") as out:
            request = urllib.request.Request(url, headers={"User-Agent": "budget-router-fetch"})
            with urllib.request.urlopen(request, timeout=timeout) as resp:
                announced = int(resp.headers.get("Content-Length") or 0)
                total = announced or entry.size
                with tqdm(total=total, unit="B", unit_scale=True, desc=entry.name, disable=quiet or None,
                          leave=False) as bar:
                    while chunk := resp.read(_CHUNK):
                        out.write(chunk)
                        digest.update(chunk)
                        received += len(chunk)
                        bar.update(len(chunk))
            # A connection dropped mid-body ends the stream early without an exception from read(n).
            if announced and received != announced:
                raise ConnectionError(f"connection closed early: {received} of {announced} bytes")
            out.flush()
            os.fsync(out.fileno())
        got = digest.hexdigest()
        if got != entry.sha256:
            raise DataFetchError(
                f"{entry.name} from {url}: sha256 {got} ({received} bytes) is not the pinned {entry.sha256}; "
                f"nothing was written to {dest} (the source changed or the download was corrupted)"
            )
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    except DataFetchError:
        tmp.unlink(missing_ok=True)
        raise
    except (urllib.error.URLError, HTTPException, OSError, ValueError) as exc:
        tmp.unlink(missing_ok=True)
        reason = getattr(exc, "reason", None) or exc
        raise DataFetchError(
            f"could not download {entry.name} from {url} after {received} bytes ({type(exc).__name__}: "
            f"{reason}); {manual_hint(entry, dest)}, or set BUDGET_ROUTER_DATA to a directory that holds it"
        ) from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if not quiet:
        print(f"fetched {entry.name} ({received / 1e6:.1f} MB) from {url} into {dest.parent}, "
              "sha256 verified", file=sys.stderr, flush=True)
    return dest
