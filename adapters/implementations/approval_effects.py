"""The application's side of an approved operation, the same for every approval target.

An approval flow guards a side effect it does not own; this module is that side effect
(the executors of ``spec/retryproof.yaml`` ``approval.executors``) and the request
identity the application computes, so that the approval targets' verdicts differ only
by the library. It makes no approval or recovery decision.

Each executor call is counted first (an exclusively created, fsynced file under
``calls/<key>/``), then makes its effect (one under ``effects/<key>/``): a crash
between them leaves a counted call and no effect, never the other way round. A
``dedupe`` executor deduplicates by the key its caller hands it, from its own files,
as a tool told "use this idempotency key" would.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from typing import Any

from retryproof.spec.jcs import CanonicalizationError, canonical_bytes
from retryproof.spec.protocol import ProtocolError

EXECUTORS = ("plain", "dedupe", "opaque")


def request_digest(request: Any) -> str:
    """APPROVAL-R5: ``sha256:`` and the hex SHA-256 of the request's RFC 8785 bytes."""
    if not isinstance(request, dict):
        raise ProtocolError("invalid_request", "request: must be a JSON object")
    try:
        return "sha256:" + hashlib.sha256(canonical_bytes(request)).hexdigest()
    except CanonicalizationError as exc:
        raise ProtocolError("invalid_request", f"request: {exc}") from None


def checked_proposal(operation_key: Any, request: Any, executor: Any) -> str:
    """The request digest of a valid proposal; ``invalid_request`` otherwise."""
    if not isinstance(operation_key, str) or not operation_key:
        raise ProtocolError("invalid_request", "operation_key: must be a non-empty string")
    try:
        operation_key.encode("utf-8")
    except UnicodeEncodeError:
        raise ProtocolError("invalid_request", "operation_key: holds a lone surrogate") from None
    if executor not in EXECUTORS:
        raise ProtocolError("invalid_request", f"executor: must be one of {', '.join(EXECUTORS)}")
    return request_digest(request)


def _fsync_dir(path: str) -> None:
    descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


class EffectStore:
    """Effects and executor calls per operation key, under ``<state dir>``."""

    def __init__(self, state_dir: str):
        self.state_dir = state_dir

    def _folder(self, kind: str, key: str) -> str:
        return os.path.join(self.state_dir, kind, hashlib.sha256(key.encode("utf-8")).hexdigest())

    def _listed(self, kind: str, key: str) -> list[str]:
        try:
            return sorted(os.listdir(self._folder(kind, key)), key=lambda name: int(name[1:].split("-")[0]))
        except FileNotFoundError:
            return []

    def _create(self, kind: str, key: str, prefix: str, tag: str = "") -> str:
        """The next ``<prefix><n>`` file, created exclusively and durably; its name."""
        folder = self._folder(kind, key)
        os.makedirs(folder, exist_ok=True)
        number = len(os.listdir(folder)) + 1
        while True:
            name = f"{prefix}{number}{tag}"
            try:
                descriptor = os.open(os.path.join(folder, name), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                number += 1
                continue
            os.fsync(descriptor)
            os.close(descriptor)
            _fsync_dir(folder)
            return name

    def effects(self, operation_key: str) -> list[str]:
        return [name.split("-")[0] for name in self._listed("effects", operation_key)]

    def run(self, operation_key: str, executor: str, dedupe_key: str) -> tuple[str, bool]:
        """Call the executor once: ``(effect_id, deduplicated)``.

        A ``dedupe`` executor finds an effect made under ``dedupe_key`` and makes none;
        ``plain`` and ``opaque`` make one on every call."""
        self._create("calls", operation_key, "C")
        tag = "-" + hashlib.sha256(dedupe_key.encode("utf-8")).hexdigest()[:16]
        if executor == "dedupe":
            for name in self._listed("effects", operation_key):
                if name.endswith(tag):
                    return name.split("-")[0], True
        return self._create("effects", operation_key, "E", tag).split("-")[0], False

    def listing(self, operation_key: Any) -> Mapping[str, Any]:
        """The ``list_effects`` result (PROTOCOL-R26)."""
        if not isinstance(operation_key, str):
            raise ProtocolError("invalid_request", "operation_key: must be a string")
        return {
            "effects": [{"effect_id": effect} for effect in self.effects(operation_key)],
            "executor_calls": len(self._listed("calls", operation_key)),
        }

    def evidence(self, operation_key: str, executor: str) -> str:
        """What the application can observe of an effect whose record is missing:
        a ``plain`` effect is observable; a ``dedupe`` executor keeps its
        deduplication to itself and an ``opaque`` effect is not observable."""
        if executor == "plain":
            return "present" if self.effects(operation_key) else "absent"
        return "unknown"
