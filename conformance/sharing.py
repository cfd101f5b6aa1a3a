"""One server for the scenarios that need a fresh key, not a fresh process.

A scenario declared ``@scenario(ID, shares_server=True)`` starts the runtime once, with
no failpoint, never kills, stops or restarts it, and judges only the calls and keys it
made itself (its keys are its own: ``Context.submission_id`` names the scenario). Such
scenarios can take turns on one server instead of starting one each: an MCP server's
start costs about as much CPU as everything else such a scenario does.

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
  is the server's tail, which may begin in an earlier user's turn. Processes that escape
  a shared server's group are found only when it is killed, after its last user's result
  is written, so no result names them yet (a known gap: a server of its own names them).

A server that inherits state skips only the check that its first listing is empty (the
state directory is not fresh): the first scenario on each server, and every scenario that
starts its own, still makes it.
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
    #: Where this scenario's share of the connection's exchanges, survivors and noise begins.
    marks: dict[str, int] = field(default_factory=dict)

    def evidence(self) -> dict[str, Any]:
        found: dict[str, Any] = {"server": self.server, "used_before_by": list(self.earlier)}
        found["started_by_this_scenario"] = self.started_here
        if self.fresh_start:
            found["fresh_start"] = self.fresh_start
        return found


class SharedServer:
    """The server the sharing scenarios of one run take in turn, on its own state
    directory. ``lend`` takes the lock, ``give_back`` lets it go."""

    def __init__(self, target: Target, *, call_timeout: float, start_timeout: float):
        self._target = target
        self._call_timeout = call_timeout
        self._start_timeout = start_timeout
        self._lock = threading.Lock()
        self._scratch: Scratch | None = None
        self._connection: Connection | None = None
        self._users: list[str] = []
        self._servers = 0
        self._ended_because: str | None = None

    def lend(self, scenario_id: str) -> Lease:
        """The server's turn for ``scenario_id``, waiting while another holds it."""
        self._lock.acquire()
        return Lease(scenario_id)

    def connection(self, lease: Lease) -> Connection:
        """The running server for ``lease``: the one the previous user handed on, or a
        new one on a fresh state directory. ``HarnessStartError`` when it does not start."""
        if self._connection is not None and not self._connection.alive:
            # It died between two turns: the next user gets a fresh one, told why.
            self._ended_because = "the server the earlier scenarios used was no longer running"
            self._end()
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
        lease.marks = {
            "exchanges": len(connection.exchanges()),
            "survivors": len(connection.survivors()),
            "noise": len(connection.protocol_noise()),
        }
        self._users.append(lease.scenario_id)
        return connection

    def give_back(self, lease: Lease, status: str) -> None:
        """End the lease: the server goes on to the next user only after a pass by a
        live server; otherwise it is ended, with its state directory."""
        try:
            connection = self._connection
            if connection is not None and lease.server and not (status == "passed" and connection.alive):
                why = "it was no longer running" if status == "passed" else f"it ended {status}"
                self._ended_because = f"the server {lease.scenario_id} used was ended because {why}"
                self._end()
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
