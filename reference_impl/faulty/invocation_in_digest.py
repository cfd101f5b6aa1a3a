from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping

from retryproof.reference_impl.faulty import Any
from retryproof.reference_impl.runtime import Runtime
from retryproof.spec.jcs import canonical_bytes


class InvocationInDigest(Runtime):
    """Hashes the invocation data (trace id, retry count) together with the task.

    Every retry carries a new trace id or retry count, so every retry looks like a
    different request and ends in a conflict: the retry the contract exists for
    can never succeed.
    """

    killed_by = ("INVOCATION-FIELDS-IGNORED",)

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._call = threading.local()

    def write_task(
        self, task: Any, client_submission_id: str | None = None, invocation: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        self._call.invocation = invocation
        try:
            return super().write_task(task, client_submission_id, invocation)
        finally:
            self._call.invocation = None

    def _digest(self, task: Any) -> str:
        digest = super()._digest(task)
        invocation = getattr(self._call, "invocation", None)
        if not invocation:
            return digest
        return "sha256:" + hashlib.sha256(digest.encode("ascii") + canonical_bytes(dict(invocation))).hexdigest()
