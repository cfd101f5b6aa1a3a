"""What the tool-shape test services share: effects kept durably under their caller's
key, one JSON file each (written to a temporary file, fsynced, renamed, the folder
fsynced), so a SIGKILL leaves an effect whole or absent. Each service decides itself
what it answers; this only stores (and says how long an answer follows its effect,
``SETTLE_S``, for every test service that answers after an effect)."""

from __future__ import annotations

import json
import os
import re
import threading

TYPE_CHECKING = False  # not typing's: importing typing costs each start of this -S service 3-4 ms of CPU
if TYPE_CHECKING:
    from typing import Any

STATE = os.environ["RETRYPROOF_STATE_DIR"]
LOCK = threading.Lock()
#: How long a test service answers after making its effect: the work a real service
#: does past its write (an audit line, a notification). KILL-NEMESIS's effect -> answer
#: rounds kill in that window, seen through the listing, at their first placement; a
#: service whose answer left as its effect was made met none, so each such round was
#: placed six times, each a restart (mcp_memory_dedup.py, when KILL-NEMESIS ran on it:
#: 15 server starts and 12.7 CPU-s, 5 and 5.5 with it). A runtime without that window is test_kill_nemesis.py's.
SETTLE_S = 0.1


def _stored() -> list[dict[str, Any]]:
    found = []
    for name in sorted(os.listdir(STATE)):
        if name.startswith("effect-") and name.endswith(".json"):
            with open(os.path.join(STATE, name), encoding="utf-8") as handle:
                found.append(json.load(handle))
    return found


#: The effects on disk, read once at start and then kept as ``add`` makes them: this
#: process is the state directory's one writer. Reading every effect file again for
#: each call (a lookup scans them all) cost about a third of each server's CPU in the
#: three-field run, whose FUZZ-MODEL histories pile their effects up on one state directory.
_EFFECTS = _stored()


def effects() -> list[dict[str, Any]]:
    return list(_EFFECTS)


def find(key: str | None) -> dict[str, Any] | None:
    return None if key is None else next((effect for effect in _EFFECTS if effect["key"] == key), None)


def add(key: str | None, fields: dict[str, Any]) -> dict[str, Any]:
    """A new effect under ``key`` (the caller holds ``LOCK``), listed once it is durable."""
    effect = {"id": f"T-{len(_EFFECTS) + 1}", "key": key, "fields": fields}
    path = os.path.join(STATE, f"effect-{len(_EFFECTS) + 1:06d}.json")
    with open(path + ".tmp", "w", encoding="utf-8") as handle:
        json.dump(effect, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(path + ".tmp", path)
    folder = os.open(STATE, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)
    _EFFECTS.append(effect)
    return effect


def keyed_post(handler: Any) -> tuple[Any, str | None] | None:
    """A POST's JSON body and its ``Idempotency-Key``; None once a malformed key was
    answered 400 (``handler`` is a ``json_service.JsonHandler``)."""
    body = json.loads(handler.rfile.read(int(handler.headers.get("content-length") or 0)))
    key = handler.headers.get("idempotency-key")
    if not valid_key(key):
        handler.answer(400, {"error": "bad idempotency key"})
        return None
    return body, key


def valid_key(key: str | None) -> bool:
    """The key syntax of the retryproof contract (no key at all is the legacy path)."""
    return key is None or re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}", key) is not None
