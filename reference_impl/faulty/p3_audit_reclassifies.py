from __future__ import annotations

from retryproof.reference_impl.approval import ApprovalService
from retryproof.reference_impl.faulty import Any
from retryproof.reference_impl.runtime import Runtime
from retryproof.spec.protocol import ProtocolError


class ReclassifyingApprovalService(ApprovalService):
    """The second field report's approval service: one catch around the executor and
    the completion audit, and a recovery that trusts the terminal state."""

    def _complete(self, record: dict[str, Any], effect_id: str, repaired: bool = False) -> None:
        try:
            super()._complete(record, effect_id, repaired)
        except ProtocolError:
            # The shared catch: an audit error after the effect reads as "the
            # execution failed"; the effect stays on record, as in the field report.
            record.update(state="failed", audit_pending=[])
            self.store.save(record)
            raise

    def _resume(self, record: dict[str, Any]) -> str:
        if record["state"] == "failed":
            # Approved and failed reads as executable again; the recorded effect is
            # never consulted as a reason not to repeat it: a new attempt, a new effect.
            record["effect_id"] = None
            self._run(record)
            return "re_executed"
        return super()._resume(record)


class P3AuditReclassifies(Runtime):
    """A completion-audit failure after the effect turns the operation into ``failed``, and recovery executes it again.

    The second field report's P3 chain: one ``catch`` shared by executor errors and
    the completion audit reclassifies a finished action as failed; recovery accepts an
    approved, failed operation as executable and calls the executor a second time.
    Approval, start audit and single consumption are untouched, so P0-P2 pass.
    """

    approval_service = ReclassifyingApprovalService
    killed_by = ("P3-COMPLETION-AUDIT-FAULT",)
