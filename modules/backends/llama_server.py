"""A llama.cpp ``llama-server`` process built for this CPU, started, watched and stopped from Python.

The prebuilt xllamacpp wheel runs llama.cpp compiled for AVX2 only; ``scripts/build_llamacpp.sh``
compiles the same server for this CPU (AVX-512/VNNI; its AMX build crashes at load here).
:class:`LlamaServerProcess` runs that binary on a loopback port and answers the request bodies of
llama.cpp's server API, the same bodies :class:`modules.backends.llamacpp.LlamaCppBackend` hands to
xllamacpp in process; that backend picks one or the other with ``engine=``.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import glob
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests

from modules.backends.base import BackendError
from modules.models import cache_dir

#: Which builds of scripts/build_llamacpp.sh engine="native" runs, best first.
BUILD_PREFERENCE = ("avx512", "native")
#: How long a model may take to load before the start counts as failed (Qwen-1.5B: ~2 s warm).
START_TIMEOUT_S = 180.0


def find_server_binary(explicit: str | None = None) -> Path:
    """The ``llama-server`` to run: ``explicit``, ``$LLAMA_SERVER``, else a build made here (see below).

    Raises:
        BackendError: None found (the message says how to build one).
    """
    candidate = explicit or os.environ.get("LLAMA_SERVER")
    if candidate:
        path = Path(candidate).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise BackendError(f"llama-server binary {path} does not exist or is not executable")
        return path
    # scripts/build_llamacpp.sh's default (AVX-512 without AMX) first, then a -march=native build.
    builds = [
        b for flags in BUILD_PREFERENCE
        for b in sorted(glob.glob(str(cache_dir() / "llama.cpp" / f"*-{flags}" / "bin" / "llama-server")))
    ]  # fmt: skip
    if not builds:
        raise BackendError(
            "engine=native needs llama.cpp's server built for this CPU; build it once with "
            "`bash scripts/build_llamacpp.sh` (or point $LLAMA_SERVER at a llama-server binary)"
        )
    return Path(builds[0])


def server_build(binary: Path) -> str:
    """The build's identity: its directory name (source version and flags) and ``--version`` line."""
    try:
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30)
        line = next((ln for ln in (out.stdout + out.stderr).splitlines() if ln.startswith("version")), "")
    except (OSError, subprocess.TimeoutExpired):
        line = ""
    return f"{binary.parent.parent.name} {line}".strip()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free right now on ``host``."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def wait_healthy(
    root_url: str, timeout_s: float = 120.0, proc: subprocess.Popen[bytes] | None = None
) -> None:
    """Poll ``{root_url}/health`` until it answers 200.

    Raises:
        BackendError: The server did not become healthy in time, or its process exited.
    """
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise BackendError(f"server process exited with code {proc.returncode} before {root_url} was up")
        try:
            r = requests.get(f"{root_url}/health", timeout=2)
            if r.status_code == 200:
                return
            last = f"HTTP {r.status_code}"
        except requests.RequestException as exc:
            last = type(exc).__name__
        time.sleep(0.1)
    raise BackendError(f"server at {root_url} not healthy after {timeout_s:g} s (last: {last})")


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    # PR_SET_PDEATHSIG: the server gets SIGTERM when the Python process dies, even by SIGKILL,
    # so no orphaned server keeps the cores busy.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)


def _child_setup() -> Callable[[], None] | None:
    # The parent-death signal fires when the *thread* that forked exits, not the process: a server
    # (re)started from a worker thread would die with that thread. Only the main thread uses it.
    return _die_with_parent if threading.current_thread() is threading.main_thread() else None


class LlamaServerProcess:
    """One ``llama-server`` on ``127.0.0.1`` serving one GGUF.

    Args:
        model_path: The GGUF file.
        n_ctx: Total context (all slots together).
        n_parallel: Server slots.
        n_threads: Threads for generation and prompt processing.
        binary: The server binary (default: :func:`find_server_binary`).
        log_path: Where the server's output goes (default: discarded).
        extra_args: More command-line flags for the server.
    """

    def __init__(
        self,
        model_path: Path,
        *,
        n_ctx: int,
        n_parallel: int,
        n_threads: int,
        binary: str | None = None,
        log_path: Path | None = None,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.binary = find_server_binary(binary)
        self.build = server_build(self.binary)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.argv = [
            str(self.binary), "-m", str(model_path), "--host", "127.0.0.1", "--port", str(self.port),
            "-c", str(n_ctx), "-np", str(n_parallel), "-t", str(n_threads), "-tb", str(n_threads),
            "--no-webui", *extra_args,
        ]  # fmt: skip
        self.log_path = log_path
        self._session = requests.Session()
        self._proc: subprocess.Popen[bytes] | None = None
        self.start()
        atexit.register(self.close)

    def start(self) -> None:
        """Start the server and wait until it has loaded the model.

        Raises:
            BackendError: It exited or did not become healthy within :data:`START_TIMEOUT_S`.
        """
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        try:
            self._proc = subprocess.Popen(
                self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                preexec_fn=_child_setup(),
            )  # fmt: skip
        finally:
            if log is not subprocess.DEVNULL:
                log.close()  # type: ignore[union-attr]
        try:
            wait_healthy(self.url, START_TIMEOUT_S, self._proc)
        except BackendError as exc:
            code = self._proc.poll()
            self.stop()
            what = f"exited with code {code} while loading" if code is not None else f"did not start ({exc})"
            raise BackendError(
                f"llama-server {what} ({' '.join(self.argv)}); "
                f"log: {self.log_path or 'not kept (pass log_path)'}"
            ) from exc

    def post(self, path: str, body: dict[str, Any], timeout_s: float = 3600.0) -> dict[str, Any]:
        """POST ``body`` to ``path`` and return the JSON reply (llama.cpp's own errors included).

        Raises:
            RuntimeError: The server is gone or answered something that is not JSON.
        """
        if self._proc is not None and self._proc.poll() is not None:
            raise RuntimeError(f"llama-server has exited (code {self._proc.returncode})")
        try:
            reply = self._session.post(self.url + path, json=body, timeout=timeout_s)
        except requests.RequestException as exc:
            raise RuntimeError(f"llama-server {path}: {type(exc).__name__}: {exc}") from exc
        try:
            data = reply.json()
        except ValueError as exc:
            raise RuntimeError(
                f"llama-server {path}: HTTP {reply.status_code}, not JSON: {reply.text[:200]!r}"
            ) from exc
        if not isinstance(data, dict):
            raise RuntimeError(f"llama-server {path}: reply is not a JSON object: {str(data)[:200]}")
        return data

    def stop(self) -> None:
        """Stop the server process (SIGTERM, then SIGKILL after 10 s); :meth:`start` brings it back."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def close(self) -> None:
        """Stop the server for good and release the HTTP session."""
        self.stop()
        self._session.close()
        atexit.unregister(self.close)
