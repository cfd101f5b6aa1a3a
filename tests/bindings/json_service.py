"""What the binding tests' deliberately broken HTTP services share: answering JSON,
a quiet log, and serving on the loopback port the kit hands them (RETRYPROOF_PORT).
Each service is a script started by the kit, so this sits beside them on sys.path."""

from __future__ import annotations

import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class JsonHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self, status: int, body: object, replayed: bool = False) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if replayed:
            self.send_header("Idempotent-Replayed", "true")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def serve(handler: type[JsonHandler]) -> None:
    ThreadingHTTPServer.request_queue_size = 64  # racing callers must not wait on SYN retries
    ThreadingHTTPServer(("127.0.0.1", int(os.environ["RETRYPROOF_PORT"])), handler).serve_forever()
