"""Start-up of a harness on DBOS: serve only once the workflows DBOS resumed have settled.

``DBOS.launch()`` resumes this executor's PENDING workflows on a background thread, as
a restarted application would. Without a wait the kit's first look at the tasks would
race that thread, and a verdict would depend on timing. The wait decides nothing:
what the resumed workflows do is DBOS's. Shared by every harness built on DBOS (DBOS
Transact itself, Pydantic AI's DBOS durability).
"""

from __future__ import annotations

import time

from dbos import DBOS

#: Longest wait for the workflows DBOS resumes at launch.
RECOVERY_WAIT_S = 20.0


def await_startup_recovery(timeout_s: float = RECOVERY_WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    # Recovery re-enqueues a resumed workflow (ENQUEUED) before it runs again (PENDING).
    unsettled = ["PENDING", "ENQUEUED"]
    for workflow in DBOS.list_workflows(status=unsettled):
        while time.monotonic() < deadline:
            status = DBOS.get_workflow_status(workflow.workflow_id)
            if status is None or status.status not in unsettled:
                break
            time.sleep(0.05)
