"""Nothing bad gets in: malformed replies, cache rows and pack entries (issue 49, items 1 and 8).

A real local HTTP server sends HTTP 200 replies of the right shape with wrong types or values. Each must be
a counted failure of the call, never a crash and never a cached success; a cache row that fails the result
check is a miss (reported once, with its key) and is recomputed; a pack carrying such a value, its hashes
recomputed, is refused before anything is written; and an import never overwrites a value another writer
stored meanwhile.
"""

from __future__ import annotations

import gzip
import json
import sqlite3
import subprocess
import sys
import threading
import warnings
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from modules.backends import get_backend
from modules.backends.base import GenerationRequest
from modules.cache import CachedLLM, CallCache, call_key
from modules.cache_pack import PackError, export_pack, import_pack

ROOT = Path(__file__).resolve().parents[1]
#: A small committed pack (the powered study's first block): enough for the command-line checks.
PACK = ROOT / "results" / "packs" / "powered" / "calls-29cbd016b00130de.pack.gz"
GOOD = {"choices": [{"message": {"content": "Miso"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2}}


def _with(**changes: Any) -> dict[str, Any]:
    reply = json.loads(json.dumps(GOOD))
    for path, value in changes.items():
        node = reply
        *parents, last = path.split("__")
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        node[int(last) if last.isdigit() else last] = value
    return reply


#: (name, reply body, words the failure must name)
BAD_REPLIES = [
    ("choice is a string", {"choices": ["hello"], "usage": GOOD["usage"]}, "choices"),
    ("message is a string", _with(choices__0__message="hello"), "message"),
    ("content is a number", _with(choices__0__message={"content": 12345}), "content"),
    ("content is null", _with(choices__0__message={"content": None}), "no content"),
    (
        "content filtered",
        _with(choices__0__message={"content": None}, choices__0__finish_reason="content_filter"),
        "content_filter",
    ),
    ("content is empty", _with(choices__0__message={"content": ""}), "empty"),
    ("prompt tokens a word", _with(usage={"prompt_tokens": "many", "completion_tokens": 1}), "prompt_tokens"),
    ("negative completion tokens", _with(usage={"prompt_tokens": 5, "completion_tokens": -26882}),
     "completion_tokens"),
    ("tokens are a boolean", _with(usage={"prompt_tokens": True, "completion_tokens": 1}), "prompt_tokens"),
    ("no choices", {"choices": [], "usage": GOOD["usage"]}, "choices"),
    ("reply is a list", [GOOD], "object"),
]


class Replies:
    """The replies the server sends, in order, then GOOD forever."""

    def __init__(self) -> None:
        self.queue: list[Any] = []
        self.lock = threading.Lock()
        self.requests = 0


@pytest.fixture
def server() -> Iterator[tuple[str, Replies]]:
    replies = Replies()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            with replies.lock:
                replies.requests += 1
                body = replies.queue.pop(0) if replies.queue else GOOD
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", replies
    httpd.shutdown()
    httpd.server_close()


def _llm(url: str, cache: CallCache | None) -> CachedLLM:
    backend = get_backend("openai", model="remote-7b", base_url=url, api_key_env=None, max_retries=0)
    return CachedLLM(backend, cache)


REQUEST = GenerationRequest(messages=({"role": "user", "content": "What is the cat called?"},), max_tokens=8)
TAGS = {"module": "answer"}


@pytest.mark.parametrize(("name", "reply", "named"), BAD_REPLIES, ids=[b[0] for b in BAD_REPLIES])
def test_a_bad_reply_is_a_counted_failure_and_never_cached(server, tmp_path, name, reply, named) -> None:
    url, replies = server
    replies.queue = [reply]
    cache = CallCache(tmp_path / "calls.sqlite")
    llm = _llm(url, cache)
    (result,) = llm.generate([REQUEST], tags=TAGS)
    assert not result.ok and result.text == "" and named in (result.error or ""), result.error
    assert len(cache) == 0, f"{name}: a failed call was cached"
    (again,) = llm.generate([REQUEST], tags=TAGS)  # a healthy reply now: computed, then cached
    assert again.ok and again.text == "Miso" and not again.cached and len(cache) == 1


def test_content_parts_are_joined(server, tmp_path) -> None:
    url, replies = server
    parts = [{"type": "text", "text": "Mi"}, {"type": "image_url", "image_url": {}}]
    parts.append({"type": "text", "text": "so"})
    replies.queue = [_with(choices__0__message={"content": parts})]
    (result,) = _llm(url, None).generate([REQUEST], tags=TAGS)
    assert result.ok and result.text == "Miso"


def _poison(cache_path: Path, key: str, value: Any) -> None:
    with sqlite3.connect(cache_path) as conn:
        conn.execute("UPDATE calls SET value = ? WHERE key = ?", (json.dumps(value), key))


@pytest.mark.parametrize(
    "bad",
    [
        {"text": ["not", "a", "string"]},
        {"tokens_in": "many"},
        {"tokens_out": -3},
        {"latency_s": float("inf")},
        {"finish_reason": "content_filter"},
    ],
    ids=["text-list", "tokens-word", "tokens-negative", "latency-inf", "finish-unknown"],
)
def test_an_invalid_cache_row_is_a_miss_reported_once_and_replaced(server, tmp_path, bad) -> None:
    url, replies = server
    path = tmp_path / "calls.sqlite"
    cache = CallCache(path)
    llm = _llm(url, cache)
    llm.generate([REQUEST], tags=TAGS)
    key = call_key(TAGS, llm.model_id, REQUEST, llm.numerics)
    good = cache.get(key)
    assert good is not None
    _poison(path, key, {**good, **bad})
    fresh = CallCache(path)
    llm = _llm(url, fresh)
    with pytest.warns(UserWarning, match=rf"entry {key} is not a valid call result"):
        result, _duplicate = llm.generate([REQUEST, REQUEST], tags=TAGS)
    assert result.ok and result.text == "Miso" and replies.requests == 2  # recomputed once
    replaced = fresh.get(key)  # the healthy result replaced the bad row
    assert replaced is not None and {k: replaced[k] for k in bad} != bad and replaced["text"] == "Miso"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (again,) = llm.generate([REQUEST], tags=TAGS)
    assert again.cached and again.text == "Miso"


def test_a_cache_row_that_is_not_an_object_is_a_miss(server, tmp_path) -> None:
    url, _replies = server
    path = tmp_path / "calls.sqlite"
    llm = _llm(url, CallCache(path))
    llm.generate([REQUEST], tags=TAGS)
    key = call_key(TAGS, llm.model_id, REQUEST, llm.numerics)
    _poison(path, key, ["hello"])
    with pytest.warns(UserWarning, match="must be a JSON object"):
        (result,) = _llm(url, CallCache(path)).generate([REQUEST], tags=TAGS)
    assert result.ok and not result.cached


def _source_cache(url: str, tmp_path: Path) -> tuple[Path, str]:
    """A cache with two healthy calls from the server; returns its path and REQUEST's key."""
    source = tmp_path / "source.sqlite"
    llm = _llm(url, CallCache(source))
    llm.generate([REQUEST, GenerationRequest(prompt="another")], tags=TAGS)
    return source, call_key(TAGS, llm.model_id, REQUEST, llm.numerics)


def test_a_pack_with_an_invalid_value_is_refused_before_anything_is_written(server, tmp_path) -> None:
    url, _replies = server
    source, key = _source_cache(url, tmp_path)
    _poison(source, key, {**CallCache(source).get(key), "text": 12345})
    pack = export_pack(source, tmp_path / "packs").path  # every hash recomputed over the bad value
    target = CallCache(tmp_path / "target.sqlite")
    with pytest.raises(PackError, match=rf"entry {key} is not a valid cached result .*text must be a string"):
        import_pack(pack, target)
    assert len(target) == 0


def test_import_never_overwrites_a_value_stored_meanwhile(server, tmp_path) -> None:
    url, _replies = server
    source, key = _source_cache(url, tmp_path)
    pack = export_pack(source, tmp_path / "packs").path
    target = CallCache(tmp_path / "target.sqlite")
    theirs = {**CallCache(source).get(key), "text": "Miso the cat"}
    store = target.store
    original = store.put_new_many

    def racing_writer_first(items):  # another process stores the key between our read and write
        CallCache(tmp_path / "target.sqlite").put(key, theirs)
        return original(items)

    store.put_new_many = racing_writer_first  # type: ignore[method-assign]
    report = import_pack(pack, target)
    assert report.conflicts == [key] and report.imported == 1
    assert target.get(key) == theirs


def _cli(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "modules.cache_pack", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120, **kw,
    )


def test_import_into_a_directory_is_one_clear_line(tmp_path) -> None:
    out = _cli("import", str(PACK), "--cache", str(tmp_path))
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert f"--cache {tmp_path} is a directory; give the cache file" in out.stderr


def test_a_failed_import_leaves_no_empty_cache_file(tmp_path) -> None:
    bad = tmp_path / "bad.pack.gz"
    bad.write_bytes(gzip.compress(b"garbage"))
    target = tmp_path / "new.sqlite"
    out = _cli("import", str(bad), "--cache", str(target))
    assert out.returncode == 1 and "not a pack manifest" in out.stderr and "Traceback" not in out.stderr
    assert not list(tmp_path.glob("new.sqlite*"))


def test_inspect_into_a_closed_pipe_ends_quietly() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "modules.cache_pack", "inspect", str(PACK)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # `| head -0`: the reader is gone before the first line
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 0 and "BrokenPipeError" not in err and "Traceback" not in err


def test_stale_temporaries_of_dead_writers_are_removed_live_ones_kept(tmp_path) -> None:
    """Issue 49, item 11: `kill -9` during `evaluate.py frontier` left a .tmp under records/ forever."""
    import os

    from common.atomic import atomic_write_json, remove_stale_temporaries

    records = tmp_path / "records" / "fp" / "test"
    atomic_write_json(records / "q1.json", {"f1": 1.0})
    code = "import os; print(os.getpid())"
    dead = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    stale = records / f".q2.json.{int(dead.stdout)}-abc123.tmp"  # what a killed writer leaves
    live = records / f".q3.json.{os.getpid()}-def456.tmp"  # a writer still at work
    stale.write_text("{")
    live.write_text("{")
    assert remove_stale_temporaries(tmp_path / "records") == [stale]
    assert not stale.exists() and live.exists() and (records / "q1.json").exists()
    assert not list(records.glob(".q1.json.*"))  # a finished write leaves no temporary
