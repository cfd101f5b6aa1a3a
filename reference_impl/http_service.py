"""``python -m retryproof.reference_impl --http``: the reference runtime as an HTTP API.

``POST /tasks`` with the task as JSON body and an optional ``Idempotency-Key`` header
(none: the legacy path); a replay answers 200 with ``Idempotent-Replayed: true``.
``GET /tasks`` lists every task on disk. Statuses follow ``served.submit``. Listens
on 127.0.0.1 at ``RETRYPROOF_PORT``; SIGTERM shuts it down after the requests in flight.

The HTTP/1.1 framing is written here, on ``socketserver``, not taken from
``http.server``: importing that loads ``http.client``, ``email``, ``ssl`` and ``urllib``,
about 25 ms of CPU, 40% of each start, and a test run starts this service a few hundred
times (benchmarks/bench_start.py measures it). What it frames is what an Idempotency-Key
client sends: a request line, headers, a ``Content-Length`` body, connections kept open
as HTTP/1.1 says (HTTP/1.0: closed unless asked otherwise). A request it cannot read
is answered with its status (400, 413, 414, 431, 501, 505) and the connection closed.
"""

from __future__ import annotations

import json
import signal
import socketserver
import threading
import time
from http import HTTPStatus

from retryproof.reference_impl import served
from retryproof.reference_impl.runtime import Runtime
from retryproof.spec.jcs import DuplicateKeyError, loads_strict

TYPE_CHECKING = False  # not typing's: importing typing would be paid at every start
if TYPE_CHECKING:
    from typing import Any

KEY_HEADER = "Idempotency-Key"
#: The largest body read; a larger one is refused before it is read.
MAX_BODY = 1 << 20
#: The longest request or header line, and the most header lines, as ``http.server`` has them.
MAX_LINE = 65536
MAX_HEADERS = 100
#: Headers a request may carry once: two keys or two lengths are no request this service can
#: read unambiguously (which one a proxy honoured is unknown), so both are refused.
SINGLE = frozenset({KEY_HEADER.lower(), "content-length"})


class _Refused(Exception):
    """A request this service cannot read: answered with ``status``, then the connection closes."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _Server(socketserver.ThreadingTCPServer):
    request_queue_size = 64  # racing callers must not wait on SYN retries
    daemon_threads = True
    allow_reuse_address = True  # a restarted service binds its port again at once


def serve(runtime: Runtime, port: int) -> None:
    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            keep_open = True
            while keep_open:
                try:
                    request = self._read_request()
                    if request is None:
                        return  # the caller closed the connection
                    method, path, headers, keep_open = request
                    status, body = self._answer(method, path, headers)
                    replayed = method == "POST" and status == 200
                except _Refused as refused:
                    status, body = refused.status, served.error("invalid_request", str(refused))
                    replayed = keep_open = False
                self._send(status, body, replayed, keep_open)

        def _read_request(self) -> tuple[str, str, dict[str, str], bool] | None:
            line = self.rfile.readline(MAX_LINE + 1)
            if not line:
                return None
            if len(line) > MAX_LINE:
                raise _Refused(414, "request line too long")
            words = line.decode("iso-8859-1").split()
            if len(words) != 3 or not words[2].startswith("HTTP/"):
                raise _Refused(400, f"bad request line {line[:80]!r}")
            method, path, version = words
            if version not in ("HTTP/1.0", "HTTP/1.1"):
                raise _Refused(505, f"HTTP version {version} is not supported")
            headers: dict[str, str] = {}  # names in lower case
            lines = 0
            while (line := self.rfile.readline(MAX_LINE + 1)) not in (b"\r\n", b"\n", b""):
                lines += 1
                if len(line) > MAX_LINE or lines > MAX_HEADERS:
                    raise _Refused(431, "header line too long or too many headers")
                name, colon, value = line.decode("iso-8859-1").partition(":")
                # Only spaces and tabs surround a value (RFC 9110, 5.5): str.strip() would
                # also take a no-break space off a key, and a malformed key would match a valid one.
                name, value = name.strip(" \t").lower(), value.strip(" \t\r\n")
                if not colon or not name:
                    raise _Refused(400, f"bad header line {line[:80]!r}")
                if name in headers and name in SINGLE:
                    raise _Refused(400, f"{name} given twice")
                headers[name] = value
            connection = headers.get("connection", "").lower()
            keep_open = connection != "close" and (version == "HTTP/1.1" or connection == "keep-alive")
            if headers.get("expect", "").lower() == "100-continue" and version == "HTTP/1.1":
                self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            return method, path, headers, keep_open

        def _answer(self, method: str, path: str, headers: dict[str, str]) -> tuple[int, Any]:
            if method not in ("POST", "GET"):
                raise _Refused(501, f"unsupported method {method!r}")
            text = headers.get("content-length", "0")
            if not (text.isascii() and text.isdigit() and len(text) <= 19):
                raise _Refused(400, f"bad Content-Length {text[:40]!r}")
            length = int(text)
            if length > MAX_BODY:
                raise _Refused(413, "body too large")  # unread, it ends the connection
            data = self.rfile.read(length)
            if path != "/tasks":
                return 404, served.error("not_found", f"no resource {path}")
            if method == "GET":
                return 200, served.listing(runtime)
            try:
                task = loads_strict(data.decode("utf-8"))
            except (DuplicateKeyError, UnicodeDecodeError, ValueError) as exc:
                return 400, served.error("invalid_request", f"the body is not a JSON task: {exc}")
            return served.submit(runtime, task, headers.get(KEY_HEADER.lower()))

        def _send(self, status: int, body: Any, replayed: bool, keep_open: bool) -> None:
            data = json.dumps(body, ensure_ascii=True).encode("ascii")
            head = [
                f"HTTP/1.1 {status} {HTTPStatus(status).phrase}",
                "Date: " + time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime()),
                "Content-Type: application/json",
                f"Content-Length: {len(data)}",
                *(["Idempotent-Replayed: true"] if replayed else []),
                *([] if keep_open else ["Connection: close"]),
            ]
            try:
                self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode("iso-8859-1") + data)
            except OSError:
                pass  # the caller went away before the answer: the effect stands

    server = _Server(("127.0.0.1", port), Handler)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown, daemon=True).start())
    # A SIGTERM's shutdown is seen at the loop's next poll: a graceful stop waits for it.
    server.serve_forever(poll_interval=0.05)
    server.server_close()
