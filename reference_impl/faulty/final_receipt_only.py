from __future__ import annotations

from collections.abc import Mapping

from retryproof.reference_impl.faulty import Any
from retryproof.reference_impl.runtime import Runtime


class FinalReceiptOnly(Runtime):
    """Persists the receipt only once committed: no reserved or task_created state.

    The narrower crash window of the first field report: the task is durable, the
    final receipt is not yet written, the process dies, and the retry finds no trace
    of the submission, so it creates again.
    """

    killed_by = ("CRASH-AFTER-TASK-WRITE", "CRASH-AFTER-TASK-CREATED", "CRASH-POINTS")

    def _reserve(self, submission_id: str, digest: str, task: Any) -> dict[str, Any]:
        # The number is still claimed (a bare claim line); the reservation stays in memory.
        return self._reservation(submission_id, digest, self._allocate_number())

    def _write_receipt(self, receipt: Mapping[str, Any]) -> None:
        if receipt["state"] == "committed":
            super()._write_receipt(receipt)  # the receipt's first and only line
