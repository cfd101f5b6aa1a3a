from __future__ import annotations

from retryproof.reference_impl.approval import ApprovalService
from retryproof.reference_impl.faulty import Any
from retryproof.reference_impl.runtime import Runtime


class StaleMarkingApprovalService(ApprovalService):
    """Logs every stale finding, a succeeded operation's included."""

    def _mark_stale(self, record: dict[str, Any]) -> str:
        if record["state"] == "succeeded":
            # The state stays succeeded, but the log gains a step that never happened.
            self._step(record, "marked_stale")
            return "stale"
        return super()._mark_stale(record)


class StaleMarksSucceeded(Runtime):
    """A stale recovery of a succeeded operation appends ``marked_stale`` although the operation keeps ``succeeded``.

    Logging every stale finding looks harmless, but the audit log then records a step
    that set ``stale`` when none did: a reader of the log takes a finished operation
    for one that was stopped (APPROVAL-R13). Everything else is the reference.
    """

    approval_service = StaleMarkingApprovalService
    killed_by = ("RECOVERY-STALE-REQUEST",)
