"""What every wire under a binding offers: the parts of its answers, readiness, the
bound call, the listing and a graceful stop, on one started server.

A wire turns one exchange into an answer mapping (``retryproof.adapters.binding.answers``
reads it by the binding's paths) or raises ``Gone``: no answer, so the call's effect is
unknown. The connection (``binding/connection.py``) owns the server process and never
asks which wire it speaks; ``transports/__init__.py`` chooses the wire.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar, Protocol

from retryproof.adapters.loopback import await_accepting
from retryproof.adapters.pipes import ChildPipes
from retryproof.adapters.process_groups import wait_exit

#: The longest answer the kit reads; a longer one is garbage, not an answer.
MAX_ANSWER_BYTES = 4 << 20


class Gone(Exception):
    """No answer: the call's effect is unknown (``Lost``)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def json_bytes(value: Any) -> bytes:
    # ASCII escapes carry any string, a lone surrogate included, through every server.
    return json.dumps(value, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def parse_json(data: bytes) -> Any:
    """An answer body (a line, a command's output) as JSON; text that is not JSON as
    its start; bytes that are not UTF-8 as a sentence saying so, which every message
    that quotes the value then shows (it used to read as a body lacking its items)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"(not UTF-8 text: {exc.reason} at byte {exc.start}) {data[:200]!r}"
    try:
        return json.loads(text)
    except ValueError:
        return text[:2000]


class Server:
    """One started server process: its pipes, and where it listens (a listening wire)."""

    def __init__(self, popen: subprocess.Popen, port: int | None, base_url: str | None):
        self.popen = popen
        self.pipes = ChildPipes([stream for stream in (popen.stdin, popen.stdout, popen.stderr) if stream is not None])
        self.port = port
        self.base_url = base_url
        self.wire: Transport | None = None
        self.killed_by_kit = False

    def ending(self) -> str:
        if self.killed_by_kit:
            return "the kit killed the server"
        try:
            status = wait_exit(self.popen, 1.0)
        except subprocess.TimeoutExpired:
            return "the server closed its output"
        return f"the server exited with status {status}"


class BoundPath(Protocol):
    """What a wire reads of its binding: the bound call and the listing. A
    ``binding_file.Binding`` is one; the wires name this instead of importing it, as
    the binding file imports them to choose its wire."""

    @property
    def tool(self) -> str | None: ...
    @property
    def method(self) -> str | None: ...
    @property
    def path(self) -> str | None: ...
    @property
    def key(self) -> tuple[str, str]: ...  # (argument | meta | header, name)
    @property
    def listing(self) -> Mapping[str, Any]: ...


class Transport(ABC):
    """One wire to one started server. The class attributes are what a binding file
    of this transport may and must say; ``binding_file.parse`` checks them."""

    #: How reports name the wire (the hello's implementation language).
    label: ClassVar[str]
    #: The parts one answer has: every answer path of the binding starts with one.
    answer_roots: ClassVar[tuple[str, ...]]
    #: Whether the server listens on RETRYPROOF_PORT (a binding with a url); else it
    #: speaks on its stdin and stdout.
    listens: ClassVar[bool]
    #: The ``call`` keys a binding of this transport must give, and what to say when
    #: one is missing.
    call_needs: ClassVar[tuple[tuple[str, ...], str]]
    #: Keys of other transports, per section of the binding file, that do not apply here.
    foreign: ClassVar[Mapping[str, tuple[str, ...]]]
    #: Whether the server ends when its caller goes away (its input closes): the kit
    #: then loses an answer on the pipe it owns, not through its proxy.
    ends_when_left: ClassVar[bool] = False

    def __init__(self, binding: BoundPath, server: Server):
        self.binding = binding
        self.server = server

    @abstractmethod
    def ready(self, bound_s: float) -> None:
        """Return once the server answers, within ``bound_s`` seconds (the start timeout, or
        a call timeout for a retry's new caller); ``Gone`` if not, naming that bound."""

    @abstractmethod
    def call(self, arguments: dict[str, Any], key: str | None, timeout: float) -> dict[str, Any]:
        """The bound call with ``arguments`` (the task as the call carries it) and the key."""

    def through(self, url: str) -> Transport:
        """This wire with its calls sent to ``url`` (the kit's proxy, ``proxy.py``)
        instead of the server, for one call whose answer the kit loses; a listening
        wire has one."""
        raise NotImplementedError(f"{self.label} has no url to send a call through")

    def abandon(self, timeout: float) -> None:
        """Say that the caller gave up the last call sent on this wire, where the wire
        has a way to (MCP's cancellation); most have none."""
        return None  # the closed connection is all the server sees

    @abstractmethod
    def listing(self, timeout: float) -> tuple[dict[str, Any], str | None]:
        """The answer of the binding's listing (a ``get``, ``tool`` or ``resource``)
        and, when it is no listing (an error), the words that introduce it in evidence."""

    def stop(self) -> None:
        """Ask the server to end: SIGTERM to its group (a stdio wire closes its input)."""
        try:
            os.killpg(self.server.popen.pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass

    def accepting(self, deadline: float) -> None:
        """Wait until a listening server accepts on its port."""
        problem = await_accepting(self.server.popen, self.server.port or 0, deadline)
        if problem:
            raise Gone(problem)
