"""A task API that answers 409 while a key's first request is still running (the
IETF Idempotency-Key draft), instead of waiting for it: the pending mark lives in
memory, so a killed request leaves nothing pending behind. 201 new, 200 with
``Idempotent-Replayed: true`` replayed, 422 another payload, 400 a bad key.
RETRYPROOF_STATE_DIR, RETRYPROOF_PORT."""

from __future__ import annotations

import time

import keyed_store as store
from json_service import JsonHandler, serve

PENDING: set[str] = set()


class Handler(JsonHandler):
    def do_POST(self) -> None:  # noqa: N802
        if (posted := store.keyed_post(self)) is None:
            return
        task, key = posted
        with store.LOCK:
            first = store.find(key)
            if first is None and key in PENDING:
                return self.answer(409, {"error": "a request with this key is in flight"})
            PENDING.update([key] if first is None and key else [])
        if first is not None:
            if first["fields"] != task:
                return self.answer(422, {"error": "key reused with another payload"})
            return self.answer(200, first, replayed=True)
        time.sleep(0.05)  # the work: a concurrent duplicate arrives while it runs
        with store.LOCK:
            effect = store.add(key, task)
            PENDING.discard(key or "")
        time.sleep(store.SETTLE_S)
        self.answer(201, effect)

    def do_GET(self) -> None:  # noqa: N802
        self.answer(200, store.effects())


serve(Handler)
