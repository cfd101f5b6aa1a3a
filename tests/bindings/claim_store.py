"""The store behind the claim services (``claim_http.py``, ``claim_mcp.py``): a key is
claimed, the effect is made, the response is stored, the claim is marked done, each
step a durable file of its own in RETRYPROOF_STATE_DIR (temp, fsync, rename, fsync of
the directory). That is the shape of most idempotency libraries, and every step is
a crash point the kit can find under strace.

The fixed store (``DEFECT`` empty) is right at every point: a claim has a lease
(``LEASE_S``, the binding's ``recovery_s``) after which another call may take it over,
but only after looking for the effect the last holder may have made; a call cancelled
because its caller went away releases its claim unless the effect is made. A call that
takes a claim over does its work at once, without the windows (``WORK_S``,
``SETTLE_S``): the kit places its cuts and kills on first calls, and a takeover is a
retry after a kill (an even KILL-NEMESIS round may resend a killed key; its kill comes
at the first answer at the latest). With the windows, KILL-NEMESIS's final retries of
the keys its last round killed waited 0.6 s each, one after another: they took 4-7 s
of a 6-10 s run over HTTP, without them 2.4-2.8 s. Each
``RETRYPROOF_DEFECT`` breaks one thing:

- ``cancel-leaves-claim``: a cancelled call leaves its claim, and claims never expire:
  the key answers in flight forever;
- ``cancel-marks-unknown``: a cancelled call marks its key unknown, and an unknown key
  answers an error forever;
- ``pending-after-kill``: claims never expire: after a SIGKILL between claim and
  effect the key answers in flight forever;
- ``lease-reclaims``: a claim past its lease is taken over without looking for the
  effect: after a SIGKILL between effect and done, a second effect;
- ``torn-response``: the response is stored in two writes to its final name: after a
  SIGKILL between them, every retry reads a torn response and answers an error.
"""

from __future__ import annotations

import json
import os
import threading
import time

TYPE_CHECKING = False  # not typing's: importing typing costs each start of this -S service 3-4 ms of CPU
if TYPE_CHECKING:
    from typing import Any

STATE = os.environ["RETRYPROOF_STATE_DIR"]
DEFECT = os.environ.get("RETRYPROOF_DEFECT", "")
DEFECTS = ("cancel-leaves-claim", "cancel-marks-unknown", "pending-after-kill", "lease-reclaims", "torn-response")
if DEFECT and DEFECT not in DEFECTS:
    raise SystemExit(f"unknown RETRYPROOF_DEFECT {DEFECT!r}")
LEASE_S = 1.0
#: The claim -> effect window (where a caller who leaves cancels the call), and the
#: effect -> done one (where a cut once the effect is listed lands).
WORK_S = 0.3
SETTLE_S = 0.3
#: RETRYPROOF_CLAIM_WAITS=none, for a run of CRASH-POINTS alone: it kills at the durable
#: steps whatever the time between them, and its retries never meet a live call (the
#: killed server's calls died with it), so the calls do not wait and a claim left by a
#: kill is taken over after 0.2 s (the binding's recovery_s with it): a run of 12
#: points waited mostly for these windows and leases.
if os.environ.get("RETRYPROOF_CLAIM_WAITS") == "none":
    LEASE_S, WORK_S, SETTLE_S = 0.2, 0.0, 0.0
LOCK = threading.Lock()


def _path(kind: str, key: str) -> str:
    return os.path.join(STATE, f"{kind}-{key}.json")


def _durable(path: str, value: Any) -> None:
    temp = path + ".tmp"
    with open(temp, "w", encoding="utf-8") as handle:
        json.dump(value, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.rename(temp, path)
    _sync_directory()


def _sync_directory() -> None:
    directory = os.open(STATE, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _read(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        return None


def effects() -> list[dict[str, Any]]:
    found = []
    for name in sorted(os.listdir(STATE)):
        if name.startswith("effect-") and name.endswith(".json"):
            found.append(_read(os.path.join(STATE, name)))
    return found


def _effect_of(key: str) -> dict[str, Any] | None:
    return next((effect for effect in effects() if effect["key"] == key), None)


def _store_response(key: str, effect: dict[str, Any]) -> None:
    if DEFECT != "torn-response":
        _durable(_path("response", key), effect)
        return
    text = json.dumps(effect)
    half = len(text) // 2
    with open(_path("response", key), "w", encoding="utf-8") as handle:
        handle.write(text[:half])
        handle.flush()
        os.fsync(handle.fileno())
        handle.write(text[half:])
        handle.flush()
        os.fsync(handle.fileno())
    _sync_directory()


def _claim(key: str, task: Any) -> tuple[int, dict[str, Any]] | None:
    """Take the key, or the answer to give instead."""
    stored = _path("response", key)
    if os.path.exists(stored):
        try:
            return 200, _read(stored)
        except ValueError:
            return 500, {"error": "the stored response is unreadable"}
    claim = _read(_path("claim", key))
    if claim is not None:
        if claim["state"] == "unknown":
            return 500, {"error": "the outcome of an earlier call is unknown"}
        expires = DEFECT not in ("cancel-leaves-claim", "pending-after-kill")
        if not expires or time.time() - claim["at"] < LEASE_S:
            return 409, {"error": "in flight"}
        if DEFECT != "lease-reclaims":
            effect = _effect_of(key)
            if effect is not None:  # the last holder made it: finish its work
                return 200, _finish(key, effect)[1]
        # Taken over: the work is done at once, without the windows (the module's docstring says why).
        _durable(_path("claim", key), {"state": "processing", "at": time.time()})
        return _finish(key, _make(key, task))
    _durable(_path("claim", key), {"state": "processing", "at": time.time()})
    return None


def begin(key: str, task: Any) -> tuple[int, dict[str, Any]] | None:
    """Claim ``key``; or, instead, the answer: 200 replayed, 201 made at once (a claim
    taken over: ``task`` is its effect's), 409 in flight, 500 an error. The caller then
    waits ``WORK_S`` (its caller may leave meanwhile: ``abandon``) and calls ``make``."""
    with LOCK:
        return _claim(key, task)


def abandon(key: str) -> None:
    """The caller went away before the effect was made."""
    with LOCK:
        if DEFECT == "cancel-marks-unknown":
            _durable(_path("claim", key), {"state": "unknown", "at": time.time()})
        elif DEFECT != "cancel-leaves-claim":
            os.remove(_path("claim", key))
            _sync_directory()


def make(key: str, task: Any) -> dict[str, Any]:
    """Make the effect; the caller then waits ``SETTLE_S`` (nothing cancels the call
    past the effect) and calls ``finish``."""
    with LOCK:
        return _make(key, task)


def finish(key: str, effect: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """Store the response, mark the claim done: 201 and the effect."""
    with LOCK:
        return _finish(key, effect)


def _make(key: str, task: Any) -> dict[str, Any]:
    effect = {"id": f"E-{len(effects()) + 1}", "key": key, "task": task}
    _durable(os.path.join(STATE, f"effect-{effect['id']}.json"), effect)
    return effect


def _finish(key: str, effect: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    _store_response(key, effect)
    _durable(_path("claim", key), {"state": "done", "at": time.time()})
    return 201, effect
