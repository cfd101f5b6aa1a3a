from __future__ import annotations

import threading
from collections.abc import Mapping

from retryproof.reference_impl.faulty import Any
from retryproof.reference_impl.faulty.unguarded import create_unguarded
from retryproof.reference_impl.runtime import Runtime
from retryproof.spec.digest import check_submission_id


class MemoryDedup(Runtime):
    """Deduplicates in process memory only: a restart forgets every submission.

    The first field report's upper-layer cache: correct while the process lives,
    so response loss and races pass, but the result never became a durable fact.
    After a restart (graceful or SIGKILL) the retry creates a second task.
    """

    killed_by = ("RESTART-REUSE", "A2-CRASH-BEFORE-RESPONSE", "CRASH-POINTS")

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._seen: dict[str, dict[str, Any]] = {}
        self._seen_lock = threading.Lock()

    def write_task(
        self, task: Any, client_submission_id: str | None = None, invocation: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        if client_submission_id is None:
            return super().write_task(task, None, invocation)
        check_submission_id(client_submission_id)
        digest = self._digest(task)
        with self._seen_lock:
            first = self._seen.get(client_submission_id)
            if first is None:
                first = self._seen[client_submission_id] = create_unguarded(self, client_submission_id, task, digest)
                # The window the crash scenarios probe: the effect is durable, the answer unsent.
                self._failpoint("write_task.after_commit")
                return first
        if first["request_digest"] != digest:
            return {
                **first,
                "disposition": "conflict",
                "action_taken": False,
                "request_digest": digest,
                "conflict": {
                    "reason": "digest_mismatch",
                    "receipt_request_digest": first["request_digest"],
                    "receipt_digest_schema_version": first["digest_schema_version"],
                },
            }
        return {**first, "disposition": "reused", "action_taken": False}
