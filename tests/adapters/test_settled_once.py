"""A call in flight may be ended by several threads at once: the harness's end (the
reader's ``_close``), its line left unwritten (the writer), its timeout (the caller).
Each used to look whether the call was done, then set its reply: two of them between
the look and the set raised ``InvalidStateError`` in a thread (``Exception in thread
harness-_write_stdin``, seen when SIGTERM met a run of 30000 pipelined calls). Here the
two race on purpose: the harness's end takes the call in flight and is held there until
the other has come as far."""

import os
import sys
import threading
import time

import pytest

from retryproof.adapters import process as process_module
from retryproof.adapters.connection import Lost
from retryproof.adapters.process import ProcessConnection

ECHO = [sys.executable, "-S", os.path.join(os.path.dirname(__file__), "echo_harness.py")]


@pytest.mark.parametrize("other", ["unwritten", "timed-out"])
def test_a_call_ended_by_two_threads_at_once_gets_one_reply_and_no_thread_fails(tmp_path, monkeypatch, other):
    # stop_timeout: the harness's end is judged without waiting for a harness still running.
    connection = ProcessConnection(ECHO, str(tmp_path), call_timeout=5, stop_timeout=0.1)
    connection.start()
    try:
        pending = connection.submit("echo", {"value": "slow", "delay": 30})
        process = connection._current
        failures = []
        monkeypatch.setattr(threading, "excepthook", lambda hook: failures.append(hook.exc_value))
        both_past_their_look = threading.Barrier(2, timeout=5)

        def held(reason, *rest):
            both_past_their_look.wait()
            return Lost(reason, *rest)

        monkeypatch.setattr(process_module, "Lost", held)
        if other == "unwritten":
            racer = threading.Thread(target=connection._unwritten, args=(process, pending))
        else:
            racer = threading.Thread(target=lambda: failures.extend(_raised(connection.wait, pending, 0.01)))
        closer = threading.Thread(target=connection._close, args=(process, None))
        closer.start()
        deadline = time.monotonic() + 10
        while both_past_their_look.n_waiting < 1:  # the harness's end has taken the call in flight
            assert time.monotonic() < deadline and closer.is_alive()
            time.sleep(0.005)
        racer.start()
        racer.join(10)
        closer.join(10)
        monkeypatch.undo()
        assert not racer.is_alive() and not closer.is_alive()
        assert failures == []
        assert isinstance(pending.result(0), Lost)
    finally:
        connection.kill()


def _raised(function, *args):
    try:
        function(*args)
    except Exception as exc:
        return [exc]
    return []
