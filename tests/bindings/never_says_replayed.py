"""A task API that answers a replay exactly as it answered the creation (200 and the
effect), as the IETF Idempotency-Key draft allows: nothing in an answer says
"replayed". 422 for a key reused with another payload, 400 for a bad key.
``--defect forgets-on-restart`` keeps which key made which effect in memory only, so
a restart forgets it and a retry makes a second effect: RESTART-REUSE must fail it.
RETRYPROOF_STATE_DIR, RETRYPROOF_PORT."""

from __future__ import annotations

import sys
import time

import keyed_store as store
from json_service import JsonHandler, serve

FORGETS = sys.argv[1:] == ["--defect", "forgets-on-restart"]
SEEN: dict[str, dict] = {}


class Handler(JsonHandler):
    def do_POST(self) -> None:  # noqa: N802
        if (posted := store.keyed_post(self)) is None:
            return
        task, key = posted
        with store.LOCK:
            first = SEEN.get(key or "") if FORGETS else store.find(key)
            made = first is None
            if made:
                first = store.add(key, task)
                SEEN.update({key: first} if key else {})
        if made:
            time.sleep(store.SETTLE_S)
        if first["fields"] != task:
            return self.answer(422, {"error": "key reused with another payload"})
        self.answer(200, first)

    def do_GET(self) -> None:  # noqa: N802
        self.answer(200, store.effects())


serve(Handler)
