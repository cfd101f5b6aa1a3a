"""``python -m retryproof.reference_impl --http``: the reference runtime as an HTTP API.

``POST /tasks`` with the task as JSON body and an optional ``Idempotency-Key`` header
(none: the legacy path); a replay answers 200 with ``Idempotent-Replayed: true``.
``GET /tasks`` lists every task on disk. Statuses follow ``served.submit``. Listens
on 127.0.0.1 at ``RETRYPROOF_PORT``; SIGTERM shuts it down after the requests in flight.
"""

from __future__ import annotations

import json
import signal
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from retryproof.reference_impl import served
from retryproof.reference_impl.runtime import Runtime
from retryproof.spec.jcs import DuplicateKeyError, loads_strict

KEY_HEADER = "Idempotency-Key"
#: The largest body read; a larger one is refused before it is read.
MAX_BODY = 1 << 20


class _Server(ThreadingHTTPServer):
    request_queue_size = 64  # racing callers must not wait on SYN retries
    daemon_threads = True


def serve(runtime: Runtime, port: int) -> None:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            if self.path != "/tasks":
                return self._send(404, served.error("not_found", f"no resource {self.path}"))
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                return self._send(413, served.error("invalid_request", "body too large"))
            try:
                task = loads_strict(self.rfile.read(length).decode("utf-8"))
            except (DuplicateKeyError, UnicodeDecodeError, ValueError) as exc:
                return self._send(400, served.error("invalid_request", f"the body is not a JSON task: {exc}"))
            status, body = served.submit(runtime, task, self.headers.get(KEY_HEADER))
            self._send(status, body, replayed=status == 200)

        def do_GET(self) -> None:  # noqa: N802
            if self.path != "/tasks":
                return self._send(404, served.error("not_found", f"no resource {self.path}"))
            self._send(200, served.listing(runtime))

        def _send(self, status: int, body: Any, replayed: bool = False) -> None:
            data = json.dumps(body, ensure_ascii=True).encode("ascii")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if replayed:
                self.send_header("Idempotent-Replayed", "true")
            self.end_headers()
            try:
                self.wfile.write(data)
            except OSError:
                pass  # the caller went away before the answer: the effect stands

        def log_message(self, format: str, *args: Any) -> None:
            pass  # one line per request would drown the stderr the kit keeps as evidence

    server = _Server(("127.0.0.1", port), Handler)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown, daemon=True).start())
    # A SIGTERM's shutdown is seen at the loop's next poll: a graceful stop waits for it.
    server.serve_forever(poll_interval=0.05)
    server.server_close()
