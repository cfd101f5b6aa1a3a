"""A ticket API with three fields of its own (title, description, assignee) and a
project every call must name: ``POST /tickets`` with ``Idempotency-Key`` answers 201
for a new ticket, 200 with ``Idempotent-Replayed: true`` for a replay, 422 for a key
reused with another payload, 400 for a bad key or body; ``GET /tickets`` lists them.
``--defect replays-any-body`` answers a reused key 200 whatever the body (the 422 is
skipped): CONFLICT-DIGEST and FUZZ-MODEL must fail it. RETRYPROOF_STATE_DIR, RETRYPROOF_PORT."""

from __future__ import annotations

import sys

import keyed_store as store
from json_service import JsonHandler, serve

FIELDS = ("title", "description", "assignee")
REPLAYS_ANY_BODY = sys.argv[1:] == ["--defect", "replays-any-body"]


class Handler(JsonHandler):
    def do_POST(self) -> None:  # noqa: N802
        if (posted := store.keyed_post(self)) is None:
            return
        body, key = posted
        if body.get("project") != "demo" or not all(isinstance(body.get(name), str) for name in FIELDS):
            return self.answer(400, {"error": "project demo and three strings, please"})
        fields = {name: body[name] for name in FIELDS}
        with store.LOCK:
            first = store.find(key)
            if first is None:
                return self.answer(201, store.add(key, fields))
        if first["fields"] != fields and not REPLAYS_ANY_BODY:
            return self.answer(422, {"error": "key reused with another payload"})
        self.answer(200, first, replayed=True)

    def do_GET(self) -> None:  # noqa: N802
        self.answer(200, store.effects())


serve(Handler)
