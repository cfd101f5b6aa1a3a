"""Messages of the ``retryproof-harness/1`` protocol, their line codec, and a server loop.

Both ends of the protocol live on this one page: the kit decodes responses with it,
and any Python harness (the reference runtime, the Python host adapter) serves with
``serve``. Harnesses in other languages implement the same framing from
``spec/retryproof.yaml`` (``protocol``) and ``spec/schemas/harness-*.json``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

from retryproof.spec.digest import DIGEST_SCHEMA_VERSION, ContractError
from retryproof.spec.jcs import DuplicateKeyError, loads_strict

TYPE_CHECKING = False  # not typing's: importing typing would be paid at every harness start
if TYPE_CHECKING:
    from typing import Any, BinaryIO, TypeGuard

    Handler = Callable[[Mapping[str, Any]], Mapping[str, Any]]

__all__ = [
    "FAILPOINT_ACTIONS",
    "PROTOCOL",
    "Failure",
    "Hello",
    "ProtocolError",
    "Request",
    "Success",
    "decode_request",
    "decode_response",
    "crash_now",
    "encode",
    "format_failpoints",
    "hello_handler",
    "parse_failpoints",
    "serve",
]

PROTOCOL = "retryproof-harness/1"
FAILPOINT_ACTIONS = ("crash", "fail")
#: ``diagnose`` for an id with no receipt (DIAGNOSE-R3).
ABSENT_DIAGNOSIS: Mapping[str, Any] = MappingProxyType(
    {
        "state": "absent",
        "task_id": None,
        "task_path": None,
        "task_exists": False,
        "digest_matches": None,
        "age_s": None,
        "stalled": False,
    }
)
# RFC 8259's insignificant whitespace: a line of only these is ignored (PROTOCOL-R7).
JSON_WHITESPACE = b" \t\r\n"


class _Message:
    """A protocol message: an immutable value, equal to another of its class with equal
    fields, shown as ``Success(id=1, result={})``. A plain class with ``__slots__``:
    a ``NamedTuple`` imports typing, a dataclass inspect, and either would cost a
    Python harness's start more than this whole page, paid once per scenario."""

    __slots__: tuple[str, ...] = ()

    def __init__(self, *fields: object) -> None:
        for name, value in zip(self.__slots__, fields, strict=True):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def _fields(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _Message) or type(other) is not type(self):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __reduce__(self) -> tuple[Callable[..., _Message], tuple[object, ...]]:
        return type(self), self._fields()  # pickle and copy rebuild it through __init__

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({shown})"


_NO_ARGS: Mapping[str, Any] = MappingProxyType({})


class Request(_Message):
    __slots__ = ("id", "op", "args")
    id: int
    op: str
    args: Mapping[str, Any]

    def __init__(self, id: int, op: str, args: Mapping[str, Any] = _NO_ARGS) -> None:
        super().__init__(id, op, args)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "op": self.op, "args": dict(self.args)}


class Success(_Message):
    __slots__ = ("id", "result")
    id: int
    result: Mapping[str, Any]
    ok = True

    def __init__(self, id: int, result: Mapping[str, Any]) -> None:
        super().__init__(id, result)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "ok": True, "result": dict(self.result)}


class Failure(_Message):
    __slots__ = ("id", "code", "message")
    id: int | None
    code: str
    message: str
    ok = False

    def __init__(self, id: int | None, code: str, message: str) -> None:
        super().__init__(id, code, message)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "ok": False, "error": {"code": self.code, "message": self.message}}


class Hello(_Message):
    """A ``hello`` result, read once into what the kit asks of it (as Bowtie reads its
    ``Started`` response): who the runtime is and, as sets, what it declares.
    ``tamper_actions`` is None when the runtime lists none: declaring ``tamper`` then
    means every action. ``result`` is the answer as given: reports list the
    declarations in the runtime's own order (``listed``), and a pytest-xdist worker
    hands it to its controller."""

    __slots__ = ("implementation", "capabilities", "failpoints", "tamper_actions", "digest_schema_version", "result")
    implementation: Mapping[str, Any]
    capabilities: frozenset[str]
    failpoints: frozenset[str]
    tamper_actions: frozenset[str] | None
    digest_schema_version: str
    result: Mapping[str, Any]

    @classmethod
    def read(cls, result: Mapping[str, Any]) -> Hello:
        """The record of a ``hello`` result (one checked against ``$defs/hello_result``
        has every field; read from less, a missing declaration is empty)."""
        tamper_actions = result.get("tamper_actions")
        return cls(
            MappingProxyType(dict(result.get("implementation") or {})),
            frozenset(result.get("capabilities") or ()),
            frozenset(result.get("failpoints") or ()),
            None if tamper_actions is None else frozenset(tamper_actions),
            result.get("digest_schema_version", ""),
            MappingProxyType(dict(result)),
        )

    def performs(self, action: str) -> bool:
        """Whether the runtime performs the tamper ``action``."""
        return "tamper" in self.capabilities and (self.tamper_actions is None or action in self.tamper_actions)

    def listed(self, declaration: str) -> tuple[str, ...]:
        """``capabilities`` or ``failpoints`` in the order the runtime declared them."""
        return tuple(self.result.get(declaration) or ())

    def __reduce__(self) -> tuple[Callable[[Mapping[str, Any]], Hello], tuple[dict[str, Any]]]:
        return Hello.read, (dict(self.result),)  # a read-only mapping does not pickle; the answer does


