"""A stand-in for an Idempotency-Key service, for the translation tests of
``adapters/implementations/http_service.py``: it writes tasks in the shared task store
format, replays a stored response for a known key, and answers the statuses a library
would (409 for a key named ``busy``, 500 for ``boom``), or dies for ``die``."""

from __future__ import annotations

import json
import os
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "conformance"))
import kit_from_source  # noqa: E402, F401  (the kit's modules, under python -S too)

from retryproof.adapters.implementations.task_store import TaskStore
from retryproof.spec.digest import request_digest

STORE = TaskStore(os.environ["RETRYPROOF_STATE_DIR"])
STORED: dict[str, bytes] = {}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        key = self.headers.get("Idempotency-Key")
        if key == "die":
            os.kill(os.getpid(), signal.SIGKILL)
        if key in ("busy", "boom"):
            self._answer(409 if key == "busy" else 500, b'{"error": "refused"}')
            return
        if key in STORED:
            self._answer(200, STORED[key])
            return
        task = json.loads(body)
        task_id = TaskStore.new_id()
        digest = request_digest(task)
        STORE.write(task_id, {"task_id": task_id, "task": task, "client_submission_id": key, "request_digest": digest})
        answer = {"task_id": task_id, "task_path": STORE.path(task_id), "request_digest": digest}
        answer["caller"] = self.headers["X-Retryproof-Call"]
        STORED[key or ""] = json.dumps(answer).encode()
        self._answer(201, STORED[key or ""])

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler).serve_forever()
