from __future__ import annotations

import os

from retryproof.reference_impl.faulty import Any
from retryproof.reference_impl.runtime import Runtime


class RecoveryNewNumber(Runtime):
    """Recovers an interrupted reservation under a new task number instead of
    adopting the task the first attempt already wrote.

    Looks cautious ("never touch a half-finished object"), but the first attempt's
    task is complete and durable: the retry makes a second task for one submission.
    No scenario is needed for FUZZ-MODEL to find this: a crash at a declared failpoint
    and a retry are among the histories it explores.
    """

    killed_by = ("CRASH-AFTER-TASK-WRITE", "FUZZ-MODEL", "CRASH-POINTS")

    def _recover_reserved(self, submission_id: str, task: Any, digest: str, receipt: dict[str, Any]) -> dict[str, Any]:
        if os.path.exists(self._state_path(receipt["task_path"])):
            task_id = f"TASK-{self._allocate_number():06d}"
            receipt = self._advance(receipt, "reserved", task_id=task_id, task_path=f"tasks/{task_id}.json")
        return super()._recover_reserved(submission_id, task, digest, receipt)
