"""The wire under a binding: HTTP requests, and MCP (JSON-RPC 2.0) over stdio or
streamable HTTP, each turning one exchange into an answer mapping
(``retryproof.adapters.binding.answers``) or raising ``Gone``.

The MCP client is written here, on the standard library, rather than taken from the
``mcp`` SDK: the kit must own every wait (bounded by its own timeouts, on its own
threads), the server process (its own process group, SIGKILLed at will) and the
connection (its answer withheld or the call cut by the kit's proxy, ``proxy.py``, to
lose a response for real). The SDK
is what the servers under test are built with; the kit only speaks the protocol.
"""

from __future__ import annotations

import http.client
import itertools
import json
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import IO, Any
from urllib.parse import urlsplit

from retryproof.adapters.pipes import ChildPipes, LineTooLong

#: The MCP revision the kit asks for; a server may answer another it supports.
MCP_PROTOCOL_VERSION = "2025-06-18"
#: The longest answer the kit reads; a longer one is garbage, not an answer.
MAX_ANSWER_BYTES = 4 << 20


class Gone(Exception):
    """No answer: the call's effect is unknown (``Lost``)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _json_bytes(value: Any) -> bytes:
    # ASCII escapes carry any string, a lone surrogate included, through every server.
    return json.dumps(value, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def parse_json(data: bytes) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return data[:2000].decode("utf-8", "replace")


def http_exchange(
    base_url: str,
    method: str,
    path: str,
    *,
    headers: Mapping[str, str] | None = None,
    body: Any = None,
    timeout: float,
) -> dict[str, Any]:
    """One HTTP request on a new connection: ``{status, header, body}``."""
    parts = urlsplit(base_url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=timeout)
    sent_headers = {"Accept": "application/json", **(headers or {})}
    payload = None
    if body is not None:
        payload = _json_bytes(body)
        sent_headers["Content-Type"] = "application/json"
    try:
        connection.request(method, parts.path.rstrip("/") + path, body=payload, headers=sent_headers)
        response = connection.getresponse()
        data = response.read(MAX_ANSWER_BYTES + 1)
        if len(data) > MAX_ANSWER_BYTES:
            raise Gone(f"the answer is longer than {MAX_ANSWER_BYTES} bytes")
        return {
            "status": response.status,
            "header": {name.lower(): value for name, value in response.getheaders()},
            "body": parse_json(data) if data else None,
        }
    except (OSError, http.client.HTTPException) as exc:
        raise Gone(f"{method} {path}: {type(exc).__name__}: {exc}") from None
    finally:
        connection.close()


def mcp_answer(message: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a JSON-RPC response to a ``tools/call`` or ``resources/read``."""
    if "error" in message:
        return {"error": message["error"]}
    result = message.get("result")
    if not isinstance(result, Mapping):
        raise Gone(f"a JSON-RPC response without a result object: {str(message)[:200]}")
    text = None
    blocks = result.get("content") or result.get("contents") or []
    for block in blocks if isinstance(blocks, list) else []:
        if isinstance(block, Mapping) and isinstance(block.get("text"), str):
            text = parse_json(block["text"].encode("utf-8"))
            break
    return {"result": result.get("structuredContent"), "text": text, "isError": bool(result.get("isError"))}


def _request(request_id: int, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": dict(params)}


def _initialize_params() -> dict[str, Any]:
    return {
        "protocolVersion": MCP_PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "retryproof", "version": "1"},
    }


