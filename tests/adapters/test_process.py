"""The process adapter: pipelining, kill, restart, bounds on lines and stderr; the
Python host serving a vendor class in a real subprocess."""

import os
import sys

from retryproof.adapters.connection import Lost
from retryproof.adapters.process import ProcessConnection
from retryproof.adapters.python_host import host_command
from retryproof.spec.protocol import Failure, Success

HERE = os.path.dirname(__file__)
ECHO = [sys.executable, os.path.join(HERE, "echo_harness.py")]


def connect(tmp_path, command=ECHO, **options):
    return ProcessConnection(command, str(tmp_path), call_timeout=5, start_timeout=10, **options)


def test_pipelined_calls_are_matched_by_id_whatever_the_order(tmp_path):
    connection = connect(tmp_path)
    connection.start()
    try:
        slow = connection.submit("echo", {"value": "slow", "delay": 0.3})
        fast = connection.submit("echo", {"value": "fast"})
        assert connection.wait(fast).result["value"] == "fast"
        assert not slow.done()  # answered out of order, matched by id
        assert connection.wait(slow).result["value"] == "slow"
    finally:
        connection.stop()
    assert connection.exit_statuses() == [0]


def test_kill_turns_calls_in_flight_into_lost_and_restart_keeps_the_state_dir(tmp_path):
    connection = connect(tmp_path)
    connection.start(failpoints={"write_task.after_commit": "crash"})
    pending = connection.submit("echo", {"delay": 30})
    connection.kill()
    reply = connection.wait(pending)
    # the kill ended the call, not a timeout (the echo would answer after 30 s)
    assert isinstance(reply, Lost) and "killed" in reply.reason
    assert isinstance(connection.call("echo"), Lost)  # nothing is running
    connection.restart()
    answer = connection.call("echo", {"value": 1})
    assert answer.result["state_dir"] == str(tmp_path) and answer.result["failpoints"] is None
    connection.kill()
    assert connection.exit_statuses() == [-9, -9]


def test_timeouts_overlong_lines_and_garbage_never_hang(tmp_path):
    connection = connect(tmp_path, max_line_bytes=1000)
    connection.start()
    assert connection.call("echo", {"delay": 2}, timeout=0.2) == Lost("no response within 0.2s")
    garbage = connection.send_line(b"not json")
    assert isinstance(garbage, Failure) and garbage.code == "bad_message" and garbage.id is None
    reply = connection.call("shout", {"size": 5000})
    assert isinstance(reply, Lost) and "longer than 1000 bytes" in reply.reason
    assert not connection.alive
    connection.kill()


def test_stderr_is_captured_and_bounded(tmp_path):
    connection = connect(tmp_path, stderr_limit=2000)
    connection.start()
    for _ in range(5):
        assert isinstance(connection.call("stderr", {"size": 1000}), Success)
    connection.stop()
    text = connection.stderr_text()
    assert "earlier bytes dropped" in text and len(text) < 2200


def test_python_host_serves_a_vendor_class_with_real_kill_and_restart(tmp_path, monkeypatch):
    monkeypatch.chdir(HERE)  # the vendor module is found from the working directory
    connection = connect(tmp_path, command=host_command("hosted_runtime:make"))
    hello = connection.start()
    assert hello["implementation"]["name"] == "counter" and hello["failpoints"] == ["write_task.after_commit"]
    assert connection.call("write_task", {"task": {}}).result == {"task_id": "T1"}
    bad = connection.call("write_task", {"nope": 1})
    assert isinstance(bad, Failure) and bad.code == "invalid_request"
    connection.restart(failpoints={"write_task.after_commit": "crash"})
    assert isinstance(connection.call("write_task", {"task": {}}), Lost)  # the failpoint SIGKILLed it
    connection.restart()
    assert [t["task_id"] for t in connection.call("list_tasks").result["tasks"]] == ["T1", "T2"]
    connection.stop()
