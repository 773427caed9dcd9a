"""Data that fetches itself: downloads from a local HTTP server standing in for the official sources.

Covers a good file, a wrong checksum, a dropped connection, no network, downloads switched off, the
``benchmarks.fetch`` command, and a training run that starts with no data directory at all.
"""

from __future__ import annotations

import hashlib
import http.server
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

import pytest

from benchmarks import fetch as fetch_cli
from common.datadir import DataFileError, data_file, resolve_data_dir
from common.datafiles import CATALOGUE, DataFile, files_of
from common.fetch import DataFetchError, fetch
from tests.support import TINY_TRAIN_OVERRIDES

ROOT = Path(__file__).resolve().parent.parent
PAYLOAD = b'{"hello": "data"}\n' * 1000


class _Handler(http.server.BaseHTTPRequestHandler):
    """Serves ``files`` by name; a name in ``drop`` announces its full length and sends half."""

    files: ClassVar[dict[str, bytes]] = {}
    drop: ClassVar[set[str]] = set()
    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        name = self.path.rsplit("/", 1)[-1]
        self.hits.append(name)
        body = self.files.get(name)
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if name in self.drop:
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, type[_Handler]]]:
    handler = type("Handler", (_Handler,), {"files": {}, "drop": set(), "hits": []})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/files", handler
    httpd.shutdown()
    httpd.server_close()


def _entry(url: str, body: bytes = PAYLOAD, name: str = "demo.json") -> DataFile:
    return DataFile(name, "demo", len(body), hashlib.sha256(body).hexdigest(), "test", "a test server",
                    url=f"{url}/{name}")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_good_file_is_downloaded_verified_and_reported(server, tmp_path, capsys) -> None:
    url, handler = server
    handler.files["demo.json"] = PAYLOAD
    path = fetch(_entry(url), tmp_path / "data")
    assert path.read_bytes() == PAYLOAD
    assert "fetched demo.json" in capsys.readouterr().err
    assert sorted(p.name for p in path.parent.iterdir()) == ["demo.json"]  # no temporary left


def test_a_wrong_checksum_leaves_nothing_and_names_both_digests(server, tmp_path) -> None:
    url, handler = server
    handler.files["demo.json"] = PAYLOAD + b"tampered"
    entry = _entry(url)
    with pytest.raises(DataFetchError) as info:
        fetch(entry, tmp_path)
    msg = str(info.value)
    assert entry.sha256 in msg and hashlib.sha256(PAYLOAD + b"tampered").hexdigest() in msg
    assert entry.url in msg and str(tmp_path / "demo.json") in msg
    assert list(tmp_path.iterdir()) == []


