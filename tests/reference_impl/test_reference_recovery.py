"""Retries across lost responses, restarts, crashes at every failpoint, and damaged state.

Each test counts tasks from ``list_tasks`` (durable state), never from what calls said.
"""

from __future__ import annotations

import signal

import pytest
from reference_client import snapshot

from retryproof.spec.digest import request_digest

TASK = {"sender": "PM", "recipient": "DEV", "subject": "Fix login", "references": ["INC-17"]}
OTHER_TASK = {"sender": "PM", "recipient": "OPS", "subject": "Deploy staging"}


def tasks_of(harness) -> list[dict]:
    return harness.call("list_tasks")["tasks"]


def test_a_lost_response_is_recovered_by_the_retry(start):
    harness = start()
    harness.wait(harness.send("write_task", {"client_submission_id": "lost-1", "task": TASK}))  # never read
    retry = harness.call(
        "write_task", client_submission_id="lost-1", task=TASK, invocation={"retry_count": 1, "trace_id": "t-2"}
    )
    assert (retry["disposition"], retry["action_taken"]) == ("reused", False)
    assert [(task["task_id"], task["client_submission_id"]) for task in tasks_of(harness)] == [
        (retry["task_id"], "lost-1")
    ]
    assert retry["request_digest"] == request_digest(TASK)


@pytest.mark.parametrize("ending", ["shutdown", "SIGKILL"])
def test_reuse_survives_the_end_of_the_process(start, ending):
    first = start()
    created = first.call("write_task", client_submission_id="restart-1", task=TASK)
    first.shutdown() if ending == "shutdown" else first.kill()
    second = start()
    reused = second.call("write_task", client_submission_id="restart-1", task=TASK)
    assert reused == {**created, "disposition": "reused", "action_taken": False}
    assert len(tasks_of(second)) == 1


# failpoint -> whether the retry is the call that writes the task object
CRASH_POINTS = {
    "write_task.after_reserve": True,
    "write_task.after_task_write": False,
    "write_task.after_task_created": False,
    "write_task.after_commit": False,
}


@pytest.mark.parametrize(("failpoint", "retry_writes"), CRASH_POINTS.items())
def test_sigkill_at_each_failpoint_converges_on_the_preallocated_identity(start, state_dir, failpoint, retry_writes):
    doomed = start({failpoint: "crash"})
    doomed.send("write_task", {"client_submission_id": "crash-1", "task": TASK})
    assert doomed.wait_exit() == -signal.SIGKILL
    survivor = start()
    facts = survivor.call("diagnose", client_submission_id="crash-1", stale_after_s=3600)
    assert facts["task_exists"] is not retry_writes
    assert facts["stalled"] is False  # not yet older than an hour
    retry = survivor.call("write_task", client_submission_id="crash-1", task=TASK)
    assert retry["disposition"] == ("created" if retry_writes else "reused")
    assert retry["action_taken"] is retry_writes
    assert (retry["task_id"], retry["task_path"]) == (facts["task_id"], facts["task_path"])
    assert [task["task_id"] for task in tasks_of(survivor)] == [facts["task_id"]]
    again = survivor.call("write_task", client_submission_id="crash-1", task=TASK)
    assert (again["disposition"], again["task_id"]) == ("reused", facts["task_id"])
    assert survivor.call("diagnose", client_submission_id="crash-1", stale_after_s=0)["state"] == "committed"


@pytest.mark.parametrize("failpoint", CRASH_POINTS)
def test_an_io_error_at_each_failpoint_is_reported_and_the_retry_converges(start, failpoint):
    harness = start({failpoint: "fail"})
    assert harness.error("write_task", client_submission_id="io-1", task=TASK) == "io_error"
    healthy = start()
    retry = healthy.call("write_task", client_submission_id="io-1", task=TASK)
    assert retry["disposition"] == ("created" if failpoint == "write_task.after_reserve" else "reused")
    assert [task["task_id"] for task in tasks_of(healthy)] == [retry["task_id"]]


def test_a_different_task_under_one_id_is_a_conflict_that_changes_nothing(start, state_dir):
    harness = start()
    created = harness.call("write_task", client_submission_id="conflict-1", task=TASK)
    before = snapshot(state_dir)
    conflict = harness.call("write_task", client_submission_id="conflict-1", task=OTHER_TASK)
    assert snapshot(state_dir) == before
    assert conflict["disposition"] == "conflict" and conflict["action_taken"] is False
    assert conflict["conflict"] == {
        "reason": "digest_mismatch",
        "receipt_request_digest": created["request_digest"],
        "receipt_digest_schema_version": "write-task-v1",
    }
    assert (conflict["task_id"], conflict["request_digest"]) == (created["task_id"], request_digest(OTHER_TASK))
    assert harness.call("read_task", task_id=created["task_id"])["task"] == TASK


def test_a_receipt_of_another_digest_schema_is_a_conflict(start, state_dir):
    harness = start()
    created = harness.call("write_task", client_submission_id="schema-1", task=TASK)
    assert (
        harness.call(
            "tamper",
            action="set_receipt_schema",
            client_submission_id="schema-1",
            digest_schema_version="write-task-v0",
        )
        == {}
    )
    before = snapshot(state_dir)
    conflict = harness.call("write_task", client_submission_id="schema-1", task=TASK)
    assert snapshot(state_dir) == before
    assert conflict["conflict"]["reason"] == "digest_schema_mismatch"
    assert conflict["conflict"]["receipt_digest_schema_version"] == "write-task-v0"
    assert conflict["task_id"] == created["task_id"]


