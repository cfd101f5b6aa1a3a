"""A binding's server started under a wrapper (strace, for CRASH-POINTS): the wait for
its ready ends as soon as the server itself has ended, though the wrapper lives on,
and a slow but live server is still waited for. strace 6.1 now and then loses a start
and lives on: the wait then took its whole bound (60 s under CRASH-POINTS)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
from kit import failed_start

from retryproof.adapters import process_groups
from retryproof.adapters.binding import connection as connection_module
from retryproof.adapters.binding.connection import BindingConnection
from retryproof.adapters.connection import HarnessStartError
from retryproof.adapters.process_groups import listed_children
from retryproof.conformance.options import load_binding
from retryproof.conformance.strace import tracing_options
from retryproof.spec.protocol import Success

BINDINGS = Path(__file__).parents[2] / "adapters" / "bindings"
#: The fake wrapper, without site: it needs only the standard library (binding_helpers.STDLIB).
LIVES_ON = (sys.executable, "-S", str(Path(__file__).with_name("lives_on.py")))
#: The start bound these tests give: what a lost start cost before.
START_TIMEOUT_S = 60.0
#: The longest a lost start may take to notice here (a loaded machine included).
NOTICED_WITHIN_S = 3.0
#: Every transport: HTTP, MCP over stdio, MCP over streamable HTTP.
TRANSPORTS = ["reference-http.yaml", "reference-mcp.yaml", "reference-mcp-http.yaml"]


def _binding(tmp_path: Path, name: str, command: str | None = None):
    """The reference's binding ``name``, its server command replaced by ``command``."""
    text = (BINDINGS / name).read_text()
    if command is not None:
        start = next(line for line in text.splitlines() if line.strip().startswith("command:"))
        text = text.replace(start, f"  command: {command}")
    path = tmp_path / name
    path.write_text(text)
    return load_binding(str(path))


def _connection(tmp_path: Path, binding, wrap: tuple[str, ...]) -> BindingConnection:
    state = tmp_path / "state"
    state.mkdir()
    return BindingConnection(binding, str(state), start_timeout=START_TIMEOUT_S, wrap=wrap)


@pytest.mark.parametrize("name", TRANSPORTS)
def test_a_server_that_exits_at_start_under_a_wrapper_that_lives_on_ends_the_wait(tmp_path, name):
    binding = _binding(tmp_path, name, '["{python}", -c, "import sys; sys.exit(3)"]')
    connection = _connection(tmp_path, binding, LIVES_ON)
    failed, took = failed_start(connection)
    assert took < NOTICED_WITHIN_S, f"noticed after {took:.2f}s"
    assert "the command python" in failed.message and "ended while python lived on" in failed.message
    # What the wrapper said is kept, as strace's own words are for CRASH-POINTS' evidence.
    assert "delayed wait data set already" in (failed.stderr or "")
    assert connection.exit_statuses() == [-signal.SIGKILL]  # the wrapper's group was ended


@pytest.mark.parametrize("name", TRANSPORTS)
def test_a_server_killed_during_its_start_under_a_wrapper_that_lives_on_ends_the_wait(tmp_path, name):
    """The server never gets ready (it sleeps); the test SIGKILLs it, the wrapper's
    child, once it runs: the wait ends within moments of the kill, not at its bound."""
    binding = _binding(tmp_path, name, '["{python}", -c, "import time; time.sleep(120)"]')
    connection = _connection(tmp_path, binding, LIVES_ON)
    killed_at: list[float] = []

    def kill_the_server() -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            wrapper = connection._current  # the wrapper the kit started, once it has
            children = listed_children(wrapper.popen.pid) if wrapper else None  # the sleeping server
            if children:
                time.sleep(0.3)  # well into its start
                os.kill(children[0], signal.SIGKILL)
                killed_at.append(time.monotonic())
                return
            time.sleep(0.01)

    killer = threading.Thread(target=kill_the_server)
    killer.start()
    try:
        with pytest.raises(HarnessStartError) as failed:
            connection.start()
        ended_at = time.monotonic()
    finally:
        killer.join(15)
        connection.kill()
    assert killed_at, "the server was never seen running"
    noticed = ended_at - killed_at[0]
    assert noticed < NOTICED_WITHIN_S, f"noticed {noticed:.2f}s after the kill"
    assert "ended while python lived on" in failed.value.message


def test_a_wrapper_that_never_runs_its_command_ends_the_wait_after_a_grace(tmp_path, monkeypatch):
    """No child ever seen: the command ended before the first look, or never ran."""
    monkeypatch.setattr(process_groups, "WRAPPED_CHILDLESS_S", 0.5)
    binding = _binding(tmp_path, "reference-http.yaml")
    never_runs = (sys.executable, "-c", "import time; time.sleep(120)")  # ignores the command after it
    connection = _connection(tmp_path, binding, never_runs)
    failed, took = failed_start(connection)
    assert took < NOTICED_WITHIN_S
    assert "was not seen running within 0.5s" in failed.message


