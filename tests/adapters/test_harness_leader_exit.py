"""The process the kit started is the harness: when it ends, the harness has ended,
whatever its children still hold. A shell wrapper's ``sleep 38 &`` (or node's spawn with
stdio 'inherit') keeps the harness's stdout open after the harness died; the calls in
flight used to wait out their whole timeout, then the scenario was lost to a "missed
deadline" instead of the crash that happened."""

import contextlib
import os
import shlex
import signal
import sys

import pytest
from kit import until

from retryproof.adapters.connection import Lost
from retryproof.adapters.process import ProcessConnection
from retryproof.adapters.procfs import running, stat_fields

ECHO = [sys.executable, "-S", os.path.join(os.path.dirname(__file__), "echo_harness.py")]
#: Far above what the harness's end takes to be noticed (a pipe grace of 1 s at most):
#: a reply that waited for it says "no response within", never the signal.
CALL_TIMEOUT_S = 15


@pytest.mark.parametrize("child", ["sleep 38", "setsid sleep 38"], ids=["in-its-group", "escaped"])
def test_a_harness_whose_child_holds_its_output_has_ended_when_it_dies(tmp_path, child):
    """The harness (an ``exec``ed echo harness: the started process itself) is SIGKILLed
    with a call in flight; its shell's background child holds stdout. The call is lost to
    the harness's death at once; a child in the group is ended with it, and one that
    escaped the group is named, never waited on."""
    pids = tmp_path / "pids"
    wrapper = f"{child} & echo $$ $! > {shlex.quote(str(pids))}; exec {shlex.join(ECHO)}"
    state = tmp_path / "state"
    state.mkdir()
    connection = ProcessConnection(["sh", "-c", wrapper], str(state), call_timeout=CALL_TIMEOUT_S)
    connection.start()
    leader, held = (int(pid) for pid in pids.read_text().split())
    try:
        if child.startswith("setsid"):
            assert until(lambda: (stat_fields(held) or ["", "", ""])[2] == str(held), 10, 0.01), "not out of the group"
        pending = connection.submit("echo", {"value": "never", "delay": 60})
        os.kill(leader, signal.SIGKILL)
        reply = connection.wait(pending)
        assert reply == Lost("the harness died of signal SIGKILL")
        assert not connection.alive
        if child.startswith("setsid"):
            assert running(held)
            connection.kill()
            assert [survivor["pid"] for survivor in connection.survivors()] == [held]
        else:
            # Its pipes close before it is a zombie: on a loaded machine /proc may show it
            # running a moment after the reader saw their end. Unkilled, it runs 38 s.
            assert until(lambda: not running(held), 10, 0.01), f"{held} outlived the harness's group"
    finally:
        connection.kill()
        with contextlib.suppress(ProcessLookupError):
            os.kill(held, signal.SIGKILL)