class ProtocolError(Exception):
    """A structured rejection: becomes ``{"ok": false, "error": {code, message}}``."""

    def __init__(self, code: str, message: str, request_id: int | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.request_id = request_id


def encode(message: Request | Success | Failure) -> bytes:
    return json.dumps(message.to_json(), ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def _is_id(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _load_object(line: bytes) -> dict[str, Any]:
    try:
        message = loads_strict(line.decode("utf-8"))
    except DuplicateKeyError as exc:
        raise ProtocolError("bad_message", f"not a JSON line: {exc.field('line')}: {exc}") from exc
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError("bad_message", f"not a JSON line: {exc}") from None
    if not isinstance(message, dict):
        raise ProtocolError("bad_message", "a message must be a JSON object")
    return message


def decode_request(line: bytes) -> Request:
    """Parse one request line; raise ``ProtocolError("bad_message")`` otherwise.

    A duplicate key inside ``args`` (a task that names ``subject`` twice) is that
    request's ``invalid_request`` (retryproof.yaml, PROTOCOL-R8), raised with the
    request's id so that a pipelining caller can match the answer.
    """
    try:
        message = _load_object(line)
    except ProtocolError as exc:
        duplicate = exc.__cause__
        if isinstance(duplicate, DuplicateKeyError) and duplicate.path[0] == "args":
            request_id = json.loads(line).get("id")  # the text is JSON; only the duplicate was refused
            if _is_id(request_id):
                raise ProtocolError(
                    "invalid_request", f"{duplicate.field('request')}: {duplicate}", request_id
                ) from None
        raise
    request_id = message.get("id")
    if not _is_id(request_id):
        raise ProtocolError("bad_message", "request id must be an integer")
    if set(message) != {"id", "op", "args"}:
        # PROTOCOL-R6: a line without args, or with another top-level key, is not a request.
        raise ProtocolError("bad_message", "a request has exactly the keys id, op and args", request_id)
    op, args = message["op"], message["args"]
    if not isinstance(op, str) or not isinstance(args, dict):
        raise ProtocolError("bad_message", "op must be a string and args an object", request_id)
    return Request(request_id, op, args)


def decode_response(line: bytes) -> Success | Failure:
    """Parse one response line; raise ``ProtocolError("bad_message")`` otherwise."""
    message = _load_object(line)
    request_id = message.get("id")
    if not (request_id is None or _is_id(request_id)):
        raise ProtocolError("bad_message", "response id must be an integer or null")
    if message.get("ok") is True and isinstance(message.get("result"), dict):
        if request_id is None:
            raise ProtocolError("bad_message", "a success must carry the request id")
        return Success(request_id, message["result"])
    error = message.get("error")
    if message.get("ok") is False and isinstance(error, dict):
        code, text = error.get("code"), error.get("message", "")
        if isinstance(code, str) and isinstance(text, str):
            return Failure(request_id, code, text)
    raise ProtocolError(
        "bad_message", "a response needs ok=true with a result object or ok=false with an error {code, message}"
    )


def parse_failpoints(text: str | None) -> dict[str, str]:
    """Parse ``RETRYPROOF_FAILPOINTS`` (``name=action,name=action``)."""
    failpoints: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in (text or "").split(","))):
        name, sep, action = item.partition("=")
        if not sep or not name or action not in FAILPOINT_ACTIONS:
            raise ValueError(f"bad failpoint {item!r}: expected name=crash or name=fail")
        failpoints[name] = action
    return failpoints


def format_failpoints(failpoints: Mapping[str, str]) -> str:
    return ",".join(f"{name}={action}" for name, action in failpoints.items())


def greeting(
    implementation: Mapping[str, str],
    capabilities: Sequence[str],
    failpoints: Sequence[str],
    tamper_actions: Sequence[str] | None = None,
) -> dict[str, Any]:
    """A ``hello`` result: the declarations of a runtime. ``tamper_actions`` lists the
    tamper actions performed; None leaves the list out."""
    declared: dict[str, Any] = {
        "protocol": PROTOCOL,
        "implementation": dict(implementation),
        "capabilities": list(capabilities),
        "failpoints": list(failpoints),
        "digest_schema_version": DIGEST_SCHEMA_VERSION,
    }
    if tamper_actions is not None:
        declared["tamper_actions"] = list(tamper_actions)
    return declared


def hello_handler(
    implementation: Mapping[str, str],
    capabilities: Sequence[str],
    failpoints: Sequence[str],
    tamper_actions: Sequence[str] | None = None,
) -> Handler:
    """The ``hello`` a Python harness serves: its ``greeting``, after checking that the
    kit speaks this protocol (anything else is ``invalid_request``)."""
    declared = greeting(implementation, capabilities, failpoints, tamper_actions)

    def hello(args: Mapping[str, Any]) -> Mapping[str, Any]:
        if set(args) != {"protocol"}:
            raise ContractError("invalid_request", "args", "hello takes exactly one argument, protocol")
        if args["protocol"] != PROTOCOL:
            raise ContractError(
                "invalid_request",
                "args.protocol",
                f"{args['protocol']!r} is not served; this harness speaks {PROTOCOL}",
            )
        return declared

    return hello


def serve(
    handlers: Mapping[str, Handler],
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
    max_workers: int = 64,
) -> None:
    """Answer requests from ``stdin`` until EOF or ``shutdown`` (PROTOCOL-R9, PROTOCOL-R10).

    Every request runs on a worker thread, so calls pipelined on one connection run
    concurrently and are answered in completion order. ``shutdown`` waits for the
    calls in flight, answers ``{}`` and returns; the caller then exits 0.
    """
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout.buffer
    write_lock = threading.Lock()

    def send(message: Success | Failure) -> None:
        data = encode(message)
        with write_lock:
            stdout.write(data)
            stdout.flush()

    def run(request: Request) -> None:
        handler = handlers.get(request.op)
        try:
            if handler is None:
                raise ProtocolError("unknown_op", f"unknown op {request.op!r}")
            send(Success(request.id, handler(request.args)))
        except (ProtocolError, ContractError) as exc:
            send(Failure(request.id, exc.code, str(exc)))
        except OSError as exc:
            # A native I/O error (a `fail` failpoint, a full disk): the effect may or
            # may not have happened, which the kit treats as indeterminate.
            send(Failure(request.id, "io_error", f"{type(exc).__name__}: {exc}"))
        except Exception as exc:  # a harness must answer every request, even on its own bug
            send(Failure(request.id, "internal_error", f"{type(exc).__name__}: {exc}"))

    # A thread per request under a bound, rather than concurrent.futures, whose import
    # (logging with it) would weigh on every harness start (benchmarks/bench_start.py).
    slots = threading.BoundedSemaphore(max_workers)
    workers: list[threading.Thread] = []

    def run_in_slot(request: Request) -> None:
        try:
            run(request)
        finally:
            slots.release()

    def wait_for_calls_in_flight() -> None:
        for worker in workers:
            worker.join()

    for line in stdin:
        if not line.strip(JSON_WHITESPACE):
            continue  # PROTOCOL-R7: an empty or whitespace-only line gets no answer
        try:
            request = decode_request(line)
        except ProtocolError as exc:
            send(Failure(exc.request_id, exc.code, exc.message))
            continue
        if request.op == "shutdown":
            wait_for_calls_in_flight()
            send(Success(request.id, {}))
            return
        slots.acquire()
        worker = threading.Thread(target=run_in_slot, args=(request,), name=f"harness-{request.id}")
        worker.start()
        workers[:] = [item for item in workers if item.is_alive()] + [worker]
    wait_for_calls_in_flight()


def crash_now() -> None:
    """What a ``crash`` failpoint does: the process SIGKILLs itself, skipping every
    cleanup handler, as an abrupt process death looks to the caller. (The kernel's
    page cache survives it, unlike a power cut: DURABILITY-TRACE covers that gap.)
    ``signal`` is imported here: building its enums would cost every harness start."""
    import signal

    os.kill(os.getpid(), signal.SIGKILL)
