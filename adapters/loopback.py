"""Servers on the loopback interface: a free port to hand one, and the wait until it
accepts. A binding's server and a bundled implementation's service start this way."""

from __future__ import annotations

import socket
import subprocess
import time


def free_port() -> int:
    """A loopback port nothing listens on now (the server binds it right after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


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
            time.sleep(0.05)
