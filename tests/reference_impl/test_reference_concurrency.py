"""Eight callers with one id: on one connection, and in eight processes on one state dir."""

from __future__ import annotations

from collections import Counter

from retryproof.spec.protocol import Success

TASK = {"sender": "PM", "recipient": "DEV", "subject": "Fix login"}
CALLERS = 8


def assert_one_creation(results: list[dict], tasks: list[dict], submission_id: str) -> None:
    assert Counter(result["disposition"] for result in results) == {"created": 1, "reused": CALLERS - 1}
    assert len({(result["task_id"], result["task_path"]) for result in results}) == 1
    assert [(task["task_id"], task["client_submission_id"]) for task in tasks] == [
        (results[0]["task_id"], submission_id)
    ]


def test_eight_pipelined_calls_on_one_connection_create_once(start):
    harness = start()
    requests = [harness.send("write_task", {"client_submission_id": "burst-1", "task": TASK}) for _ in range(CALLERS)]
    responses = [harness.wait(request, "write_task") for request in requests]
    assert all(isinstance(response, Success) for response in responses), responses
    assert_one_creation(
        [dict(response.result) for response in responses], harness.call("list_tasks")["tasks"], "burst-1"
    )


def test_eight_processes_on_one_state_directory_create_once(start):
    harnesses = [start() for _ in range(CALLERS)]
    for harness in harnesses:
        harness.hello()  # every process is up before any call goes out
    requests = [harness.send("write_task", {"client_submission_id": "multi-1", "task": TASK}) for harness in harnesses]
    responses = [harness.wait(request, "write_task") for harness, request in zip(harnesses, requests, strict=True)]
    assert all(isinstance(response, Success) for response in responses), responses
    assert_one_creation(
        [dict(response.result) for response in responses], harnesses[0].call("list_tasks")["tasks"], "multi-1"
    )


def test_distinct_ids_racing_in_eight_processes_never_share_a_task_number(start):
    harnesses = [start() for _ in range(CALLERS)]
    for harness in harnesses:
        harness.hello()
    requests = [
        (harness, harness.send("write_task", {"client_submission_id": f"race-{index}-{round_}", "task": TASK}))
        for round_ in range(3)
        for index, harness in enumerate(harnesses)
    ]
    requests += [(harness, harness.send("write_task", {"task": TASK})) for harness in harnesses]  # legacy, too
    results = [dict(harness.wait(request, "write_task").result) for harness, request in requests]
    assert all(result["action_taken"] for result in results)
    tasks = harnesses[0].call("list_tasks")["tasks"]
    assert len({result["task_id"] for result in results}) == len(results) == len(tasks) == CALLERS * 4
    assert sorted(task["task_id"] for task in tasks) == sorted(result["task_id"] for result in results)
