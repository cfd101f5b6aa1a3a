from __future__ import annotations

from retryproof.reference_impl.faulty import Any
from retryproof.reference_impl.runtime import Runtime


class DigestIgnored(Runtime):
    """Reuses the first result for a known id whatever the request now says.

    The id alone is trusted as the identity, so "fix login for DEV" and, later under
    the same id, "deploy for OPS" both answer with the first task: the second intent
    is silently dropped instead of ending in a conflict.
    """

    killed_by = ("CONFLICT-DIGEST",)

    def _settle(self, submission_id: str, task: Any, digest: str, receipt: dict[str, Any]) -> dict[str, Any]:
        return super()._settle(submission_id, task, receipt["request_digest"], receipt)
