"""How a harness that cannot start is described, and the Python host's one rule it
enforces for every runtime: an explicit null client_submission_id is
invalid_submission_id, never the legacy path."""

import os

import pytest

from retryproof.adapters.connection import HarnessStartError
from retryproof.adapters.process import ProcessConnection
from retryproof.adapters.python_host import host_command
from retryproof.spec.protocol import Failure

HERE = os.path.dirname(__file__)


def test_a_harness_that_exits_before_hello_is_described_by_its_exit_status(tmp_path):
    connection = ProcessConnection(["sh", "-c", "exit 3"], str(tmp_path), start_timeout=10)
    with pytest.raises(HarnessStartError) as caught:
        connection.start()
    assert "exited with status 3 before answering hello" in caught.value.message


def test_the_host_answers_an_explicit_null_id_itself(tmp_path, monkeypatch):
    # hosted_runtime.Counter follows the documented signature, client_submission_id=None,
    # so it alone cannot tell null from absent.
    monkeypatch.chdir(HERE)
    connection = ProcessConnection(host_command("hosted_runtime:make"), str(tmp_path), call_timeout=5)
    connection.start()
    try:
        reply = connection.call("write_task", {"client_submission_id": None, "task": {}})
        assert isinstance(reply, Failure) and reply.code == "invalid_submission_id"
        assert "null" in reply.message and "None" not in reply.message
        assert connection.call("list_tasks").result["tasks"] == []  # nothing was written
        assert connection.call("write_task", {"task": {}}).result == {"task_id": "T1"}  # absent: the legacy path
    finally:
        connection.kill()


def test_the_host_refuses_a_failpoint_the_runtime_does_not_list(tmp_path, monkeypatch):
    # hosted_runtime.Counter lists only write_task.after_commit
    monkeypatch.chdir(HERE)
    connection = ProcessConnection(host_command("hosted_runtime:make"), str(tmp_path), start_timeout=10)
    with pytest.raises(HarnessStartError) as caught:
        connection.start(failpoints={"write_task.after_reserve": "crash"})
    assert "exited with status 2 before answering hello" in caught.value.message
    assert "write_task.after_reserve, which this runtime does not list" in caught.value.stderr
    connection.start(failpoints={"write_task.after_commit": "fail"})  # a listed one starts
    connection.kill()


def test_the_host_declares_the_tamper_actions_a_runtime_names(tmp_path, monkeypatch):
    monkeypatch.chdir(HERE)
    connection = ProcessConnection(host_command("hosted_runtime:make_removes_only"), str(tmp_path), call_timeout=5)
    try:
        assert connection.start()["tamper_actions"] == ["remove_task"]
    finally:
        connection.kill()
    plain = ProcessConnection(host_command("hosted_runtime:make"), str(tmp_path), call_timeout=5)
    try:
        assert "tamper_actions" not in plain.start()  # no list: the tamper capability means every action
    finally:
        plain.kill()
