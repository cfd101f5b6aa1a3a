"""Servers on the loopback interface: a free port to hand one, and the wait until it
accepts. A binding's server and a bundled implementation's service start this way."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from retryproof.adapters.procfs import stat_fields, visible_pids

Started = TypeVar("Started")

# Ports this process has handed out. Between the probe's close and the server's bind
# the kernel may offer a port again; two scenarios of one ``--jobs`` run holding the
# same port would talk to each other's server, since a server that failed to bind
# looks, from the client, exactly like the one that did. Another process (another kit
# run, a test worker) may take the port all the same: ``await_accepting`` checks who
# listens (``PortTaken``).
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


#: How many ports a server is started on before its start fails because another program
#: kept taking the port (``start_on_free_port``). Each taking is a race lost in the
#: moment between ``free_port``'s probe and the server's bind, so a start rarely meets
#: one and almost never three in a row; a start again costs one start, a failed one a
#: scenario (a binding's server) or a whole harness (a library's service). One count for
#: every server the kit or a bundled harness starts.
PORT_TRIES = 3


def start_on_free_port(
    start: Callable[[int], Started], taken: Callable[[PortTaken], None], port: int | None = None
) -> Started:
    """``start(port)`` on a port ``free_port`` hands out. When it raises ``PortTaken``,
    ``taken`` ends what it started and it starts again on another port, up to
    ``PORT_TRIES`` ports; the last ``PortTaken`` is raised. A ``port`` the caller chose
    is tried alone: another would not be the one asked for."""
    tries = 0
    while True:
        tries += 1
        try:
            return start(free_port() if port is None else port)
        except PortTaken as exc:
            taken(exc)
            if port is not None or tries >= PORT_TRIES:
                raise


#: How often ``await_accepting`` asks: a refused loopback connection costs microseconds,
#: and a server seen up to this late makes every start (dozens a binding run) that late.
ACCEPT_POLL_S = 0.01


class PortTaken(Exception):
    """The port handed to a server accepts, but another program listens on it: it bound
    the port between ``free_port``'s probe and the server's own bind. Start again on
    another port; talking to that program would judge a runtime the kit never started
    (a reference run over HTTP once listed 51 tasks on its fresh state directory)."""

    def __init__(self, port: int, holder: str):
        super().__init__(
            f"port {port} accepted, but another program listens on it ({holder}), not the server the kit started"
        )
        self.port = port


def await_accepting(popen: subprocess.Popen, port: int, deadline: float) -> str | None:
    """Wait until ``port`` accepts a connection, by the ``time.monotonic`` ``deadline``;
    None once it does, else why not (the process ended first, or time ran out). Raises
    ``PortTaken`` when what accepts is provably another program's socket."""
    while True:
        status = popen.poll()
        if status is not None:
            return f"it exited with status {status} before accepting on port {port}"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        except OSError:
            if time.monotonic() > deadline:
                return f"nothing accepted on port {port} in time"
            time.sleep(ACCEPT_POLL_S)
            continue
        holder = _another_holder(popen.pid, port)
        if holder:
            raise PortTaken(port, holder)
        return None


def _another_holder(pid: int, port: int) -> str | None:
    """Who holds the socket that accepts on ``127.0.0.1:port`` when it is provably not
    ``pid`` nor its family (its process group, its descendants): a visible process
    outside them whose parent is alive and not init, as another kit run's server is.
    A server that daemonized (its parent is init) is taken to be the one started, and
    so is a listener whose holder cannot be seen (another user's, or no ``/proc``)."""
    listening = _listening_sockets(port)
    if not listening or _holds(pid, listening):  # the common case: the started process listens
        return None
    processes = _processes()
    family = {pid}
    while True:  # its process group, and its descendants in any group
        grown = family | {p for p, (parent, group) in processes.items() if group == pid or parent in family}
        if grown == family:
            break
        family = grown
    if any(_holds(member, listening) for member in family):
        return None
    for other, (parent, _) in processes.items():
        if other not in family and parent > 1 and parent in processes and _holds(other, listening):
            return f"pid {other}, {_name(other)}"
    return None


#: Local addresses a connection to 127.0.0.1 reaches: 127.0.0.1 and 0.0.0.0; :: (unless
#: the socket is IPv6-only, which sock_diag does not say) and ::ffff:127.0.0.1.
_REACHED = {
    (socket.AF_INET, bytes((127, 0, 0, 1))),
    (socket.AF_INET, bytes(4)),
    (socket.AF_INET6, bytes(16)),
    (socket.AF_INET6, bytes(10) + b"\xff\xff" + bytes((127, 0, 0, 1))),
}
_SOCK_DIAG, _BY_FAMILY, _DUMP_REQUEST, _DONE, _ERROR, _LISTEN = 4, 20, 0x301, 3, 2, 10


def _listening_sockets(port: int) -> set[str]:
    """The inodes of the TCP sockets in LISTEN state that a connection to
    ``127.0.0.1:port`` reaches (a server's ``[::1]`` listener on the same number does
    not). Asked of the kernel's sock_diag for listeners alone: ``/proc/net/tcp`` lists
    every socket, and with a suite's thousands in TIME_WAIT reading it took 14 ms a
    start. Empty when netlink is refused (the listener is then trusted)."""
    inodes: set[str] = set()
    for family in (socket.AF_INET, socket.AF_INET6):
        # inet_diag_req_v2: family, protocol, ext, pad, states; an empty socket id.
        request = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, 1 << _LISTEN) + bytes(48)
        try:
            with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, _SOCK_DIAG) as netlink:
                netlink.settimeout(1.0)
                netlink.sendto(
                    struct.pack("=IHHII", 16 + len(request), _BY_FAMILY, _DUMP_REQUEST, 1, 0) + request, (0, 0)
                )
                while (answer := netlink.recv(1 << 16)) and _sockets(answer, port, inodes):
                    pass
        except (OSError, struct.error):
            return set()
    return inodes


def _sockets(answer: bytes, port: int, inodes: set[str]) -> bool:
    """Add the reachable listeners on ``port`` of one netlink answer (inet_diag_msg:
    family, state, ..., the socket id from byte 4, the inode at 68); False once the
    dump is done."""
    offset = 0
    while offset < len(answer):
        length, kind = struct.unpack_from("=IH", answer, offset)
        if kind == _ERROR:
            raise OSError("sock_diag refused the dump")
        if kind == _DONE:
            return False
        body = offset + 16
        family, (sport,) = answer[body], struct.unpack_from(">H", answer, body + 4)
        address = answer[body + 8 : body + 8 + (4 if family == socket.AF_INET else 16)]
        if sport == port and (family, address) in _REACHED:
            inodes.add(str(struct.unpack_from("=I", answer, body + 68)[0]))
        offset += (length + 3) & ~3
    return True


def _processes() -> dict[int, tuple[int, int]]:
    """Every visible process: pid -> (parent pid, process group)."""
    found = {}
    for pid in visible_pids():
        fields = stat_fields(pid)
        try:
            if fields is not None:
                found[pid] = (int(fields[1]), int(fields[2]))
        except (ValueError, IndexError):
            continue
    return found


def _name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as comm:
            return comm.read().strip()
    except OSError:
        return "ended"


def _holds(pid: int, inodes: set[str]) -> bool:
    try:
        descriptors = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for descriptor in descriptors:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{descriptor}")
        except OSError:
            continue
        if link.startswith("socket:[") and link[8:-1] in inodes:
            return True
    return False
