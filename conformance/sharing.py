"""One server for the scenarios that need a fresh key, not a fresh process.

A scenario declared ``@scenario(ID, shares_server=True)`` starts the runtime once, with
no failpoint, never kills, stops or restarts it, and judges only the calls and keys it
made itself (its keys are its own: ``Context.submission_id`` names the scenario). Such
scenarios can take turns on one server instead of starting one each: an MCP server's
start costs about as much CPU as everything else such a scenario does, and even a
harness's start (tens of milliseconds) about as much as such a scenario's calls. In a
binding run, a scenario declared ``takes_server=True`` takes such a turn too, though it ends the server
(SIGKILL, a graceful stop, a lost answer that ends a stdio server) and starts it again
on its state directory: where that restart is what it tests (RESTART-REUSE, the A2
scenarios), the start before it need not be a fresh process, only a fresh key. A turn
that restarted the server ends it, pass or not: no later user may meet a restarted
server (still recovering its keys, say) in one selection and an unrestarted one in
another. So the turns that may restart come last (``Marks.turn``): the scenarios that
only share take theirs first, all on one server, and the first of those that restart
takes it on from them. The order of turns is the same whatever ``--jobs`` says
(``schedule.shared_turns``), so is each scenario's ``used_before_by``.

Sharing stays honest by four rules:

- *One at a time.* A lease holds the server's lock for the whole scenario
  (``StartOrder`` never starts two sharing scenarios together, so nobody waits on it):
  between a scenario's listing before and its listing after, only its own calls
  reached the server, so the set checker's before/after difference is its own doing,
  as on a fresh state directory.
- *Only a pass hands it on.* A scenario that ends any other way (failed, error, a
  timeout) ends the server and its state directory; the next sharing scenario starts a
  fresh one, and its evidence says why (``fresh_start``).
- *Said in the evidence.* Each sharing scenario's ``shared_server`` evidence says which
  server it used, which scenarios used it before, and whether it started it.
- *Its own evidence.* The calls, exchanges and protocol noise a scenario's result quotes
  are those made in its lease, never an earlier user's. Only the stderr a failure quotes
  is the server's tail, which may begin in an earlier user's turn.

Processes that escape a shared server's group are found only when it is killed, so it
is killed within a user's turn, before that user's result is written, which names them
(``survivors``, as a server of its own would; ``failed_first_on_shared_server``'s when a
failure there is judged again on a server of its own): the user whose failure ends it, the last
user the run expects (``users``), or, for a server that died between two turns or that a
``cold_server`` user found used, that next user (``shared_server.earlier_server_survivors``). Only a server still running when the
run ends early (scenarios refused after a silent harness, an interrupt) or whose users
were not counted (the pytest plugin, whose items xdist deals out) is killed at the end
of the run, where no result names what escaped it.

A server that inherits state skips only the check that its first listing is empty (the
state directory is not fresh): the first scenario on each server, and every scenario that
starts its own, still makes it.

The run's first server is the one its handshake started for ``hello`` (``Handshake``):
a binding's ``hello`` makes no call, and a harness's changes no state, so its state
directory is as fresh as a new one's, and its first user checks that as the first user
of any server does. A start saved. A binding's ``hello`` is its document's, yet its
handshake starts the server all the same, shared or not: a server that cannot start is
then the run's one error (exit 2, with its stderr), not an error in each scenario.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from retryproof.adapters.connection import Connection
from retryproof.adapters.process_groups import Scratch
from retryproof.adapters.targets import Target


@dataclass
class Lease:
    """One scenario's turn on the shared server."""

    scenario_id: str
    #: Its number in the run (1 for the first server started), once the scenario started it or took it.
    server: int = 0
    #: The scenarios that used this server before, in order.
    earlier: tuple[str, ...] = ()
    #: Why the server this scenario uses is a fresh one though others came before.
    fresh_start: str | None = None
    started_here: bool = False
    #: Whether the run expects no user after this one, so its turn ends the server.
    last: bool = False
    #: Whether the run's handshake started the server (``Handshake``).
    handshake: bool = False
    #: Whether the scenario needs a server no other scenario used (``cold_server``).
    cold: bool = False
    #: Processes that escaped the group of a server that died before this turn.
    earlier_survivors: list[dict[str, Any]] = field(default_factory=list)
    #: Where this scenario's share of the connection's exchanges, survivors, noise and processes begins.
    marks: dict[str, int] = field(default_factory=dict)
    settled: bool = False

    @property
    def inherits(self) -> bool:
        """Whether the server's state directory holds earlier users' tasks (it is fresh
        for the first user of each server, whoever started it)."""
        return bool(self.earlier)

    def evidence(self) -> dict[str, Any]:
        found: dict[str, Any] = {"server": self.server, "used_before_by": list(self.earlier)}
        found["started_by_this_scenario"] = self.started_here
        if self.handshake:
            found["started_by_handshake"] = True
        if self.fresh_start:
            found["fresh_start"] = self.fresh_start
        if self.earlier_survivors:
            found["earlier_server_survivors"] = self.earlier_survivors
        return found


