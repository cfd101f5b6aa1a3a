from __future__ import annotations

from retryproof.reference_impl.faulty import Any
from retryproof.reference_impl.runtime import Runtime


class LegacySaysIdempotent(Runtime):
    """The legacy path (no submission id) answers ``idempotent: true``.

    The calls still work and still make a task each, but the result advertises a
    guarantee that path does not have: a caller would retry it and get a second task.
    """

    killed_by = ("LEGACY-NO-ID",)

    def _legacy_result(self, task_id: str, task_path: str, digest: str) -> dict[str, Any]:
        return {**super()._legacy_result(task_id, task_path, digest), "idempotent": True}