# Only a receipt that confirmed the task (task_created, committed) can miss it; under
# reserved an absent task is simply not written yet, and the retry writes it.
@pytest.mark.parametrize("failpoint", [None, "write_task.after_task_created"], ids=["committed", "task_created"])
def test_a_vanished_task_is_task_missing_and_is_not_created_again(start, state_dir, failpoint):
    first = start({failpoint: "crash"} if failpoint else None)
    request = first.send("write_task", {"client_submission_id": "gone-1", "task": TASK})
    if failpoint:
        first.wait_exit()
    else:
        first.wait(request)
    harness = start()
    task_id = harness.call("diagnose", client_submission_id="gone-1", stale_after_s=1)["task_id"]
    assert harness.call("tamper", action="remove_task", task_id=task_id) == {}
    before = snapshot(state_dir)
    for _ in range(2):
        conflict = harness.call("write_task", client_submission_id="gone-1", task=TASK)
        assert (conflict["disposition"], conflict["conflict"]["reason"], conflict["task_id"]) == (
            "conflict",
            "task_missing",
            task_id,
        )
    assert snapshot(state_dir) == before
    assert tasks_of(harness) == []


def test_a_foreign_object_at_the_reserved_path_is_occupied_and_not_overwritten(start, state_dir):
    doomed = start({"write_task.after_reserve": "crash"})
    doomed.send("write_task", {"client_submission_id": "occupied-1", "task": TASK})
    doomed.wait_exit()
    harness = start()
    assert harness.call("tamper", action="occupy_task_path", client_submission_id="occupied-1") == {}
    before = snapshot(state_dir)
    conflict = harness.call("write_task", client_submission_id="occupied-1", task=TASK)
    assert snapshot(state_dir) == before
    assert conflict["conflict"]["reason"] == "task_path_occupied"
    foreign = harness.call("read_task", task_id=conflict["task_id"])
    assert foreign["client_submission_id"] is None and foreign["task"] != TASK


def test_tamper_of_what_does_not_exist_is_not_found(start):
    harness = start()
    assert harness.error("tamper", action="remove_task", task_id="TASK-000404") == "not_found"
    assert harness.error("tamper", action="occupy_task_path", client_submission_id="nobody") == "not_found"
    assert (
        harness.error("tamper", action="set_receipt_schema", client_submission_id="nobody", digest_schema_version="v0")
        == "not_found"
    )
    assert harness.error("tamper", action="remove_task", client_submission_id="x") == "invalid_request"
    assert harness.error("tamper", action="burn_it_down") == "invalid_request"


def test_diagnose_reads_a_stalled_reservation_without_touching_it(start, state_dir):
    doomed = start({"write_task.after_reserve": "crash"})
    doomed.send("write_task", {"client_submission_id": "stalled-1", "task": TASK})
    doomed.wait_exit()
    harness = start()
    before = snapshot(state_dir)
    stalled = harness.call("diagnose", client_submission_id="stalled-1", stale_after_s=0)
    fresh = harness.call("diagnose", client_submission_id="stalled-1", stale_after_s=3600)
    absent = harness.call("diagnose", client_submission_id="never-seen", stale_after_s=0)
    assert snapshot(state_dir) == before
    assert stalled == {**stalled, "state": "reserved", "task_exists": False, "digest_matches": None, "stalled": True}
    assert (fresh["state"], fresh["stalled"], fresh["task_id"]) == ("reserved", False, stalled["task_id"])
    assert absent["state"] == "absent"
    assert tasks_of(harness) == []
    # Still there after a restart: nothing expired or cleaned it up.
    harness.kill()
    assert start().call("diagnose", client_submission_id="stalled-1", stale_after_s=0)["state"] == "reserved"


def test_diagnose_compares_the_task_on_disk_with_the_receipt(start):
    doomed = start({"write_task.after_task_write": "crash"})
    doomed.send("write_task", {"client_submission_id": "diag-1", "task": TASK})
    doomed.wait_exit()
    harness = start()
    facts = harness.call("diagnose", client_submission_id="diag-1", stale_after_s=3600)
    assert (facts["state"], facts["task_exists"], facts["digest_matches"]) == ("reserved", True, True)
    harness.call("tamper", action="occupy_task_path", client_submission_id="diag-1")
    assert harness.call("diagnose", client_submission_id="diag-1", stale_after_s=3600)["digest_matches"] is False
    assert harness.error("diagnose", client_submission_id="diag-1", stale_after_s=-1) == "invalid_request"


def test_report_deduplication_survives_a_restart(start):
    first = start()
    task_id = first.call("write_task", client_submission_id="task-1", task=TASK)["task_id"]
    filed = first.call("write_report", client_submission_id="rep-1", task_id=task_id, content="QA passed")
    first.kill()
    second = start()
    again = second.call("write_report", client_submission_id="rep-1", task_id=task_id, content="QA passed")
    assert (filed["deduplicated"], again) == (False, {"report_id": filed["report_id"], "deduplicated": True})
    assert second.call("list_reports")["reports"] == [{"report_id": filed["report_id"], "task_id": task_id}]
    assert (
        second.error("write_report", client_submission_id="rep-1", task_id=task_id, content="QA failed")
        == "invalid_request"
    )
