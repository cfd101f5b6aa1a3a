"""The process adapter: pipelining, kill, restart, bounds on lines and stderr; the
Python host serving a vendor class in a real subprocess."""

import os
import shlex
import signal
import sys
import threading

import pytest

from retryproof.adapters.connection import HarnessStartError, Lost
from retryproof.adapters.process import ProcessConnection, anchored
from retryproof.adapters.python_host import host_command
from retryproof.spec.protocol import Failure, Success

HERE = os.path.dirname(__file__)
ECHO = [sys.executable, "-S", os.path.join(HERE, "echo_harness.py")]


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


def test_a_line_is_written_by_its_caller_and_what_the_pipe_leaves_by_the_writer_in_order(tmp_path, monkeypatch):
    """A call writes its own line when nothing is queued before it; a line longer than
    the pipe holds leaves its rest to the writer thread, and the call after it queues
    behind that rest instead of writing into the middle of it."""
    from retryproof.adapters.pipes import ChildPipes

    by_writer: list[int] = []
    original = ChildPipes.write_all

    def write_all(self, stream, data):
        by_writer.append(len(data))
        return original(self, stream, data)

    monkeypatch.setattr(ChildPipes, "write_all", write_all)
    connection = connect(tmp_path)
    connection.start()
    try:
        assert connection.call("echo", {"value": "small"}).result["value"] == "small"
        assert by_writer == []  # the hello and the call: each written by its caller
        big = "b" * (256 << 10)  # more than a pipe holds (64 KiB)
        first = connection.submit("echo", {"value": big})
        second = connection.submit("echo", {"value": "after"})
        assert connection.wait(first).result["value"] == big
        assert connection.wait(second).result["value"] == "after"
        assert len(by_writer) == 2 and by_writer[0] < len(big)  # the big line's rest, then the small line
    finally:
        connection.stop()


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


def test_a_missed_deadline_ends_the_conversation(tmp_path):
    """After one call got no answer in time nothing more is sent, and the harness is
    not started again: a silent harness costs one timeout, not one per call."""
    connection = connect(tmp_path)
    connection.start()
    try:
        assert connection.call("echo", {"delay": 30}, timeout=0.2) == Lost("no response within 0.2s")
        assert connection.missed_deadline == "echo: no response within 0.2s"
        later = connection.call("echo", {"value": 1})  # would answer at once, if it were sent
        assert later == Lost("not sent: the harness missed an earlier deadline (echo: no response within 0.2s)")
        connection.kill()
        with pytest.raises(HarnessStartError, match="missed an earlier deadline"):
            connection.start()
    finally:
        connection.kill()


def test_overlong_lines_and_garbage_never_hang(tmp_path):
    connection = connect(tmp_path, max_line_bytes=1000)
    connection.start()
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


def test_noise_ends_pipelined_calls_at_once_and_is_kept(tmp_path):
    """Answers to ids nobody asked for end the calls in flight with the noise as the
    reason, without waiting out the timeout (they used to wait it, reason-less)."""
    connection = connect(tmp_path)
    connection.start()
    try:
        batch = [connection.submit("noise", {"count": 3}) for _ in range(3)]
        replies = [connection.wait(future, 20) for future in batch]
    finally:
        connection.kill()
    assert all(isinstance(reply, Lost) and "not a call in flight" in reply.reason for reply in replies), replies
    assert connection.missed_deadline is None  # they ended on the noise, not on a deadline
    assert len(connection.protocol_noise()) >= 3 and "answer for id 1000000" in connection.protocol_noise()[0]


def test_stop_is_bounded_when_an_escaped_process_holds_the_pipes(tmp_path):
    """A setsid grandchild keeps the harness's stdout and stderr open after its group
    is killed: stop and kill still return, and name the survivor."""
    connection = connect(tmp_path)
    connection.start()
    pid = connection.call("escape", {"seconds": 60}).result["pid"]
    try:
        stopper = threading.Thread(target=connection.stop, daemon=True)
        stopper.start()
        stopper.join(30)
        assert not stopper.is_alive(), "stop waited on a process that outlived the harness"
        survivors = connection.survivors()
        assert [entry["pid"] for entry in survivors] == [pid]
        assert "echo_harness.py" in survivors[0]["command"]
        connection.start()  # the connection is still usable after such a stop
        assert connection.call("echo", {"value": 2}).result["value"] == 2
        killer = threading.Thread(target=connection.kill, daemon=True)
        killer.start()
        killer.join(30)
        assert not killer.is_alive()
    finally:
        os.kill(pid, signal.SIGKILL)


def test_relative_paths_of_the_command_line_keep_meaning_the_users_files(tmp_path):
    """The harness runs in a scratch directory, so the files the user named are
    resolved where the user named them; the program is still found on PATH."""
    (tmp_path / "harness.js").write_text("")
    (tmp_path / "node").mkdir()  # a folder that happens to share the program's name
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "harness").write_text("")
    assert anchored(["node", "harness.js", "--flag", "absent.js"], str(tmp_path)) == [
        "node",
        str(tmp_path / "harness.js"),
        "--flag",
        "absent.js",
    ]
    assert anchored(["bin/harness", "-v"], str(tmp_path)) == [str(tmp_path / "bin/harness"), "-v"]


def test_evidence_shows_the_command_as_given_not_as_resolved(tmp_path, monkeypatch):
    """Reports travel (committed samples, CI artefacts): the start line in the stderr
    evidence names the command as the user wrote it, with no path of this machine."""
    monkeypatch.chdir(HERE)
    connection = ProcessConnection([sys.executable, "echo_harness.py"], str(tmp_path), call_timeout=5, start_timeout=10)
    assert connection.command[1] == os.path.join(HERE, "echo_harness.py")
    try:
        connection.start()
    finally:
        connection.kill()
    assert f"[retryproof: start #1: {shlex.join([sys.executable, 'echo_harness.py'])}]" in connection.stderr_text()
    assert HERE not in connection.stderr_text()
