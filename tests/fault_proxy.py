"""An HTTP proxy that injects faults in front of a real server, to test clients' resilience.

Each request the proxy receives gets the next action of a deterministic ``plan`` (cycled):

* ``"ok"``: forward to the upstream server and relay its answer;
* ``"500"`` (or any status code as a string): answer that status without forwarding;
* ``"drop"``: close the connection without answering (a crashed or restarted server);
* ``"slow"``: wait ``slow_s`` seconds, then forward (a client with a shorter timeout gives up).

Usage::

    with FaultProxy("http://127.0.0.1:8080", plan=["500", "drop", "ok"]) as proxy:
        backend = OpenAIBackend("m", base_url=proxy.url + "/v1", max_retries=3)
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import requests


class FaultProxy:
    """Forward HTTP requests to ``upstream``, injecting the faults of ``plan``.

    Args:
        upstream: Root URL of the real server (``http://127.0.0.1:PORT``).
        plan: Actions, cycled over requests in arrival order (see the module docstring).
        slow_s: Delay of a ``"slow"`` action.
        upstream_timeout_s: Timeout of forwarded requests.

    Attributes:
        url: The proxy's root URL.
        actions: How often each action was taken.
    """

    def __init__(
        self,
        upstream: str,
        plan: Sequence[str] = ("ok",),
        *,
        slow_s: float = 5.0,
        upstream_timeout_s: float = 600.0,
    ) -> None:
        if not plan:
            raise ValueError("FaultProxy plan must not be empty")
        for action in plan:
            if action not in ("ok", "drop", "slow") and not action.isdigit():
                raise ValueError(f"FaultProxy: unknown action {action!r} (ok, drop, slow or a status code)")
        self.upstream = upstream.rstrip("/")
        self.plan = list(plan)
        self.slow_s = slow_s
        self.upstream_timeout_s = upstream_timeout_s
        self.actions: Counter[str] = Counter()
        self._n = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def next_action(self) -> str:
        """The action for the next request (thread-safe, deterministic in arrival order)."""
        with self._lock:
            action = self.plan[self._n % len(self.plan)]
            self._n += 1
            self.actions[action] += 1
            return action

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def _relay(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                action = proxy.next_action()
                if action == "drop":
                    self.close_connection = True
                    self.connection.shutdown(2)  # socket.SHUT_RDWR: the client sees a reset/EOF
                    return
                if action.isdigit():
                    payload = b'{"error": {"message": "injected fault"}}'
                    self.send_response(int(action))
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                if action == "slow":
                    time.sleep(proxy.slow_s)
                headers = {"Content-Type": self.headers.get("Content-Type", "application/json")}
                try:
                    r = requests.request(
                        method, proxy.upstream + self.path, data=body, headers=headers,
                        timeout=proxy.upstream_timeout_s,
                    )
                except (requests.RequestException, OSError):
                    self.close_connection = True
                    return
                try:
                    self.send_response(r.status_code)
                    self.send_header("Content-Type", r.headers.get("Content-Type", "application/json"))
                    self.send_header("Content-Length", str(len(r.content)))
                    self.end_headers()
                    self.wfile.write(r.content)
                except OSError:  # the client gave up (timeout) while we waited upstream
                    self.close_connection = True

            def do_POST(self) -> None:
                self._relay("POST")

            def do_GET(self) -> None:
                self._relay("GET")

        return Handler

    def start(self) -> FaultProxy:
        """Start serving in a background thread."""
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
