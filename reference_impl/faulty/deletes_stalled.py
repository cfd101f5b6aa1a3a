from __future__ import annotations

from retryproof.reference_impl.faulty import Any
from retryproof.reference_impl.runtime import Runtime


class DiagnoseDeletesStalled(Runtime):
    """Diagnostics that "clean up" a stalled reservation by deleting its receipt.

    A timeout turned into a business decision: the reservation is gone, so the next
    retry starts over under a new identity, and the reading op changed state.
    """

    killed_by = ("STALE-RESERVATION-DIAGNOSTICS",)

    def diagnose(self, client_submission_id: Any, stale_after_s: Any) -> dict[str, Any]:
        facts = super().diagnose(client_submission_id, stale_after_s)
        if facts["stalled"]:
            # The journal is append-only, so the deletion is a line that reads as "absent".
            self._write_receipt({"client_submission_id": client_submission_id, "state": "deleted"})
        return facts

    def _read_receipt(self, submission_id: str) -> dict[str, Any] | None:
        receipt = super()._read_receipt(submission_id)
        return None if receipt is not None and receipt["state"] == "deleted" else receipt
