"""MCP over stdio: JSON-RPC lines on the server's stdin and stdout, calls pipelined
by id. Lines that answer nothing (notifications) are ignored; a server's own request (a
ping) is answered empty, so the server never waits on the kit. Lines that are no
JSON-RPC message (a log line on stdout, where an MCP client reads only messages) are
counted, and a missed deadline or the server's end quotes the first."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING, Any

from retryproof.adapters.binding.transports.base import MAX_ANSWER_BYTES, Gone, Server, json_bytes, parse_json
from retryproof.adapters.binding.transports.mcp import Mcp, initialize_params, jsonrpc_request
from retryproof.adapters.pipes import LineTooLong

if TYPE_CHECKING:
    from retryproof.adapters.binding.transports.base import BoundPath


#: Answers under unknown ids named in a missed deadline's message.
MAX_STRAYS_KEPT = 3
#: Bytes of the first line that is no JSON-RPC message quoted in such a message.
GARBAGE_QUOTED_BYTES = 120


class McpStdio(Mcp):
    label = "mcp over stdio"
    listens = False
    # The SDK cancels the call and exits once its input closes.
    ends_when_left = True

    def __init__(self, binding: BoundPath, server: Server):
        super().__init__(binding, server)
        assert server.popen.stdin is not None and server.popen.stdout is not None  # both piped
        self._stdin, self._stdout = server.popen.stdin, server.popen.stdout
        self._ids = itertools.count(1)
        self._pending: dict[int, Future] = {}
        self._lock = threading.Lock()
        # Writes have their own lock: a server that stops reading blocks a writer,
        # never the reader thread that resolves answers.
        self._write_lock = threading.Lock()
        self._closed: str | None = None
        # Answers under ids the kit never asked for: kept (the first few) so that a
        # missed deadline says what came instead of only "no answer".
        self._strays: list[Any] = []
        self._stray_count = 0
        self._garbage_first: bytes | None = None
        self._garbage_count = 0

    def ready(self, bound_s: float) -> None:
        self.server.pipes.spawn(self._read, name="mcp-stdio-reader")
        answer = self.request("initialize", initialize_params(), bound_s)
        if "result" not in answer:
            raise Gone(f"initialize answered {str(answer)[:200]}")
        self._write({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def request(self, method: str, params: Mapping[str, Any], timeout: float) -> dict[str, Any]:
        """``method``'s answer within ``timeout`` seconds; ``Gone`` if none, naming the
        bound and what the server wrote instead."""
        future: Future = Future()
        with self._lock:
            if self._closed:
                raise Gone(self._closed)
            request_id = next(self._ids)
            self._pending[request_id] = future
        self._write(jsonrpc_request(request_id, method, params))
        try:
            return future.result(timeout)
        except FutureTimeout:
            raise Gone(f"{method}: no answer within {timeout:g}s{self._stray_note()}") from None
        finally:
            with self._lock:
                self._pending.pop(request_id, None)

    def stop(self) -> None:
        self.server.pipes.close(self._stdin)

    def _write(self, message: Mapping[str, Any]) -> None:
        with self._write_lock:
            written = self.server.pipes.write_all(self._stdin, json_bytes(message) + b"\n")
        if not written:
            raise Gone("the server closed its input")

    def _read(self) -> None:
        try:
            for line in self.server.pipes.lines(self._stdout, MAX_ANSWER_BYTES):
                self._answer(line)
        except (LineTooLong, Gone):
            pass
        reason = self.server.ending() + self._stray_note()
        with self._lock:
            self._closed = reason
            pending, self._pending = list(self._pending.values()), {}
        for future in pending:
            future.set_exception(Gone(reason))

    def _answer(self, line: bytes) -> None:
        """Resolve the call ``line`` answers; answer a request of the server's own (a
        ping) at once. ``Gone`` when that answer cannot be sent."""
        message = parse_json(line)
        if not isinstance(message, dict):
            if line.strip():
                with self._lock:
                    self._garbage_count += 1
                    if self._garbage_first is None:
                        self._garbage_first = line.rstrip(b"\r\n")
            return
        if "method" in message and "id" in message:
            self._write({"jsonrpc": "2.0", "id": message["id"], "result": {}})
            return
        answered = message.get("id")
        with self._lock:
            future = self._pending.pop(answered, None) if isinstance(answered, int) else None
        if future is not None:
            future.set_result(message)
        elif "result" in message or "error" in message:
            with self._lock:
                self._stray_count += 1
                if len(self._strays) < MAX_STRAYS_KEPT:
                    self._strays.append(answered)

    def _stray_note(self) -> str:
        """What the server wrote that answered no call: answers under ids never asked
        for, and lines that are no JSON-RPC message (the first quoted, escaped)."""
        notes = []
        with self._lock:
            if self._stray_count:
                ids = ", ".join(json.dumps(item)[:40] for item in self._strays)
                unnamed = self._stray_count - len(self._strays)
                more = f" and {unnamed} more" if unnamed else ""
                notes.append(f"; the server sent {self._stray_count} answer(s) under ids never asked for ({ids}{more})")
            if self._garbage_first is not None:
                first = self._garbage_first
                cut = "..." if len(first) > GARBAGE_QUOTED_BYTES else ""
                notes.append(
                    f"; the server wrote {self._garbage_count} line(s) on stdout that are no JSON-RPC message,"
                    f" the first: {first[:GARBAGE_QUOTED_BYTES]!r}{cut}"
                )
        return "".join(notes)
