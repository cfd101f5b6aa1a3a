"""An HTTP service whose key stays "in flight" forever once a call is killed midway:
it marks the key pending on disk, writes the effect, then clears the mark; a later
call that finds the mark and no effect answers 409 (in flight) for good, because
nothing ever expires the mark. Safe (never a second effect), but not live: the kill
nemesis must fail it. RETRYPROOF_STATE_DIR, RETRYPROOF_PORT."""

from __future__ import annotations

import json
import os
import threading
import time

from json_service import JsonHandler, serve
from keyed_store import SETTLE_S

STATE = os.environ["RETRYPROOF_STATE_DIR"]
LOCK = threading.Lock()


def path(kind: str, key: str) -> str:
    return os.path.join(STATE, f"{kind}-{key}")


def effects() -> list[dict]:
    found = []
    for name in sorted(os.listdir(STATE)):
        if name.startswith("effect-") and not name.endswith(".tmp"):
            with open(os.path.join(STATE, name), encoding="utf-8") as handle:
                found.append(json.load(handle))
    return found


class Handler(JsonHandler):
    def do_POST(self) -> None:  # noqa: N802
        task = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        key = self.headers["idempotency-key"]
        with LOCK:
            if os.path.exists(path("effect", key)):
                with open(path("effect", key), encoding="utf-8") as handle:
                    return self.answer(200, json.load(handle), replayed=True)
            if os.path.exists(path("pending", key)):
                return self.answer(409, {"error": "in flight"})
            open(path("pending", key), "w").close()
        time.sleep(0.2)  # the window the kill nemesis hits
        effect = {"id": f"E-{key}", "key": key, "task": task}
        with open(path("effect", key) + ".tmp", "w", encoding="utf-8") as handle:
            json.dump(effect, handle)
        os.replace(path("effect", key) + ".tmp", path("effect", key))
        os.remove(path("pending", key))
        time.sleep(SETTLE_S)
        self.answer(201, effect)

    def do_GET(self) -> None:  # noqa: N802
        self.answer(200, effects())


serve(Handler)