#: How long the slow server sleeps before it starts: twice the watch's grace
#: (``WRAPPED_GRACE_S``), after which a watch that took it for lost would have killed it.
SLOW_S = 1.0
SLOW_START = f"[\"{{python}}\", -c, \"import os, sys, time; time.sleep({SLOW_S}); os.execv(sys.executable, [sys.executable, '-m', 'retryproof.reference_impl', '--http'])\"]"


@pytest.mark.parametrize("wrapper", ["lives_on", "strace"])
def test_a_slow_but_live_server_under_a_wrapper_is_still_waited_for(tmp_path, request, wrapper):
    """A server that takes ``SLOW_S`` before it even starts serving, under the fake wrapper
    and under strace itself: the watch never mistakes it for a lost one."""
    if wrapper == "strace":
        strace = request.getfixturevalue("strace")
        wrap: tuple[str, ...] = (strace, *tracing_options(strace), "-o", str(tmp_path / "trace"), "--")
    else:
        wrap = LIVES_ON
    connection = _connection(tmp_path, _binding(tmp_path, "reference-http.yaml", SLOW_START), wrap)
    began = time.monotonic()
    try:
        connection.start()
        assert time.monotonic() - began >= SLOW_S
        assert connection.alive
        reply = connection.call("list_tasks", {})
    finally:
        connection.kill()
    assert isinstance(reply, Success) and reply.result["tasks"] == [], reply


def test_a_server_that_exits_at_start_under_strace_is_its_own_exit_not_a_lost_start(tmp_path, strace):
    """strace that works ends with its command, with the command's status: the start
    fails as the server's exit says, not as a start strace lost."""
    binding = _binding(tmp_path, "reference-http.yaml", '["{python}", -c, "import sys; sys.exit(3)"]')
    wrap = (strace, *tracing_options(strace), "-o", str(tmp_path / "trace"), "--")
    connection = _connection(tmp_path, binding, wrap)
    failed, _ = failed_start(connection)
    assert "exited with status 3" in failed.message


#: A launcher that forks the server and ends at once, as a daemonizing one does: the
#: server (in the launcher's group, or a session of its own) takes 1 s before it serves.
FORKS_THE_SERVER = (
    '["{python}", -c, "import os, sys, time\\nif os.fork(): os._exit(0)\\n%s'
    "time.sleep(1.0); os.execv(sys.executable, [sys.executable, '-m', 'retryproof.reference_impl', '--http'])\"]"
)


@pytest.mark.parametrize("session", ["", "os.setsid()\\n"], ids=["its-group", "own-session"])
def test_a_server_a_launcher_forked_under_strace_is_waited_for_not_lost(tmp_path, strace, session):
    """strace -f lives on after the launcher, its child, ends: it traces the server. The
    server runs, so the start is no lost one, though it is ready only after the grace
    (it was SIGKILLed 0.5 s after the launcher ended)."""
    wrap = (strace, *tracing_options(strace), "-o", str(tmp_path / "trace"), "--")
    binding = _binding(tmp_path, "reference-http.yaml", FORKS_THE_SERVER % session)
    connection = _connection(tmp_path, binding, wrap)
    try:
        connection.start()
        reply = connection.call("list_tasks", {})
    finally:
        connection.kill()
        # In a session of its own the server escaped the group the kit ends: it is named
        # as a survivor (it holds the pipes), and the test ends it.
        for pid in {entry["pid"] for entry in connection.survivors()}:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert isinstance(reply, Success) and reply.result["tasks"] == [], reply


def test_a_start_the_watch_gave_up_as_the_server_got_ready_fails(tmp_path, monkeypatch):
    """The watch killed the wrapper's group just as the wait saw the server ready: the
    start fails as lost, not as a success whose server is gone."""

    class GivesUpAtTheEnd(process_groups.WrappedCommand):
        def __exit__(self, *exc_info: object) -> None:
            super().__exit__(*exc_info)
            self.lost = "the command python runs ended while python lived on"
            process_groups.kill_group(self.popen)

    monkeypatch.setattr(connection_module, "WrappedCommand", GivesUpAtTheEnd)
    binding = _binding(tmp_path, "reference-http.yaml", '["{python}", -m, retryproof.reference_impl, --http]')
    connection = _connection(
        tmp_path, binding, (sys.executable, "-c", "import os, sys; os.execv(sys.argv[1], sys.argv[1:])")
    )
    failed, _ = failed_start(connection)
    assert "ended while python lived on" in failed.message
    assert not connection.alive
