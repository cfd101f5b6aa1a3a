from __future__ import annotations

import json
import os
from collections.abc import Mapping

from retryproof.reference_impl.faulty import Any
from retryproof.reference_impl.faulty.unguarded import create_unguarded
from retryproof.reference_impl.runtime import Runtime
from retryproof.spec.digest import check_submission_id


class FuzzySubjectDedup(Runtime):
    """Treats any stored task with the same subject as "the same submission".

    The first field report's rejected quick fix: look for an existing task with the
    same title before creating. It survives restarts, but it merges two intents that
    share a subject and so suppresses legitimate new work.
    """

    killed_by = ("DISTINCT-IDS-DISTINCT-TASKS",)

    def write_task(
        self, task: Any, client_submission_id: str | None = None, invocation: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        if client_submission_id is None:
            return super().write_task(task, None, invocation)
        check_submission_id(client_submission_id)
        digest = self._digest(task)
        with self._acquire("fuzzy-subject"):
            for name in sorted(os.listdir(self._dirs["tasks"])):
                if name.startswith(".") or not name.endswith(".json"):
                    continue
                with open(os.path.join(self._dirs["tasks"], name), "rb") as handle:
                    record = json.loads(handle.read())
                if (record.get("task") or {}).get("subject") == task.get("subject"):
                    first = self._legacy_result(record["task_id"], f"tasks/{name}", record["request_digest"])
                    return {
                        **first,
                        "client_submission_id": client_submission_id,
                        "idempotent": True,
                        "disposition": "reused",
                        "action_taken": False,
                        "request_digest": digest,
                    }
            return create_unguarded(self, client_submission_id, task, digest)
