"""The claim store (``claim_store.py``) as an HTTP API: POST /tasks with the key in
Idempotency-Key, GET /tasks lists the effects. While a call waits between claim and
effect it watches its connection, and a caller who went away cancels it, as an
asynchronous framework does. RETRYPROOF_STATE_DIR, RETRYPROOF_PORT, RETRYPROOF_DEFECT."""

from __future__ import annotations

import json
import select
import socket
import time

import claim_store
from json_service import JsonHandler, serve


def caller_left(connection: socket.socket, seconds: float) -> bool:
    """Wait ``seconds``; whether the caller closed its connection meanwhile."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select([connection], [], [], left)
        if readable and not connection.recv(1, socket.MSG_PEEK):
            return True
        if readable:
            time.sleep(min(left, 0.01))  # a pipelined request: not an end
    return False


class Handler(JsonHandler):
    def do_POST(self) -> None:  # noqa: N802
        task = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        key = self.headers["idempotency-key"]
        answered = claim_store.begin(key, task)
        if answered is None:
            if caller_left(self.connection, claim_store.WORK_S):
                claim_store.abandon(key)
                self.close_connection = True
                return
            effect = claim_store.make(key, task)
            time.sleep(claim_store.SETTLE_S)
            answered = claim_store.finish(key, effect)
        status, body = answered
        self.answer(status, body, replayed=status == 200)

    def do_GET(self) -> None:  # noqa: N802
        self.answer(200, claim_store.effects())


serve(Handler)
