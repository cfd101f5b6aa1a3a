from __future__ import annotations

import os

from retryproof.reference_impl.faulty import Any
from retryproof.reference_impl.runtime import Runtime


class RenumbersStalledOnStart(Runtime):
    """Moves each reservation that has no task object yet to a newly allocated task
    number at the first start-up after it stalled.

    Looks like tidy housekeeping ("no task was written, so the number was never
    used; hand out a fresh one"), but the preallocated identity is the promise made
    to the caller (REC-1): a client that logged the first attempt's task_id after an
    io_error now finds another task. A kit that learns the identity only after the
    restart sees nothing wrong. Each reservation moves once (it is marked), so two
    restarts in a row show the same identity.
    """

    killed_by = ("CRASH-AFTER-RESERVE", "PATH-OCCUPIED-CONFLICT", "STALE-RESERVATION-DIAGNOSTICS")

    def __init__(self, state_dir: str | os.PathLike[str], *args: Any, **kwargs: Any):
        super().__init__(state_dir, *args, **kwargs)
        for submission_id in self._journal.keys():
            receipt = self._read_receipt(submission_id)
            if receipt is None:
                continue
            unwritten = not os.path.exists(self._state_path(receipt.get("task_path", "")))
            if receipt.get("state") == "reserved" and unwritten and not receipt.get("renumbered"):
                task_id = f"TASK-{self._allocate_number():06d}"
                self._advance(receipt, "reserved", task_id=task_id, task_path=f"tasks/{task_id}.json", renumbered=True)
