"""What the binding tests' deliberately broken HTTP services share: answering JSON,
and serving on the loopback port the kit hands them (RETRYPROOF_PORT). Each service
is a script started by the kit (``python -S``: it needs only the standard library),
so this sits beside them on sys.path.

The HTTP/1.1 framing is this module's, on ``socketserver``, not ``http.server``'s:
importing that loads ``http.client`` and ``email``, about 30 ms of CPU, half of each
start, and the suite starts these services about 150 times (CRASH-POINTS twice per
point). What it reads is what the kit's client sends: a request line, headers (names
in lower case here), a ``Content-Length`` body; an HTTP/1.1 connection stays open
until the caller closes it or a handler sets ``close_connection``."""

from __future__ import annotations

import json
import os
import socketserver
from http import HTTPStatus


class JsonHandler(socketserver.StreamRequestHandler):
    """Calls ``do_<METHOD>`` once per request, ``headers`` its header fields."""

    headers: dict[str, str]
    close_connection: bool

    def handle(self) -> None:
        self.close_connection = False
        while not self.close_connection:
            words = self.rfile.readline(65537).split()
            if not words:  # the caller closed the connection
                return
            self.headers = {}
            while (line := self.rfile.readline(65537)) not in (b"\r\n", b"\n", b""):
                name, _, value = line.decode("iso-8859-1").partition(":")
                # As http.server reads a field: the first of two, its value less the
                # blanks before it and the line end, nothing else (a key is compared as sent).
                self.headers.setdefault(name.strip().lower(), value.lstrip(" \t").rstrip("\r\n"))
            self.close_connection = words[-1] != b"HTTP/1.1" or self.headers.get("connection", "").lower() == "close"
            getattr(self, "do_" + words[0].decode("ascii"))()

    def answer(self, status: int, body: object, replayed: bool = False, fields: tuple[str, ...] = ()) -> None:
        """``body`` as JSON (None: no body), with the header ``fields`` given ("Name: value")."""
        data = b"" if body is None else json.dumps(body).encode()
        head = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}", "Content-Type: application/json"]
        head += [f"Content-Length: {len(data)}", *(["Idempotent-Replayed: true"] if replayed else []), *fields]
        head += ["Connection: close"] if self.close_connection else []
        self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode("iso-8859-1") + data)


class _Server(socketserver.ThreadingTCPServer):
    request_queue_size = 64  # racing callers must not wait on SYN retries
    daemon_threads = True
    allow_reuse_address = True


def serve(handler: type[JsonHandler]) -> None:
    _Server(("127.0.0.1", int(os.environ["RETRYPROOF_PORT"])), handler).serve_forever()
