"""Servers on the loopback interface: a free port to hand one, and the wait until it
accepts. A binding's server and a bundled implementation's service start this way."""

from __future__ import annotations

import socket
import subprocess
import threading
import time

# Ports this process has handed out. Between the probe's close and the server's bind
# the kernel may offer a port again; two scenarios of one ``--jobs`` run holding the
# same port would talk to each other's server, since a server that failed to bind
# looks, from the client, exactly like the one that did.
_handed_out: set[int] = set()
_handed_out_lock = threading.Lock()


def free_port() -> int:
    """A loopback port nothing listens on now and never before handed out by this
    process (the server binds it right after)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        with _handed_out_lock:
            if port not in _handed_out:
                _handed_out.add(port)
                return port


#: How often ``await_accepting`` asks: a refused loopback connection costs microseconds,
#: and a server seen up to this late makes every start (dozens a binding run) that late.
ACCEPT_POLL_S = 0.01


def await_accepting(popen: subprocess.Popen, port: int, deadline: float) -> str | None:
    """Wait until ``port`` accepts a connection, by the ``time.monotonic`` ``deadline``;
    None once it does, else why not (the process ended first, or time ran out)."""
    while True:
        status = popen.poll()
        if status is not None:
            return f"it exited with status {status} before accepting on port {port}"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return None
        except OSError:
            if time.monotonic() > deadline:
                return f"nothing accepted on port {port} in time"
            time.sleep(ACCEPT_POLL_S)
