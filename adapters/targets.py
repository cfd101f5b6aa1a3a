"""The ways a run reaches its runtime, one ``Target`` each, and the one function that
chooses among them.

``connect`` is the only way a run, a replay, the selftest or the pytest plugin reaches
an implementation (as Bowtie's connectables are): the target says what it starts, the
connection it returns says nothing of which way in it took. A harness command line (a
hosted Python class is one: ``python_host.host_command``) is a ``HarnessTarget``; an
MCP server or an HTTP API described by a binding file is a ``BindingTarget``.
"""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, ClassVar

from retryproof.adapters.connection import CALL_TIMEOUT_S, START_TIMEOUT_S, Connection
from retryproof.adapters.process import ProcessConnection
from retryproof.adapters.process_groups import Scratch
from retryproof.spec.protocol import PROTOCOL

if TYPE_CHECKING:
    from retryproof.adapters.binding import Binding


class Target(ABC):
    """One way in; its connections wait ``call_timeout`` for a response and
    ``start_timeout`` for their start."""

    #: Only the runtime's answers are seen, no hook of a harness: the verdict is black-box.
    black_box: ClassVar[bool]
    #: What to check when its handshake failed, for the user error.
    start_fix: ClassVar[str]

    @abstractmethod
    def connect(
        self, scratch: Scratch, *, call_timeout: float = CALL_TIMEOUT_S, start_timeout: float = START_TIMEOUT_S
    ) -> Connection:
        """A connection on ``scratch`` (its state directory, and its working
        directory for a process the target starts), not started yet."""

    def connector(self, scratch: Scratch, *, call_timeout: float, start_timeout: float) -> Callable[[], Connection]:
        """What a scenario's ``Context`` calls for each connection it starts."""
        return partial(self.connect, scratch, call_timeout=call_timeout, start_timeout=start_timeout)

    @property
    @abstractmethod
    def what(self) -> str:
        """What the target starts, as a user error names it."""

    @property
    @abstractmethod
    def started(self) -> tuple[str, ...]:
        """The command line the kit starts (a harness, a binding's server), as a report names it."""

    @property
    @abstractmethod
    def protocol(self) -> str:
        """How the kit speaks with it, as a report names it."""


@dataclass(frozen=True)
class HarnessTarget(Target):
    """A harness: any command line that speaks ``retryproof-harness/1`` on stdin/stdout."""

    command: tuple[str, ...]
    #: How reports and evidence show ``command``, when not as ``shown`` would: the bundled
    #: reference's launcher as the command a reader types (``options.reference_shown``).
    shown_as: tuple[str, ...] | None = None
    black_box: ClassVar[bool] = False
    start_fix: ClassVar[str] = "check the --harness command line"

    @property
    def what(self) -> str:
        return "the harness"

    @property
    def started(self) -> tuple[str, ...]:
        return self.shown_as or self.command

    @property
    def protocol(self) -> str:
        return PROTOCOL

    def connect(
        self, scratch: Scratch, *, call_timeout: float = CALL_TIMEOUT_S, start_timeout: float = START_TIMEOUT_S
    ) -> Connection:
        return ProcessConnection(
            self.command,
            scratch.state,
            call_timeout=call_timeout,
            start_timeout=start_timeout,
            work_dir=scratch.work,
            shown=shown(self.started),
        )


@dataclass(frozen=True)
class BindingTarget(Target):
    """A server as it is, through a binding file (``adapters/binding/``)."""

    binding: Binding
    black_box: ClassVar[bool] = True
    start_fix: ClassVar[str] = "check start.command in the binding"

    def connect(
        self, scratch: Scratch, *, call_timeout: float = CALL_TIMEOUT_S, start_timeout: float = START_TIMEOUT_S
    ) -> Connection:
        from retryproof.adapters.binding import BindingConnection  # jsonschema: only when a binding is used

        return BindingConnection(self.binding, scratch.state, call_timeout=call_timeout, start_timeout=start_timeout)

    @property
    def what(self) -> str:
        return f"the server of binding {self.binding.source}"

    @property
    def started(self) -> tuple[str, ...]:
        return self.binding.command

    @property
    def protocol(self) -> str:
        # The kit speaks no harness protocol with a server: the report names the binding format.
        from retryproof.adapters.binding.binding_file import FORMAT  # loaded with the binding already

        return FORMAT


def shown(command: Sequence[str]) -> tuple[str, ...]:
    """A command line as a user would type it, for evidence and reports: the kit's own
    interpreter (the bundled reference runtime, a hosted Python class, a binding's
    ``{python}``) is named ``python``, not by its path on this machine."""
    return tuple(
        "python" if index == 0 and word in (sys.executable, "{python}") else word for index, word in enumerate(command)
    )


def target_of(command: tuple[str, ...], binding: Binding | None, shown_as: tuple[str, ...] | None = None) -> Target:
    """The way in a run's options name: the binding when there is one, else the command
    (reports showing it as ``shown_as``, when given)."""
    return HarnessTarget(command, shown_as) if binding is None else BindingTarget(binding)
