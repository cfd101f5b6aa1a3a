"""The connection interface behind every way of reaching a runtime.

A reply is one of three things, mirroring the outcome model the kit judges with:
``Success`` and ``Failure`` (from ``retryproof.spec.protocol``) when the harness answered, and
``Lost`` when it did not (timeout, closed output, an unreadable or unattributable
line, a killed process). The adapter never guesses what a lost call did.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Union

from retryproof.adapters.loss import WITHHELD, Loss
from retryproof.spec.digest import TASK_FIELDS
from retryproof.spec.protocol import Failure, Success

#: Seconds a connection waits for one response, and for its start (handshake, readiness),
#: unless told otherwise.
CALL_TIMEOUT_S = 10.0
START_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Lost:
    """No answer to judge: the call's effect is unknown."""

    reason: str
    #: When the kit lost the answer on purpose and saw its effect listed meanwhile:
    #: seconds from the request reaching the runtime until the last listing that did
    #: not hold the effect yet (a lower bound of the time the effect took).
    effect_listed_s: float | None = None

    ok = False


Reply = Union[Success, Failure, Lost]  # noqa: UP007 (a runtime alias; X | Y needs 3.10 objects)


class HarnessStartError(Exception):
    """The harness did not start or did not complete its ``hello`` handshake."""

    def __init__(self, message: str, stderr: str = ""):
        super().__init__(message)
        self.message = message
        self.stderr = stderr


class Connection(ABC):
    """One runtime process (or its equivalent) on one state directory.

    Every method returns in bounded time: calls time out into ``Lost``, a stop that
    is not honoured ends in SIGKILL.
    """

    #: The ``hello`` result of the current process, once started.
    hello: Mapping[str, Any] | None = None
    #: The first call that got no answer within its deadline (``"write_task: no
    #: response within 10s"``), or None. From then on nothing more is sent: every
    #: call ends ``Lost`` at once and ``start`` raises ``HarnessStartError``.
    missed_deadline: str | None = None
    #: Seconds after a restart within which every interrupted key must answer with
    #: its one effect (a lease a runtime holds on a key, say); a binding declares it.
    recovery_s: float = 0.0
    #: Whether the runtime may answer a concurrent duplicate ``in_flight`` (the IETF
    #: Idempotency-Key draft's 409) instead of waiting for the holder: true only
    #: through a binding; A4 then retries those calls and judges the retries.
    settles_in_flight: bool = False
    #: The write-task fields the runtime's task model has: a harness has all ten; a
    #: bound tool has the fields its binding maps, and the kit's tasks hold only those.
    task_model: tuple[str, ...] = TASK_FIELDS
    #: Whether requests equal under write-task-v1's normalization (line endings,
    #: Unicode composition, null for absent) are one request to the runtime: a
    #: harness's are; a bound tool's only when the binding claims write-task-v1.
    normalizes: bool = True

    @abstractmethod
    def start(self, failpoints: Mapping[str, str] | None = None) -> Mapping[str, Any]:
        """Start the runtime and complete the handshake; return the hello result.
        Raises ``HarnessStartError``."""

    @abstractmethod
    def submit(self, op: str, args: Mapping[str, Any] | None = None, *, args_json: str | None = None) -> Future:
        """Send one request without waiting; the future resolves to a ``Reply``.
        Several submitted calls are pipelined on the one connection. ``args_json``
        sends the args as this exact JSON text instead (duplicate keys, escapes)."""

    def call(
        self,
        op: str,
        args: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        *,
        args_json: str | None = None,
    ) -> Reply:
        """Send one request and wait for its reply (``Lost`` after the timeout)."""
        return self.wait(self.submit(op, args, args_json=args_json), timeout)

    @abstractmethod
    def wait(self, pending: Future, timeout: float | None = None, *, allowed_s: float | None = None) -> Reply:
        """Wait for a submitted call; ``Lost`` when the timeout passes first. ``allowed_s``
        is the whole deadline the caller gave the call when it already waited part of it
        elsewhere (a pipelined batch); a missed deadline is named by it."""

    @abstractmethod
    def send_line(self, raw: bytes, timeout: float | None = None) -> Reply:
        """Send raw bytes as one line (not a request) and wait for the ``id: null``
        answer the protocol requires."""

    def lose_response(self, op: str, args: Mapping[str, Any], loss: Loss = WITHHELD) -> Reply | None:
        """Send one request and lose its answer for real, as ``loss`` says (withheld
        after the runtime answered, or cut while it runs): the caller's connection
        closes without an answer. None when this way in cannot (a harness's answers
        arrive on the one stdout the kit keeps reading, so there the kit reads the
        answer and disregards it)."""
        return None

    @abstractmethod
    def kill(self) -> None:
        """SIGKILL the runtime's whole process group; calls in flight become ``Lost``."""

    @abstractmethod
    def stop(self) -> None:
        """Ask the runtime to shut down (``shutdown``), then make sure it is gone."""

    def restart(self, failpoints: Mapping[str, str] | None = None, graceful: bool = False) -> Mapping[str, Any]:
        """End the current process (gracefully or by SIGKILL) and start a new one on
        the same state directory."""
        self.stop() if graceful else self.kill()
        return self.start(failpoints)

    @property
    @abstractmethod
    def alive(self) -> bool:
        """Whether the runtime process is running."""

    @abstractmethod
    def stderr_text(self) -> str:
        """The captured, bounded tail of the runtime's stderr over all its starts."""

    def survivors(self) -> list[dict[str, Any]]:
        """Processes that outlived a stopped harness, each ``{pid, command}``."""
        return []

    def protocol_noise(self) -> list[str]:
        """Lines the harness wrote that answered no call in flight, oldest first."""
        return []

    def exchanges(self) -> list[dict[str, Any]]:
        """The runtime's own answers to the calls this connection translated (a
        binding: status, headers, body, and the outcome rule that read each), oldest
        first; a harness answers in the protocol itself, so its calls record all."""
        return []

    @abstractmethod
    def exit_statuses(self) -> list[int | None]:
        """The exit status of every process this connection ran, oldest first
        (negative: killed by that signal; None: still running)."""
