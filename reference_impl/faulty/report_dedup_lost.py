from __future__ import annotations

from retryproof.reference_impl import durable
from retryproof.reference_impl.faulty import Any
from retryproof.reference_impl.runtime import Runtime
from retryproof.spec.digest import check_submission_id
from retryproof.spec.protocol import ProtocolError


class ReportDedupLost(Runtime):
    """write_report files a new report on every call: its deduplication was lost.

    Checklist question 7: a unified rewrite that made write_task safe regressed the
    one path that already was. A retried report is filed twice.
    """

    killed_by = ("WRITE-REPORT-DEDUP",)

    def write_report(self, client_submission_id: Any, task_id: Any, content: Any) -> dict[str, Any]:
        check_submission_id(client_submission_id)
        if not isinstance(task_id, str) or not isinstance(content, str) or not self._task_exists(task_id):
            raise ProtocolError("not_found", f"no task {task_id!r}")
        number = self._report_numbers.claim()
        record = {
            "report_id": f"REPORT-{number:06d}",
            "client_submission_id": client_submission_id,
            "task_id": task_id,
            "content": content,
        }
        path = self._confined("reports", f"{client_submission_id}.{number}.json")
        durable.create_new(path, durable.dump(record), self._fsync_directory)
        return {"report_id": record["report_id"], "deduplicated": False}

    def _task_exists(self, task_id: str) -> bool:
        try:
            return self.read_task(task_id) is not None
        except ProtocolError:
            return False
