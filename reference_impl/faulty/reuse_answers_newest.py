from __future__ import annotations

from retryproof.reference_impl.faulty import Any
from retryproof.reference_impl.runtime import Runtime


class ReuseAnswersNewest(Runtime):
    """Answers a reuse with the most recently created task instead of the task bound to the id.

    The reuse answer is rebuilt from "the task just made" (a last-insert lookup)
    instead of from the receipt. While the reused task is the newest, as in a retry
    right after its first call, the answer is right; a retry of an earlier id after
    later creations names another submission's task, with this submission's id and
    digest beside it.
    """

    killed_by = ("REUSE-EARLIER-ID",)

    def _reuse_committed(self, digest: str, receipt: dict[str, Any]) -> dict[str, Any]:
        result = super()._reuse_committed(digest, receipt)
        if result["disposition"] != "reused":
            return result
        newest = max(self.list_tasks()["tasks"], key=lambda listed: listed["task_id"])
        return {**result, "task_id": newest["task_id"], "task_path": newest["task_path"]}