class McpStdio:
    """JSON-RPC lines on a server's stdin/stdout; calls are pipelined by id. Lines
    that answer nothing (notifications, logs) are ignored; a server's own request
    (a ping) is answered empty, so the server never waits on the kit."""

    def __init__(self, stdin: IO[bytes], stdout: IO[bytes], pipes: ChildPipes, on_closed: Callable[[], str]):
        self._stdin = stdin
        self._stdout = stdout
        self._pipes = pipes
        self._on_closed = on_closed
        self._ids = itertools.count(1)
        self._pending: dict[int, Future] = {}
        self._lock = threading.Lock()
        # Writes have their own lock: a server that stops reading blocks a writer,
        # never the reader thread that resolves answers.
        self._write_lock = threading.Lock()
        self._closed: str | None = None
        pipes.spawn(self._read, name="mcp-stdio-reader")

    def initialize(self, timeout: float) -> None:
        answer = self.request("initialize", _initialize_params(), timeout)
        if "result" not in answer:
            raise Gone(f"initialize answered {str(answer)[:200]}")
        self._write({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def request(self, method: str, params: Mapping[str, Any], timeout: float) -> dict[str, Any]:
        future: Future = Future()
        with self._lock:
            if self._closed:
                raise Gone(self._closed)
            request_id = next(self._ids)
            self._pending[request_id] = future
        self._write(_request(request_id, method, params))
        try:
            return future.result(timeout)
        except FutureTimeout:
            raise Gone(f"no answer within {timeout:g}s") from None
        finally:
            with self._lock:
                self._pending.pop(request_id, None)

    def close_input(self) -> None:
        self._pipes.close(self._stdin)

    def _write(self, message: Mapping[str, Any]) -> None:
        with self._write_lock:
            written = self._pipes.write_all(self._stdin, _json_bytes(message) + b"\n")
        if not written:
            raise Gone("the server closed its input")

    def _read(self) -> None:
        try:
            for line in self._pipes.lines(self._stdout, MAX_ANSWER_BYTES):
                self._answer(line)
        except (LineTooLong, Gone):
            pass
        reason = self._on_closed()
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
            return
        if "method" in message and "id" in message:
            self._write({"jsonrpc": "2.0", "id": message["id"], "result": {}})
            return
        answered = message.get("id")
        with self._lock:
            future = self._pending.pop(answered, None) if isinstance(answered, int) else None
        if future is not None:
            future.set_result(message)


class McpHttp:
    """JSON-RPC over MCP streamable HTTP: one POST per message; the answer is JSON or
    a server-sent event stream carrying it. The session id of ``initialize`` is sent
    with every later message."""

    def __init__(self, url: str):
        self.url = url
        self.session: str | None = None
        self.version = MCP_PROTOCOL_VERSION
        self._ids = itertools.count(1)

    def initialize(self, timeout: float) -> None:
        answer = self.request("initialize", _initialize_params(), timeout)
        if "result" not in answer:
            raise Gone(f"initialize answered {str(answer)[:200]}")
        self.version = str(answer["result"].get("protocolVersion") or MCP_PROTOCOL_VERSION)
        self.notify("notifications/initialized", {}, timeout)

    def notify(self, method: str, params: Mapping[str, Any], timeout: float) -> None:
        self._post({"jsonrpc": "2.0", "method": method, **({"params": dict(params)} if params else {})}, timeout)

    def request(
        self, method: str, params: Mapping[str, Any], timeout: float, request_id: int | None = None
    ) -> dict[str, Any]:
        """``request_id``: this id instead of the next one (a call the kit may cancel by id)."""
        request_id = next(self._ids) if request_id is None else request_id
        answer = self._post(_request(request_id, method, params), timeout)
        if not isinstance(answer, dict) or answer.get("id") != request_id:
            raise Gone(f"{method}: an answer for another request: {str(answer)[:200]}")
        return answer

    def _post(self, message: Mapping[str, Any], timeout: float) -> Any:
        parts = urlsplit(self.url)
        connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=timeout)
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": self.version,
        }
        if self.session:
            headers["Mcp-Session-Id"] = self.session
        try:
            connection.request("POST", parts.path or "/", body=_json_bytes(message), headers=headers)
            response = connection.getresponse()
            self.session = response.getheader("mcp-session-id") or self.session
            if response.status == 202:
                return None
            if response.status >= 400:
                raise Gone(f"HTTP {response.status}: {response.read(2000).decode('utf-8', 'replace')}")
            if (response.getheader("content-type") or "").startswith("text/event-stream"):
                return _from_event_stream(response, message.get("id"))
            return parse_json(response.read(MAX_ANSWER_BYTES))
        except (OSError, http.client.HTTPException) as exc:
            raise Gone(f"{message.get('method')}: {type(exc).__name__}: {exc}") from None
        finally:
            connection.close()


def _from_event_stream(response: http.client.HTTPResponse, request_id: Any) -> Any:
    """The JSON-RPC response with ``request_id`` among the stream's events."""
    data: list[str] = []
    while True:
        line = response.readline(MAX_ANSWER_BYTES + 1)
        if not line:
            raise Gone("the event stream ended without the answer")
        text = line.decode("utf-8", "replace").rstrip("\r\n")
        if text.startswith("data:"):
            data.append(text[5:].lstrip(" "))
        elif not text and data:
            message = parse_json("\n".join(data).encode("utf-8"))
            data = []
            if isinstance(message, dict) and message.get("id") == request_id and "method" not in message:
                return message
