from __future__ import annotations

import os
from typing import Any

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
            os.unlink(self._confined("receipts", client_submission_id + ".json"))
            self._fsync_directory(self._dirs["receipts"])
        return facts
