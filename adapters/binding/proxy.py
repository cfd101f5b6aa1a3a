"""A loopback TCP proxy between the kit's caller and a server over HTTP, so the kit can
lose an answer the way a network does (``retryproof.adapters.loss``).

The caller connects to the proxy, the proxy to the server, and bytes pass both ways
unchanged, except on the one connection whose request carries the armed marker (the
call's idempotency key): there the server's answer is held by the proxy, never passed
on. ``Interception.close`` then closes both sides, the caller's and the server's:
right after the answer is complete (withheld), or at any moment the kit chooses while
the call runs (cut). The server sees what it would see if its caller's network went
away; the caller sees its connection close without an answer.

Only HTTP/1.1 framing is read, to know when an answer is complete: a
``Content-Length`` body, a chunked body's last chunk (an event stream of MCP
streamable HTTP included), or the server closing its side.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

#: How much of a request the proxy looks through for the marker (a request's head
#: and a tool call's arguments are far shorter).
MARKER_WINDOW = 64 << 10
#: Bound of the proxy's own connect to the server.
CONNECT_TIMEOUT_S = 5.0


class Interception:
    """The call the proxy holds: when its request reached the server, when its answer
    was complete, and the closing of both sides."""

    def __init__(self, marker: bytes):
        self.marker = marker
        self.request_seen = threading.Event()
        self.answered = threading.Event()
        self.answer_bytes = 0
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._seen_at: float | None = None
        self._closed_at: float | None = None

    def _attach(self, client: socket.socket, upstream: socket.socket) -> None:
        with self._lock:
            self._sockets = [client, upstream]

    def _forwarded(self) -> None:
        """The request has gone on to the server: only now may a cut "after the request
        reached the server" come (a cut between hold and send would cut a request the
        server never saw, and its retry would pass without testing the loss)."""
        with self._lock:
            self._seen_at = time.monotonic()
        self.request_seen.set()

    def close(self) -> None:
        """Close the caller's and the server's connection at once (idempotent)."""
        with self._lock:
            if self._closed_at is None:
                self._closed_at = time.monotonic()
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            _close(sock)

    @property
    def closed(self) -> bool:
        """Whether the kit closed the call (a server's end of file after that is no answer)."""
        return self._closed_at is not None

    def describe(self) -> str:
        """What happened to the call, for the evidence."""
        if self._seen_at is None:
            return "the call never reached the proxy"
        held = f"{self.answer_bytes} bytes of answer held back" if self.answer_bytes else "no answer yet"
        closed = (
            ""
            if self._closed_at is None
            else f"; both sides closed {self._closed_at - self._seen_at:.3f}s after the request"
        )
        complete = "the answer was complete" if self.answered.is_set() else held
        return f"{complete}{closed}"


class Proxy:
    """A relay on a free loopback port to ``upstream_port``; a context manager that
    closes the listener and every relayed connection."""

    def __init__(self, upstream_port: int):
        self.upstream_port = upstream_port
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self._listener.settimeout(0.1)
        self.port = int(self._listener.getsockname()[1])
        self._armed: list[Interception] = []
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._threads: list[threading.Thread] = []
        self._spawn(self._accept)

    def __enter__(self) -> Proxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def url(self, base_url: str) -> str:
        """``base_url`` with the proxy's port instead of the server's."""
        parts = urlsplit(base_url)
        return urlunsplit(parts._replace(netloc=f"127.0.0.1:{self.port}"))

    def arm(self, marker: bytes) -> Interception:
        """Hold the answer of the next connection whose request carries ``marker``."""
        interception = Interception(marker)
        with self._lock:
            self._armed.append(interception)
        return interception

    def close(self) -> None:
        self._closed.set()
        _close(self._listener)
        with self._lock:
            sockets, self._open = self._open, []
            armed = list(self._armed)
        for sock in sockets:
            _close(sock)
        for interception in armed:
            interception.close()
        for thread in self._threads:
            thread.join(CONNECT_TIMEOUT_S)

    def _spawn(self, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True, name="binding-proxy")
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=CONNECT_TIMEOUT_S)
            except OSError:
                _close(client)
                continue
            upstream.settimeout(None)
            with self._lock:
                self._open += [client, upstream]
            relay = _Relay(self, client, upstream)
            self._spawn(relay.requests)
            self._spawn(relay.answers)

    def _claim(self, head: bytes) -> Interception | None:
        with self._lock:
            for interception in self._armed:
                if interception.marker in head:
                    self._armed.remove(interception)
                    return interception
        return None


class _Relay:
    """One relayed connection: requests up, answers down (or held)."""

    def __init__(self, proxy: Proxy, client: socket.socket, upstream: socket.socket):
        self.proxy = proxy
        self.client = client
        self.upstream = upstream
        self.held: Interception | None = None
        self._head = b""

    def requests(self) -> None:
        while True:
            data = _recv(self.client)
            if not data:
                _shut(self.upstream)
                return
            if self.held is None and len(self._head) < MARKER_WINDOW:
                self._head += data
                claimed = self.proxy._claim(self._head)
                if claimed is not None:
                    # Held before the request goes on: the server may answer before this
                    # thread runs again (a loaded machine), and an answer that found no
                    # hold passed through to the caller, so the loss never happened.
                    self.held = claimed
                    claimed._attach(self.client, self.upstream)
                    sent = _send(self.upstream, data)
                    claimed._forwarded()
                    if not sent:
                        return
                    continue
            if not _send(self.upstream, data):
                return

    def answers(self) -> None:
        ending = _AnswerEnd()
        while True:
            data = _recv(self.upstream)
            held = self.held
            if held is not None:
                held.answer_bytes += len(data)
                if (not data and not held.closed) or ending.feed(data):
                    held.answered.set()
                if not data or held.answered.is_set():
                    return
                continue
            if not data:
                _shut(self.client)
                return
            if not _send(self.client, data):
                return


class _AnswerEnd:
    """When an HTTP/1.1 answer is complete, from its bytes so far."""

    def __init__(self) -> None:
        self._data = b""

    def feed(self, data: bytes) -> bool:
        self._data += data
        end = self._data.find(b"\r\n\r\n")
        if end < 0:
            return False
        head = self._data[:end].decode("latin-1").lower().split("\r\n")
        body = self._data[end + 4 :]
        if head and head[0].split(" ")[1:2] == ["100"]:  # an interim answer: the real one follows
            self._data = body
            return self.feed(b"")
        fields = dict(line.split(":", 1) for line in head[1:] if ":" in line)
        if "content-length" in fields:
            try:
                return len(body) >= int(fields["content-length"].strip())
            except ValueError:
                return False
        if "chunked" in fields.get("transfer-encoding", ""):
            return body.startswith(b"0\r\n\r\n") or b"\r\n0\r\n\r\n" in body
        return False


def _recv(sock: socket.socket) -> bytes:
    try:
        return sock.recv(65536)
    except OSError:
        return b""


def _send(sock: socket.socket, data: bytes) -> bool:
    try:
        sock.sendall(data)
        return True
    except OSError:
        return False


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
