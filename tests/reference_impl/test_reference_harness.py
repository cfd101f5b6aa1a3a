"""The harness process: handshake, bad input, start-up errors, bounded waits."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys

import pytest
from reference_client import snapshot

from retryproof.spec import load_spec
from retryproof.spec.protocol import Failure

TASK = {"sender": "PM", "recipient": "DEV", "subject": "Fix login"}


def test_hello_declares_the_write_task_capabilities_and_failpoints(start):
    hello = start().hello()
    assert hello["implementation"]["name"] == "reference" and hello["implementation"]["language"] == "python"
    assert {"write_task", "legacy", "diagnose", "tamper", "write_report", "multiprocess"} <= set(hello["capabilities"])
    assert {
        "write_task.after_reserve",
        "write_task.after_task_write",
        "write_task.after_task_created",
        "write_task.after_commit",
    } <= set(hello["failpoints"])


def test_hello_names_the_installed_release_without_importing_the_kit(start):
    """The version is a constant of the runtime (``importlib.metadata`` would cost a
    third of the start-up), held equal to the distribution's and the kit's."""
    from importlib import metadata

    from retryproof.conformance import __version__ as kit_version

    assert start().hello()["implementation"]["version"] == metadata.version("retryproof") == kit_version


def test_every_op_of_a_declared_capability_is_served(start):
    harness = start()
    declared = set(harness.hello()["capabilities"])
    ops = [name for name, op in load_spec()["protocol_spec"]["ops"].items() if op["capability"] in declared]
    assert "write_task" in ops
    for op in ops:
        response = harness.request(op)  # no args: refused, but by the op, not as unknown
        assert not isinstance(response, Failure) or response.code != "unknown_op", op


def test_hello_refuses_another_protocol(start):
    assert start().error("hello", protocol="retryproof-harness/0") == "invalid_request"


def test_garbage_and_unknown_ops_are_typed_errors_and_the_harness_keeps_serving(start):
    harness = start()
    harness.send_line(b"this is not json\n")
    assert isinstance(garbage := harness.wait(None), Failure) and garbage.code == "bad_message"
    harness.send_line(b'{"id": "seven", "op": "hello", "args": {}}\n')
    assert harness.wait(None).code == "bad_message"
    harness.send_line(b"\xff\xfe\n")
    assert harness.wait(None).code == "bad_message"
    assert harness.error("make_coffee") == "unknown_op"
    assert harness.error("list_tasks", verbose=True) == "invalid_request"
    assert harness.call("write_task", client_submission_id="after-garbage", task=TASK)["disposition"] == "created"
    assert harness.shutdown() == 0


INVALID_IDS = {
    "traversal": "../x",
    "separator": "a/b",
    "empty": "",
    "129 characters": "a" * 129,
    "NUL": "a\x00b",
    "non-ASCII": "caf\u00e9",
    "leading dot": ".hidden",
    "null": None,
    "number": 7,
}

INVALID_TASKS = {
    "unknown field": {"subject": "x", "title": "x"},
    "invocation field inside the task": {"subject": "x", "trace_id": "t-1"},
    "scalar of another type": {"subject": 7},
    "array of another type": {"references": "INC-1"},
    "array item of another type": {"references": ["INC-1", None]},
    "lone surrogate": {"subject": "\ud800"},
    "not an object": ["subject", "x"],
}


def test_invalid_ids_and_tasks_are_typed_errors_that_write_nothing(start, state_dir):
    harness = start()
    harness.call("write_task", client_submission_id="existing", task=TASK)
    before = snapshot(state_dir)
    for name, bad_id in INVALID_IDS.items():
        assert harness.error("write_task", client_submission_id=bad_id, task=TASK) == "invalid_submission_id", name
        assert harness.error("diagnose", client_submission_id=bad_id, stale_after_s=1) == "invalid_submission_id", name
    for name, bad_task in INVALID_TASKS.items():
        assert harness.error("write_task", client_submission_id="fresh", task=bad_task) == "invalid_request", name
        assert harness.error("write_task", task=bad_task) == "invalid_request", f"legacy, {name}"
        assert harness.error("write_task", client_submission_id="existing", task=bad_task) == "invalid_request", (
            f"existing id, {name}"
        )
    assert harness.error("write_task", client_submission_id="fresh") == "invalid_request"
    assert harness.error("write_task", client_submission_id="fresh", task=TASK, invocation="t-1") == "invalid_request"
    assert harness.error("write_task", client_submission_id="fresh", task=TASK, retry=1) == "invalid_request"
    assert snapshot(state_dir) == before
    assert [task["client_submission_id"] for task in harness.call("list_tasks")["tasks"]] == ["existing"]


def test_a_holder_past_the_bounded_wait_is_in_progress_then_the_id_is_served(start, state_dir):
    harness = start(None, "--wait-timeout", "0.3")
    harness.hello()  # the runtime has made its directories
    fd = os.open(state_dir / "receipt-locks" / "held.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert harness.error("write_task", client_submission_id="held", task=TASK) == "in_progress"
        assert harness.call("list_tasks")["tasks"] == []
    finally:
        os.close(fd)
    assert harness.call("write_task", client_submission_id="held", task=TASK)["disposition"] == "created"


def _run_main(state_dir, *options: str, failpoints: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RETRYPROOF_STATE_DIR": str(state_dir)}
    env.pop("RETRYPROOF_FAILPOINTS", None)
    if failpoints is not None:
        env["RETRYPROOF_FAILPOINTS"] = failpoints
    return subprocess.run(
        [sys.executable, "-m", "retryproof.reference_impl", *options],
        input="",
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )


@pytest.mark.parametrize(
    ("options", "failpoints", "message"),
    [
        ((), "write_task.after_reserve=explode", "RETRYPROOF_FAILPOINTS"),
        ((), "approval.no_such_point=crash", "failpoints this harness lacks"),
        (("--fault", "no-such-fault"), None, "fault"),
    ],
    ids=["bad action", "unknown failpoint", "unknown fault"],
)
def test_startup_errors_are_one_line_and_exit_2(state_dir, options, failpoints, message):
    done = _run_main(state_dir, *options, failpoints=failpoints)
    assert done.returncode == 2
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and message in done.stderr


def test_a_missing_state_directory_is_one_line_and_exit_2(tmp_path):
    done = _run_main(tmp_path / "nowhere")
    assert (done.returncode, len(done.stderr.splitlines())) == (2, 1)
    assert "RETRYPROOF_STATE_DIR" in done.stderr
    assert not (tmp_path / "nowhere").exists()


def test_a_bundled_fault_is_served_under_its_own_name(start):
    from retryproof.reference_impl.faulty import VARIANTS

    name = next(iter(VARIANTS))
    assert start(None, "--fault", name).hello()["implementation"]["name"] == f"reference-fault-{name}"