class Handshake:
    """The server a run's handshake started (``runner.handshake``), on a fresh state
    directory, kept running for the run's first sharing scenario. Whoever holds it ends
    it (``end``) unless a ``SharedServer`` took it first; both are safe to call twice."""

    def __init__(self, connection: Connection, scratch: Scratch):
        self._lock = threading.Lock()
        self._held: tuple[Connection, Scratch] | None = (connection, scratch)

    def take(self) -> tuple[Connection, Scratch] | None:
        with self._lock:
            taken, self._held = self._held, None
        return taken

    def end(self) -> None:
        taken = self.take()
        if taken is not None:
            taken[0].kill()
            taken[1].remove()


class SharedServer:
    """The server the sharing scenarios of one run take in turn, on its own state
    directory. ``lend`` takes the lock, ``settle`` ends the turn's use of the server,
    ``give_back`` lets the lock go. ``users``: how many turns the run expects (None:
    not known), so that the last one ends the server. ``handshake``: the server the
    run's handshake left running, the first one lent (ended at once when the run
    expects no user)."""

    def __init__(
        self,
        target: Target,
        *,
        call_timeout: float,
        start_timeout: float,
        users: int | None = None,
        handshake: Handshake | None = None,
    ):
        self._target = target
        self._expected = users
        self._lent = 0
        self._call_timeout = call_timeout
        self._start_timeout = start_timeout
        self._lock = threading.Lock()
        self._scratch: Scratch | None = None
        self._connection: Connection | None = None
        self._users: list[str] = []
        self._servers = 0
        self._ended_because: str | None = None
        #: The number of the server the handshake started (0: none).
        self._handshake_server = 0
        taken = handshake.take() if handshake is not None else None
        if taken is not None:
            self._connection, self._scratch = taken
            self._servers = self._handshake_server = 1
            if users == 0:
                self._end()

    def lend(self, scenario_id: str, cold: bool = False) -> Lease:
        """The server's turn for ``scenario_id``, waiting while another holds it;
        ``cold``: on a server no other scenario used."""
        self._lock.acquire()
        self._lent += 1
        return Lease(scenario_id, last=self._lent == self._expected, cold=cold)

    def connection(self, lease: Lease) -> Connection:
        """The running server for ``lease``: the one the previous user handed on, or a
        new one on a fresh state directory. ``HarnessStartError`` when it does not start."""
        if self._connection is not None and not self._connection.alive:
            # It died between two turns: the next user gets a fresh one, told why.
            self._end_before(lease, "the server lent before was no longer running")
        elif self._connection is not None and lease.cold and self._users:
            self._end_before(lease, f"{lease.scenario_id} needs a server no other scenario used")
        if self._connection is None:
            self._servers += 1
            self._users = []
            lease.started_here = True
            lease.fresh_start, self._ended_because = self._ended_because, None
            try:
                self._scratch = Scratch("retryproof-shared-")
                self._connection = self._target.connect(
                    self._scratch, call_timeout=self._call_timeout, start_timeout=self._start_timeout
                )
                self._connection.start()
            except BaseException:
                self._ended_because = f"the server started for {lease.scenario_id} did not start"
                self._end()
                raise
        connection = self._connection
        lease.server, lease.earlier = self._servers, tuple(self._users)
        lease.handshake = lease.server == self._handshake_server
        lease.marks = {
            "exchanges": len(connection.exchanges()),
            "survivors": len(connection.survivors()),
            "noise": len(connection.protocol_noise()),
            "processes": len(connection.exit_statuses()),
        }
        self._users.append(lease.scenario_id)
        return connection

    def _end_before(self, lease: Lease, why: str) -> None:
        """End the server before ``lease``'s turn, which starts a fresh one, told
        ``why``, and names what escaped the ended one's group."""
        ended = self._connection
        self._ended_because = why
        self._end()
        if ended is not None:
            lease.earlier_survivors = ended.survivors()

    def settle(self, lease: Lease, status: str) -> None:
        """End the turn's use of the server, once its ``status`` is known and before its
        result is written: the server goes on to the next user only after a pass by a
        live server the run still needs; otherwise it is ended now, with its state
        directory, so what its kill finds is in this scenario's evidence."""
        if lease.settled:
            return
        lease.settled = True
        connection = self._connection
        if connection is None or not lease.server:
            return
        restarted = len(connection.exit_statuses()) > lease.marks["processes"]
        if status == "passed" and connection.alive and not lease.last and not restarted:
            return
        if status != "passed":
            why = f"it ended {status}"
        elif not connection.alive:
            why = "it was no longer running"
        elif restarted:
            # No later user may meet a server another scenario restarted (still
            # recovering its keys, say) in one selection and an unrestarted one in another.
            why = "it restarted the server in its turn"
        else:
            why = "the run expected no later user"
        self._ended_because = f"the server {lease.scenario_id} used was ended because {why}"
        self._end()

    def give_back(self, lease: Lease) -> None:
        """Let the lock go; a turn that ended without being settled (the kit's own
        failure) ends the server as an error would."""
        try:
            self.settle(lease, "error")
        finally:
            self._lock.release()

    def close(self) -> None:
        """End the server, at the end of the run."""
        with self._lock:
            self._end()

    def _end(self) -> None:
        if self._connection is not None:
            self._connection.kill()
            self._connection = None
        if self._scratch is not None:
            self._scratch.remove()
            self._scratch = None
