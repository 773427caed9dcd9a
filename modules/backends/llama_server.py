"""A llama.cpp ``llama-server`` process built for this CPU, started, watched and stopped from Python.

The prebuilt xllamacpp wheel runs llama.cpp compiled for AVX2 only; ``scripts/build_llamacpp.sh``
compiles the same server for the CPU it runs on (the GGML options its flags support, AMX off: its AMX
build crashed at load on Sapphire Rapids) and records in ``build.json`` which CPU flags the binary needs,
so a build made for another CPU is refused here instead of dying of SIGILL.
:class:`LlamaServerProcess` runs that binary on a loopback port and answers the request bodies of
llama.cpp's server API, the same bodies :class:`modules.backends.llamacpp.LlamaCppBackend` hands to
xllamacpp in process; that backend picks one or the other with ``engine=``.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from common.cpu import CpuInfo, cpu_info, missing_flags
from modules.backends.base import BackendError
from modules.models import cache_dir

#: Which builds of scripts/build_llamacpp.sh engine="native" runs, best first: every GGML option the CPU
#: supports, then the compiler's -march=native, then the portable AVX2 set.
BUILD_MODE_PREFERENCE = ("auto", "native", "avx2")
#: How long a model may take to load before the start counts as failed (Qwen-1.5B: ~2 s warm).
START_TIMEOUT_S = 180.0
#: The fix printed wherever a build is missing or was made for another CPU.
BUILD_HINT = (
    "build one for this CPU with `bash scripts/build_llamacpp.sh` (or point $LLAMA_SERVER at a llama-server)"
)


@dataclass(frozen=True)
class NativeBuild:
    """One build of ``scripts/build_llamacpp.sh``, as its ``build.json`` describes it.

    Attributes:
        root: The build directory (``<cache>/llama.cpp/<version>-<mode>-<features>``).
        mode: ``auto``, ``native`` or ``avx2``.
        requires: The CPU flags (``/proc/cpuinfo`` names) the binary may execute.
        built_on: The model name of the CPU it was built for (``target_cpu`` in ``build.json``).
    """

    root: Path
    mode: str
    requires: tuple[str, ...]
    built_on: str

    @property
    def server(self) -> Path:
        """The ``llama-server`` binary."""
        return self.root / "bin" / "llama-server"

    def describe(self, missing: list[str]) -> str:
        """``<dir> (built on <cpu>; needs <flags> this CPU lacks)``: one build in an error message."""
        return f"{self.root} (built on {self.built_on}; needs {' '.join(missing)}, which this CPU lacks)"


def read_build(root: Path) -> NativeBuild | None:
    """The :class:`NativeBuild` in ``root``.

    None where it has no readable ``build.json`` (a build made before manifests existed, or not by the
    script).
    """
    try:
        data = json.loads((root / "build.json").read_text(encoding="utf-8"))
        return NativeBuild(
            root=root,
            mode=str(data["mode"]),
            requires=tuple(str(f) for f in data["requires"]),
            built_on=str((data.get("target_cpu") or data.get("built_on") or {}).get("model", "unknown")),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _check_fits(binary: Path, cpu: CpuInfo) -> None:
    # A binary from build_llamacpp.sh knows what it needs: refuse it before it dies of SIGILL mid-load.
    build = read_build(binary.parent.parent)
    if build is not None and (missing := missing_flags(build.requires, cpu)):
        raise BackendError(
            f"llama-server {binary} was built for another CPU: {build.describe(missing)}; "
            f"this CPU is {cpu.model}; {BUILD_HINT}"
        )


def find_server_binary(explicit: str | None = None, cpu: CpuInfo | None = None) -> Path:
    """The ``llama-server`` to run: ``explicit``, ``$LLAMA_SERVER``, else a build made here that fits.

    A build fits when this CPU has every flag its ``build.json`` says it needs; among those that fit,
    :data:`BUILD_MODE_PREFERENCE` decides, then the build that uses more of the CPU.

    Args:
        explicit: A binary given by the caller (the backend's ``server_bin``).
        cpu: The CPU to fit (default: this machine's).

    Raises:
        BackendError: None found, or only builds for other CPUs (the message names each build, the
            flags it needs that this CPU lacks, and how to build one).
    """
    cpu = cpu or cpu_info()
    candidate = explicit or os.environ.get("LLAMA_SERVER")
    if candidate:
        path = Path(candidate).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise BackendError(f"llama-server binary {path} does not exist or is not executable")
        _check_fits(path, cpu)
        return path
    roots = sorted(p for p in (cache_dir() / "llama.cpp").glob("*") if (p / "bin" / "llama-server").is_file())
    builds = [b for b in map(read_build, roots) if b is not None and b.mode in BUILD_MODE_PREFERENCE]
    fitting = [b for b in builds if not missing_flags(b.requires, cpu)]
    if fitting:
        rank = {mode: i for i, mode in enumerate(BUILD_MODE_PREFERENCE)}
        best = min(fitting, key=lambda b: (rank[b.mode], -len(b.requires), str(b.root)))
        return best.server
    if builds:
        others = "; ".join(b.describe(missing_flags(b.requires, cpu)) for b in builds)
        raise BackendError(
            f"engine=native: no llama-server here fits this CPU ({cpu.model}): {others}; {BUILD_HINT}"
        )
    legacy = f" ({len(roots)} older build(s) without build.json are not used)" if roots else ""
    raise BackendError(f"engine=native needs llama.cpp's server built for this CPU{legacy}; {BUILD_HINT}")


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
            if code == -signal.SIGILL:
                # The binary executed an instruction this CPU does not have: a build for another CPU.
                what += (
                    f" (SIGILL: an instruction this CPU, {cpu_info().model}, lacks; {BUILD_HINT})"
                )
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
