"""Serve a local GGUF model over an OpenAI-compatible HTTP API (llama.cpp's own server).

``xllamacpp.Server`` is llama.cpp's ``llama-server`` in a Python extension: with
``CommonParams.port`` set it listens on ``hostnames``/``port`` and serves ``/v1/chat/completions``,
``/v1/completions`` and ``/health`` with ``n_parallel`` slots (continuous batching). This lets
the HTTP backend (:class:`modules.backends.openai_http.OpenAIBackend`) run against a real
server on one machine, and lets a cluster share one model server between workers.

Command line (blocks until Ctrl-C / SIGTERM)::

    python -m scale.serving --model smollm2-135m --port 8080 --n-parallel 4
    SERVER_KEY=... python -m scale.serving --host 0.0.0.0 --api-key-env SERVER_KEY   # require a key

With an API key the server answers only requests that send ``Authorization: Bearer <key>``
(clients: ``backend.api_key_env=SERVER_KEY``). The key is read from an environment variable,
never from the command line, where every user of the machine could read it (``ps``).

From Python, :class:`LocalLlamaServer` starts that command in a subprocess, waits for
``/health`` and gives an ``OpenAIBackend`` pointed at it; ``stop``/``start`` simulate an
outage in tests.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from modules.backends.base import BackendError
from modules.backends.llama_server import free_port, wait_healthy

#: The environment variable through which :class:`LocalLlamaServer` hands its key to the server.
SERVER_KEY_ENV = "BUDGET_ROUTER_SERVER_API_KEY"


def start_llamacpp_server(
    model: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    n_parallel: int = 4,
    n_ctx: int | None = None,
    n_threads: int = 1,
    quiet: bool = True,
    api_key: str | None = None,
) -> Any:
    """Start llama.cpp's HTTP server in this process and return the ``xllamacpp.Server``.

    The server listens in background threads for as long as the returned object lives.

    Args:
        model: Registry key (``"smollm2-135m"``, ...) or a GGUF path.
        host: Interface to listen on (``0.0.0.0`` for other machines).
        port: TCP port (must be > 0; llama.cpp does not listen on port 0).
        n_parallel: Slots: requests decoded together (continuous batching).
        n_ctx: Context window per slot (default: the registry's, else 4096).
        n_threads: CPU threads.
        quiet: Silence llama.cpp's logging.
        api_key: If set, requests must send ``Authorization: Bearer <api_key>`` (``/health`` stays open).

    Raises:
        BackendError: For a model that is neither registered nor a file, or a bad port.
    """
    import xllamacpp as xlc

    from modules.models import MODELS, get_model_spec, resolve_model_path

    if port <= 0:
        raise BackendError(f"llama.cpp server needs a port > 0, got {port}")
    if model in MODELS:
        path, ctx = resolve_model_path(model), n_ctx or get_model_spec(model).n_ctx
    else:
        path, ctx = Path(model), n_ctx or 4096
        if not path.is_file():
            raise BackendError(f"{model!r} is neither a registered model {sorted(MODELS)} nor a GGUF file")
    params = xlc.CommonParams()
    params.model.path = str(path)
    params.hostnames = [host]
    params.port = port
    params.n_parallel = n_parallel
    params.n_ctx = ctx * n_parallel  # llama.cpp splits n_ctx over the slots
    params.cpuparams.n_threads = n_threads
    params.cpuparams_batch.n_threads = n_threads
    if quiet:
        params.verbosity = -1
    if api_key:
        params.api_keys = [api_key]
    return xlc.Server(params)


class LocalLlamaServer:
    """A llama.cpp OpenAI-compatible server in a subprocess (``python -m scale.serving``).

    Args:
        model: Registry key or GGUF path.
        port: TCP port (default: a free one).
        n_parallel: Server slots.
        n_ctx: Context window per slot.
        n_threads: CPU threads of the server.
        startup_timeout_s: How long :meth:`start` waits for ``/health``.
        api_key: Require this key from clients (passed to the server process in its environment).

    Attributes:
        root_url: ``http://127.0.0.1:PORT``.
        base_url: ``root_url + "/v1"`` (what ``OpenAIBackend`` wants).
    """

    def __init__(
        self,
        model: str = "smollm2-135m",
        *,
        port: int | None = None,
        n_parallel: int = 4,
        n_ctx: int | None = None,
        n_threads: int = 1,
        startup_timeout_s: float = 180.0,
        api_key: str | None = None,
    ) -> None:
        self.model = model
        self.api_key = api_key
        self.port = port or free_port()
        self.n_parallel = n_parallel
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.startup_timeout_s = startup_timeout_s
        self.root_url = f"http://127.0.0.1:{self.port}"
        self.base_url = self.root_url + "/v1"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        """True while the server process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> LocalLlamaServer:
        """Start the process (if not running) and wait until it serves."""
        if self.running:
            return self
        cmd = [
            sys.executable, "-m", "scale.serving", "--model", self.model, "--port", str(self.port),
            "--n-parallel", str(self.n_parallel), "--n-threads", str(self.n_threads),
        ]
        if self.n_ctx:
            cmd += ["--n-ctx", str(self.n_ctx)]
        env = dict(os.environ)
        if self.api_key:
            env[SERVER_KEY_ENV] = self.api_key
            cmd += ["--api-key-env", SERVER_KEY_ENV]
        root = Path(__file__).resolve().parent.parent
        self._proc = subprocess.Popen(
            cmd, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        try:
            wait_healthy(self.root_url, self.startup_timeout_s, self._proc)
        except BackendError as exc:
            err = self._stderr_tail()
            self.stop()
            raise BackendError(f"{exc}; server stderr: {err}") from exc
        return self

    def _stderr_tail(self) -> str:
        if self._proc is None or self._proc.stderr is None or self._proc.poll() is None:
            return ""
        return self._proc.stderr.read().decode(errors="replace")[-800:]

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the process (SIGTERM, then SIGKILL after ``timeout_s``)."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout_s)
        if self._proc.stderr is not None:
            self._proc.stderr.close()
        self._proc = None

    def backend(self, **kwargs: Any) -> Any:
        """An ``OpenAIBackend`` for this server (``model_id`` = the registry key, for pricing)."""
        from modules.backends.openai_http import OpenAIBackend

        kwargs.setdefault("model_id", self.model if "/" not in self.model else Path(self.model).stem)
        kwargs.setdefault("concurrency", self.n_parallel)
        kwargs.setdefault("api_key_env", None)
        kwargs.setdefault("api_key", self.api_key)
        return OpenAIBackend(self.model, base_url=self.base_url, **kwargs)

    def __enter__(self) -> LocalLlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """Serve a model until interrupted (see the module docstring)."""
    parser = argparse.ArgumentParser(description="Serve a local GGUF model over an OpenAI-compatible API.")
    parser.add_argument("--model", default="smollm2-135m", help="registry key or GGUF path")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--n-parallel", type=int, default=4, help="server slots (continuous batching)")
    parser.add_argument("--n-ctx", type=int, default=None, help="context window per slot")
    parser.add_argument("--n-threads", type=int, default=1)
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument(
        "--api-key-env", default=None, help="environment variable holding the key clients must send"
    )
    args = parser.parse_args(argv)
    api_key = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            parser.error(f"--api-key-env {args.api_key_env}: that environment variable is unset or empty")
    server = start_llamacpp_server(
        args.model, host=args.host, port=args.port, n_parallel=args.n_parallel,
        n_ctx=args.n_ctx, n_threads=args.n_threads, quiet=not args.verbose, api_key=api_key,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print(f"serving {args.model} at {server.listening_address}/v1 ({args.n_parallel} slots)", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        stop.wait()
    del server
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
