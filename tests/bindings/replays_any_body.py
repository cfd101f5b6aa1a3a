"""An HTTP service with ``Idempotency-Key`` that never compares payloads: a reused key
answers 200 with the first effect whatever the body (the IETF draft says 422). Its
effects are durable (one JSON file per effect), so restarts cannot catch it; the
conflict scenario can, and INVALID-KEY, since it takes any header value as a key. Run as ``python replays_any_body.py`` with RETRYPROOF_STATE_DIR and
RETRYPROOF_PORT."""

from __future__ import annotations

import json
import os
import threading

from json_service import JsonHandler, serve

STATE = os.environ["RETRYPROOF_STATE_DIR"]
LOCK = threading.Lock()


def effects() -> list[dict]:
    found = []
    for name in sorted(os.listdir(STATE)):
        if name.endswith(".json"):
            with open(os.path.join(STATE, name), encoding="utf-8") as handle:
                found.append(json.load(handle))
    return found


def save(effect: dict) -> None:
    path = os.path.join(STATE, f"{effect['id']}.json")
    with open(path + ".tmp", "w", encoding="utf-8") as handle:
        json.dump(effect, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(path + ".tmp", path)


class Handler(JsonHandler):
    def do_POST(self) -> None:  # noqa: N802
        task = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        key = self.headers.get("idempotency-key")
        with LOCK:
            first = next((effect for effect in effects() if key is not None and effect["key"] == key), None)
            if first is not None:
                return self.answer(200, {"id": first["id"]}, replayed=True)
            effect = {"id": f"E{len(effects()) + 1}", "key": key, "task": task}
            save(effect)
        self.answer(201, {"id": effect["id"]})

    def do_GET(self) -> None:  # noqa: N802
        self.answer(200, effects())


serve(Handler)