def test_a_dropped_connection_leaves_nothing(server, tmp_path) -> None:
    url, handler = server
    handler.files["demo.json"] = PAYLOAD
    handler.drop.add("demo.json")
    with pytest.raises(DataFetchError, match=r"could not download demo.json .* after \d+ bytes"):
        fetch(_entry(url), tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_offline_is_one_line_with_url_checksum_and_destination(tmp_path) -> None:
    entry = _entry(f"http://127.0.0.1:{_closed_port()}/files")
    with pytest.raises(DataFetchError) as info:
        fetch(entry, tmp_path, timeout=5)
    msg = str(info.value)
    assert "\n" not in msg
    assert entry.url in msg and entry.sha256 in msg and str(tmp_path / "demo.json") in msg


def test_a_missing_official_file_is_fetched_from_the_mirror(server, tmp_path, monkeypatch) -> None:
    url, handler = server
    locomo = CATALOGUE["locomo10.json"]
    monkeypatch.setitem(CATALOGUE, locomo.name, replace(locomo, size=len(PAYLOAD),
                                                        sha256=hashlib.sha256(PAYLOAD).hexdigest()))
    handler.files[locomo.name] = PAYLOAD
    monkeypatch.setenv("BUDGET_ROUTER_DATA_URL", url)
    monkeypatch.delenv("BUDGET_ROUTER_DOWNLOAD", raising=False)
    target = tmp_path / "not-yet" / "data"  # not even the directory exists
    assert data_file(locomo.name, target).read_bytes() == PAYLOAD
    assert data_file(locomo.name, target).read_bytes() == PAYLOAD  # present: no second download
    assert handler.hits == [locomo.name]


def test_downloads_off_names_the_source_and_checksum(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("BUDGET_ROUTER_DOWNLOAD", "0")
    (tmp_path / "data").mkdir()
    with pytest.raises(DataFileError) as info:
        data_file("locomo10.json", tmp_path / "data")
    entry = CATALOGUE["locomo10.json"]
    assert entry.url in str(info.value) and entry.sha256 in str(info.value)
    with pytest.raises(DataFileError, match="data directory not found"):
        resolve_data_dir(tmp_path / "absent")


def test_a_derived_file_says_where_it_comes_from(tmp_path) -> None:
    with pytest.raises(DataFileError, match="BudgetMem"):
        data_file("longmemeval_s_splits_qids.json", tmp_path)


def test_the_fetch_command_fetches_verifies_and_refuses_a_changed_file(server, tmp_path, monkeypatch,
                                                                       capsys) -> None:
    url, handler = server
    for entry in files_of("bgl"):  # real pinned checksums: serve the real files where this machine has them
        try:
            handler.files[entry.name] = resolve_data_dir().joinpath(entry.name).read_bytes()
        except (DataFileError, OSError):
            pytest.skip("the BGL files are not in this machine's data directory")
    monkeypatch.setenv("BUDGET_ROUTER_DATA_URL", url)
    data = tmp_path / "data"
    assert fetch_cli.main(["bgl", "--data-dir", str(data)]) == 0
    assert "fetched  BGL_2k.log" in capsys.readouterr().out
    assert fetch_cli.main(["bgl", "--data-dir", str(data)]) == 0
    assert "present  BGL_2k.log: sha256 verified" in capsys.readouterr().out
    (data / "BGL_2k.log").write_text("edited")
    assert fetch_cli.main(["bgl", "--data-dir", str(data)]) == 1
    assert "mismatch BGL_2k.log" in capsys.readouterr().out
    assert fetch_cli.main(["bgl", "--data-dir", str(data), "--force"]) == 0
    assert (data / "BGL_2k.log").read_bytes() == handler.files["BGL_2k.log"]
    with pytest.raises(SystemExit):
        fetch_cli.main(["lococo"])


def test_the_docs_list_every_catalogued_file() -> None:
    table = fetch_cli.catalogue_markdown()
    for page in ("docs/getting-started.md",):
        assert table in (ROOT / page).read_text(encoding="utf-8"), (
            f"{page}: regenerate the data table with `python -m benchmarks.fetch --list`")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert all(f"`{name}`" in readme for name in CATALOGUE if CATALOGUE[name].required)


@pytest.mark.slow
def test_training_starts_from_no_data_directory(server, tmp_path) -> None:
    """What `make train` meets on a fresh machine: no data directory; the run fetches LoCoMo and trains."""
    url, handler = server
    try:
        handler.files["locomo10.json"] = data_file("locomo10.json").read_bytes()
    except DataFileError:
        pytest.skip("LoCoMo is not on this machine to serve")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(BUDGET_ROUTER_DATA=str(tmp_path / "fresh" / "data"), BUDGET_ROUTER_DATA_URL=url,
               BUDGET_ROUTER_CACHE=str(tmp_path / "cache"), OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    env.pop("BUDGET_ROUTER_DOWNLOAD", None)
    out = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), *TINY_TRAIN_OVERRIDES, f"runs_dir={tmp_path / 'runs'}",
         f"cache.path={tmp_path / 'cache' / 'calls.sqlite'}",
         f"question_bank.cache_dir={tmp_path / 'banks'}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "fetched locomo10.json" in out.stderr
    assert (tmp_path / "fresh" / "data" / "locomo10.json").is_file()
    assert handler.hits == ["locomo10.json"]
