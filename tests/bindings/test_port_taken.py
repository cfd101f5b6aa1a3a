"""A port the kit hands a server may be taken by another program (another kit run, a
test worker) before the server binds it. What accepts then is that program, and a run
that talked to it judged a runtime the kit never started: a reference run over HTTP
once listed 51 tasks on its fresh state directory. The kit checks who listens, and
starts the server again on another port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from binding_helpers import shipped

from retryproof.adapters import loopback
from retryproof.adapters.binding import parse
from retryproof.adapters.binding.connection import BindingConnection
from retryproof.adapters.connection import HarnessStartError

LISTEN = (
    "import socket, sys, time; s = socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(); time.sleep(60)"
)


def _foreign_listener() -> socket.socket:
    """A socket listening on a loopback port, held by this test's process: another program."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    return taken


def test_a_server_listening_itself_is_accepted():
    port = loopback.free_port()
    server = subprocess.Popen([sys.executable, "-c", LISTEN, str(port)])
    try:
        assert loopback.await_accepting(server, port, time.monotonic() + 30) is None
    finally:
        server.kill()
        server.wait()


def test_a_server_listening_in_a_child_is_accepted():
    """Wrappers (``npm start``, a shell) leave the socket to a child of the started process."""
    port = loopback.free_port()
    child = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {LISTEN!r}, '{port}'])"
    server = subprocess.Popen([sys.executable, "-c", child], start_new_session=True)
    try:
        assert loopback.await_accepting(server, port, time.monotonic() + 30) is None
    finally:
        subprocess.run(["pkill", "-KILL", "-g", str(server.pid)], check=False)
        server.wait()


def test_a_port_another_program_listens_on_is_named():
    taken = _foreign_listener()
    port = taken.getsockname()[1]
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with pytest.raises(loopback.PortTaken, match=f"port {port} accepted, but another program listens on it"):
            loopback.await_accepting(idle, port, time.monotonic() + 30)
    finally:
        idle.kill()
        idle.wait()
        taken.close()


def _connection(tmp_path, monkeypatch, ports: list[int]) -> BindingConnection:
    """The reference over HTTP, handed ``ports`` first, then free ones."""
    handed, real = iter(ports), loopback.free_port
    monkeypatch.setattr(loopback, "free_port", lambda: next(handed, None) or real())
    state = tmp_path / "state"
    state.mkdir()
    return BindingConnection(parse(shipped("reference-http"), "reference-http.yaml"), str(state), start_timeout=60)


def test_a_binding_server_whose_port_was_taken_starts_again_on_another(tmp_path, monkeypatch):
    taken = _foreign_listener()
    port = taken.getsockname()[1]
    connection = _connection(tmp_path, monkeypatch, [port])
    try:
        connection.start()
        listed = connection.call("list_tasks", {})
        assert connection.port != port
        assert listed.result["tasks"] == [], listed
        assert f"port {port} accepted, but another program listens on it" in connection.stderr_text()
        assert len(connection.exit_statuses()) == 1, "the start on the taken port is not the runtime's"
    finally:
        connection.kill()
        taken.close()


def test_a_port_taken_every_time_is_a_start_error(tmp_path, monkeypatch):
    taken = _foreign_listener()
    port = taken.getsockname()[1]
    connection = _connection(tmp_path, monkeypatch, [port] * loopback.PORT_TRIES)
    try:
        with pytest.raises(HarnessStartError, match=f"taken by another program {loopback.PORT_TRIES} times"):
            connection.start()
        assert not connection.alive
    finally:
        connection.kill()
        taken.close()


def test_a_server_on_another_address_of_the_port_number_is_not_the_listener(tmp_path):
    """A server listening on [::1]:P alone is not what a connection to 127.0.0.1:P
    reaches: a program listening there is another program's."""
    if not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    taken = _foreign_listener()
    port = taken.getsockname()[1]
    v6 = "import socket, sys, time; s = socket.socket(socket.AF_INET6); s.bind(('::1', int(sys.argv[1]))); s.listen(); time.sleep(60)"
    server = subprocess.Popen([sys.executable, "-c", v6, str(port)])
    try:
        time.sleep(0.5)  # its [::1] listener is up (or it could not bind one: then it is not there at all)
        with pytest.raises(loopback.PortTaken):
            loopback.await_accepting(server, port, time.monotonic() + 30)
    finally:
        server.kill()
        server.wait()
        taken.close()


def test_a_server_that_daemonized_is_taken_for_the_one_started():
    """A server that daemonizes (forks twice into a session of its own, so init adopts
    it) while the started command keeps running still holds the socket the kit asked
    for: it is outside the started process's group and descendants, and not another
    program's."""
    port = loopback.free_port()
    daemon = (
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execv(sys.executable, [sys.executable, '-c', {LISTEN!r}, '{port}'])\n"
        "    os._exit(0)\n"
        "time.sleep(60)\n"
    )
    server = subprocess.Popen([sys.executable, "-c", daemon])
    try:
        assert loopback.await_accepting(server, port, time.monotonic() + 30) is None
    finally:
        listener = loopback._listening_sockets(port)
        for pid in loopback._processes():
            if loopback._holds(pid, listener):
                os.kill(pid, signal.SIGKILL)
        server.kill()
        server.wait()


def test_a_start_is_tried_on_port_tries_ports_and_a_chosen_port_alone():
    tried: list[int] = []
    ended: list[int] = []

    def start(port: int) -> None:
        tried.append(port)
        raise loopback.PortTaken(port, "pid 1, another")

    with pytest.raises(loopback.PortTaken):
        loopback.start_on_free_port(start, lambda taken: ended.append(taken.port))
    assert len(set(tried)) == loopback.PORT_TRIES and ended == tried  # each on another port, each ended
    tried.clear()
    ended.clear()
    with pytest.raises(loopback.PortTaken):
        loopback.start_on_free_port(start, lambda taken: ended.append(taken.port), port=4242)
    assert tried == ended == [4242]
    assert loopback.start_on_free_port(lambda port: port, lambda taken: None, port=4243) == 4243
