"""What a scenario holds while it runs: its runtime, its calls, its evidence.

See ``retryproof.conformance.scenarios`` for how scenarios use it. The context owns every
harness process the scenario starts and ends them all when the scenario ends.
"""

from __future__ import annotations

import random
import string
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent import futures
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import Any, NoReturn

from retryproof.adapters.connection import Connection, HarnessStartError, Lost, Reply
from retryproof.adapters.loss import WITHHELD, Loss
from retryproof.conformance.catalogue import Entry
from retryproof.conformance.options import CALL_TIMEOUT_S
from retryproof.conformance.outcome import Call, FailureMark, Fault, FaultKind, HistoryEvent, classify
from retryproof.conformance.records import Shard
from retryproof.conformance.schedule import Turn
from retryproof.conformance.set_check import check_sets, task_id
from retryproof.conformance.sharing import Lease, SharedServer
from retryproof.conformance.validation import result_problem
from retryproof.spec.digest import TASK_FIELDS
from retryproof.spec.protocol import Hello


class ScenarioFailed(Exception):
    """The runtime broke the contract; the scenario is ``failed``."""


class NotApplicable(Exception):
    """The runtime legitimately took a path the scenario cannot judge (for example it
    finished an interrupted creation by itself at start-up)."""


class Unjudgeable(Exception):
    """The kit could not judge: the harness hung, crashed or answered garbage; the
    scenario is ``error``."""


class Skipped(Exception):
    """Something the scenario needs is missing at run time; never a pass."""


class CatalogueViolation(Exception):
    """The scenario's code broke the catalogue (it armed a failpoint its needs do not
    list): a kit bug, so the scenario ends in error, never passed."""


@dataclass(frozen=True)
class TaskSet:
    """The authoritative tasks (``list_tasks``) at one moment."""

    tasks: tuple[Mapping[str, Any], ...]

    @property
    def ids(self) -> set[str]:
        return {task_id(task) for task in self.tasks}

    @property
    def count(self) -> int:
        return len(self.tasks)

    def for_submission(self, submission_id: str | None) -> list[Mapping[str, Any]]:
        return [task for task in self.tasks if task.get("client_submission_id") == submission_id]

    def get(self, task_id: str) -> Mapping[str, Any] | None:
        return next((task for task in self.tasks if task.get("task_id") == task_id), None)


ConnectionFactory = Callable[[], Connection]

#: Ops that may add tasks (a raw line might be a request): before any of them, a
#: scenario's state directory is fresh and empty, so its first listing must be too.
STATE_CHANGING_OPS = frozenset({"write_task", "tamper", "(raw line)"})


@dataclass(frozen=True)
class Batch:
    """Calls sent together and not yet judged (``Context.submit_all``)."""

    connection: Connection
    began: float
    pending: tuple[tuple[str, dict[str, Any], futures.Future], ...]
    #: When each call was sent and when its answer arrived (None: not yet), by
    #: ``time.perf_counter``, so each call of the batch has its own bar in a timeline.
    sent: tuple[float, ...] = ()
    answered: list[float | None] = field(default_factory=list)


def _while_answering(pending: Iterable[futures.Future], timeout: float) -> None:
    """Wait for ``pending`` while their answers keep coming, each within ``timeout`` of
    the one before."""
    waiting = set(pending)
    while waiting:
        answered, waiting = futures.wait(waiting, timeout=timeout, return_when=futures.FIRST_COMPLETED)
        if not answered:
            return


class Context:
    """A scenario's handle on the runtime. Created by the runner, one per scenario."""

    def __init__(
        self,
        entry: Entry,
        connect: ConnectionFactory,
        hello: Hello,
        seed: int,
        concurrency: int,
        call_timeout: float = CALL_TIMEOUT_S,
        shard: Shard | None = None,
        turn: Turn | None = None,
        shared: tuple[SharedServer, Lease] | None = None,
        takes: bool = False,
    ):
        self.entry = entry
        #: The run's shared server and this scenario's turn on it (``sharing.py``); None:
        #: it starts its own, on its own state directory.
        self._shared = shared
        #: On the shared server, it may also end and restart it (``takes_server``).
        self._takes = takes
        #: The processes the shared server's connection ran before this scenario's turn:
        #: its calls and faults number the processes from its own first, as on its own server.
        self._earlier_processes = 0
        #: The scenario's turn on the machine; None unless it is declared ``alone``.
        self._turn = turn
        #: ``--shard K/N``: a scenario split across shards (FUZZ-MODEL) does its share.
        self.shard = shard
        self.hello = hello
        self.seed = seed
        self.concurrency = concurrency
        #: The run's --call-timeout; ``concurrently`` spends it once per batch.
        self.call_timeout = call_timeout
        #: Environment variables a reproduction of this scenario needs (``--only ID``
        #: alone would not choose the same behaviour); the runner puts them in the
        #: reproduce line.
        self.reproduce_env: dict[str, str] = {}
        #: Seeded per scenario, so ``--only ID --seed N`` replays the same choices.
        self.rng = random.Random(f"{seed}/{entry.id}")
        self.evidence: dict[str, Any] = {}
        #: Every call and every fault the kit caused, in order (the report's calls).
        self.history: list[HistoryEvent] = []
        #: The history's times are offsets from this moment (the scenario's start).
        self._began = time.perf_counter()
        self.connections: list[Connection] = []
        self._connect = connect
        self._calls_lock = threading.Lock()
        #: Every client_submission_id the scenario used, in first-use order.
        self.submission_ids: list[str] = []

    # -- what the runtime declares ------------------------------------------------

    def has(self, capability: str) -> bool:
        return capability in self.hello.capabilities

    def has_failpoint(self, name: str) -> bool:
        return name in self.hello.failpoints

    # -- processes ----------------------------------------------------------------

    def alone(self) -> AbstractContextManager[None]:
        """``with ctx.alone():`` the block runs with no other scenario beside it (under
        ``--jobs N``; with one job it always does). Only a scenario declared with
        ``@scenario(..., alone=True)`` may ask: those start first, so the block never
        waits for a long scenario to end. Not re-entrant."""
        if self._turn is None:
            raise CatalogueViolation(f"{self.entry.id} asks to run alone but its @scenario does not say alone=True")
        return self._turn.alone()

    @property
    def conn(self) -> Connection:
        """The main connection (the first one started)."""
        if not self.connections:
            raise RuntimeError("call ctx.start() first")
        return self.connections[0]

    def _own_process(self, what: str, taken: bool = False) -> None:
        """A scenario on a shared server may not ``what``: its ``@scenario`` promised
        it needs a fresh key only (a kit bug, so the scenario ends in error). One that
        ``takes_server`` may, where ``taken`` says the shared server allows it (an end
        and a restart on its state, never a process of its own beside it)."""
        if self._shared is not None and not (taken and self._takes):
            declared = "takes_server" if self._takes else "shares_server"
            raise CatalogueViolation(f"{self.entry.id} shares a server ({declared}=True) but {what}")

    def unstarted(self) -> Connection:
        """The main connection, made but not started: for a scenario that runs the
        runtime's command itself (under strace) and needs what it would run, not a start."""
        self._own_process("runs the runtime's command itself")
        if not self.connections:
            self.connections.append(self._connect())
        return self.conn

    def start(self, failpoints: Mapping[str, str] | None = None) -> Connection:
        """Start the main harness process on the scenario's state directory, with
        ``failpoints`` armed: only failpoints the scenario's ``needs`` list
        (PROTOCOL-R16), so that a runtime without one skips the scenario instead of
        being judged on a window it never declared."""
        failpoints = dict(failpoints or {})
        undeclared = sorted(set(failpoints) - {*self.entry.failpoints, *self.entry.uses_failpoints})
        if undeclared:
            raise CatalogueViolation(
                f"{self.entry.id} arms {', '.join(undeclared)}, which its needs (or uses_failpoints) in "
                "spec/retryproof.yaml do not list"
            )
        if self._shared is not None and failpoints:
            # Not even on a restart of its turn: it would hand on a server with them armed.
            self._own_process("arms failpoints")
        if self._shared is not None and not self.connections:
            return self._take_shared()
        self._own_process("starts the runtime a second time", taken=True)
        if not self.connections:
            self.connections.append(self._connect())
        restart = bool(self.conn.exit_statuses())
        began = time.perf_counter()
        try:
            self.conn.start(failpoints)
        except HarnessStartError as exc:
            raise Unjudgeable(f"the harness did not start: {exc.message}") from None
        if restart or failpoints:
            self._fault("start", self.conn, began, failpoints)
        return self.conn

    def _take_shared(self) -> Connection:
        """``start`` on the run's shared server: the running one, or a new one."""
        assert self._shared is not None  # the caller checked
        server, lease = self._shared
        try:
            self.connections.append(server.connection(lease))
        except HarnessStartError as exc:
            # The failed server is ended with the lease's turn, not kept among this
            # scenario's connections: its stderr goes into the reason instead.
            stderr = f"; its stderr ended: {exc.stderr.strip()[-2000:]}" if exc.stderr.strip() else ""
            raise Unjudgeable(f"the harness did not start: {exc.message}{stderr}") from None
        self._earlier_processes = lease.marks["processes"] - 1
        self.evidence["shared_server"] = lease.evidence()
        return self.conn

    def spawn(self, count: int) -> list[Connection]:
        """Start ``count`` more harness processes on the same state directory
        (for the ``multiprocess`` capability)."""
        self._own_process("starts more processes")
        extra = [self._connect() for _ in range(count)]
        self.connections.extend(extra)
        failures: list[str] = []

        def start(connection: Connection) -> None:
            try:
                connection.start()
            except HarnessStartError as exc:
                failures.append(exc.message)

        threads = [threading.Thread(target=start, args=(connection,)) for connection in extra]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failures:
            raise Unjudgeable(f"{len(failures)} of {count} extra harness processes did not start: {failures[0]}")
        return extra

    def kill(self, connection: Connection | None = None) -> None:
        """SIGKILL the process group of the main (or given) connection."""
        self._own_process("kills it", taken=True)
        connection = connection or self.conn
        began = time.perf_counter()
        connection.kill()
        self._fault("kill", connection, began)

    def restart(self, failpoints: Mapping[str, str] | None = None, graceful: bool = False) -> Connection:
        """End the main process (SIGKILL, or ``shutdown`` when graceful) and start it
        again on the same state directory, with ``failpoints`` armed or none."""
        self.stop() if graceful else self.kill()
        return self.start(failpoints)

    def stop(self) -> None:
        self._own_process("stops it", taken=True)
        began = time.perf_counter()
        self.conn.stop()
        self._fault("shutdown", self.conn, began)

    def _fault(
        self,
        kind: FaultKind,
        connection: Connection,
        began: float,
        failpoints: Mapping[str, str] | None = None,
    ) -> None:
        """Record a fault event in the history, beside the calls it interrupts, timed
        from ``began`` (before the kit acted) to now (it is done)."""
        fault = Fault(
            kind,
            self._process(connection),
            dict(failpoints or {}),
            self._offset(began),
            self._offset(time.perf_counter()),
            self._connection_number(connection),
        )
        with self._calls_lock:
            self.history.append(fault)

    def _offset(self, moment: float) -> float:
        return moment - self._began

    def adopt(self, events: Iterable[HistoryEvent], began: float) -> None:
        """Add to the history events recorded elsewhere, timed from ``began``
        (``time.perf_counter``): FUZZ-MODEL's minimal history as its engine replayed it."""
        shift = self._offset(began)
        with self._calls_lock:
            self.history.extend(_shifted(event, shift) for event in events)

    def _process(self, connection: Connection) -> int:
        """Which of its runtime's processes ``connection`` is on: 1 for its first start
        in this scenario (a shared server's earlier ones are not counted)."""
        earlier = self._earlier_processes if self.connections and connection is self.connections[0] else 0
        return len(connection.exit_statuses()) - earlier

    def _connection_number(self, connection: Connection) -> int:
        return next((n for n, known in enumerate(self.connections, 1) if known is connection), 1)

    def close(self) -> None:
        """End every process the scenario started, and put in the evidence what the
        harnesses left behind: processes that outlived them, protocol noise, the first
        missed deadline, and a binding's raw exchanges. Safe to call more than once.
        A shared server runs on (the runner hands it back); only what this scenario's
        lease saw of it is its evidence."""
        marks = self._shared[1].marks if self._shared is not None else {}
        if self._shared is None:
            for connection in self.connections:
                connection.kill()
        survivors = [entry for connection in self.connections for entry in connection.survivors()]
        noise = [line for connection in self.connections for line in connection.protocol_noise()]
        missed = next((c.missed_deadline for c in self.connections if c.missed_deadline), None)
        exchanges = [item for connection in self.connections for item in connection.exchanges()]
        survivors = survivors[marks.get("survivors", 0) :]
        noise = noise[marks.get("noise", 0) :]
        exchanges = exchanges[marks.get("exchanges", 0) :]
        for key, value in (
            ("survivors", survivors),
            ("protocol_noise", noise),
            ("missed_deadline", missed),
            ("exchanges", exchanges),
        ):
            if value:
                self.evidence[key] = value

    def stderr_text(self) -> str:
        return "\n".join(connection.stderr_text() for connection in self.connections)

    # -- calls --------------------------------------------------------------------

    def call(
        self,
        op: str,
        args: Mapping[str, Any] | None = None,
        *,
        connection: Connection | None = None,
        timeout: float | None = None,
        args_json: str | None = None,
        schema_checked: bool = True,
    ) -> Call:
        """One call, recorded and classified; a success is validated against the op's
        result schema (a violation fails the scenario), unless not ``schema_checked``:
        a scenario that sends what must be refused judges a success itself, in words
        about what the runtime did. ``args_json`` sends the args as that exact JSON text
        (``args`` then only describes the call in evidence)."""
        return self._call(op, args, connection or self.conn, timeout, args_json, schema_checked=schema_checked)

    def _call(
        self,
        op: str,
        args: Mapping[str, Any] | None,
        connection: Connection,
        timeout: float | None = None,
        args_json: str | None = None,
        lane: int = 0,
        schema_checked: bool = True,
    ) -> Call:
        args = dict(args or {})
        began = time.perf_counter()
        reply = connection.call(op, args, timeout, args_json=args_json)
        return self._record(op, args, reply, began, time.perf_counter(), connection, lane, schema_checked)

    def concurrently(
        self, requests: Sequence[tuple[str, Mapping[str, Any]]], *, connection: Connection | None = None
    ) -> list[Call]:
        """Pipeline all ``requests`` on one connection before reading any answer.
        One call timeout covers the whole batch, so a hung harness costs one timeout,
        not one per call."""
        return self.collect(self.submit_all(requests, connection=connection))

    def submit_all(
        self, requests: Sequence[tuple[str, Mapping[str, Any]]], *, connection: Connection | None = None
    ) -> Batch:
        """Send ``requests`` pipelined and return at once, so the scenario can act while
        they are in flight (the kill nemesis SIGKILLs the runtime); ``collect`` judges them."""
        connection = connection or self.conn
        began = time.perf_counter()
        pending, sent = [], []
        answered: list[float | None] = [None] * len(requests)

        def arrived(index: int) -> Callable[[futures.Future], None]:
            return lambda _: answered.__setitem__(index, time.perf_counter())

        for index, (op, args) in enumerate(requests):
            sent.append(time.perf_counter())
            future = connection.submit(op, args)
            future.add_done_callback(arrived(index))
            pending.append((op, dict(args), future))
        return Batch(connection, began, tuple(pending), tuple(sent), answered)

    def collect(self, batch: Batch, lane: int | None = None, *, in_turn: bool = False) -> list[Call]:
        """The recorded calls of a batch, within one call timeout for all of them, or,
        ``in_turn``, while their answers keep coming, each within a call timeout of the
        one before; each call the caller at its position in the batch (its lane; all on
        ``lane`` when given: one caller's pipeline), timed from its send to its answer
        (or to the batch's deadline). Why ``in_turn``: a runtime that works on one call
        at a time answers the last of n pipelined calls n calls' work after sending,
        each call a fraction of the bound (KILL-NEMESIS's retries)."""
        pending = [future for _, _, future in batch.pending]
        if in_turn:
            _while_answering(pending, self.call_timeout)
        else:
            futures.wait(pending, timeout=self.call_timeout)
        heard = [moment for moment in batch.answered if moment is not None]
        missed = "of the batch's last answer" if in_turn and heard else "(one deadline for the whole batch)"
        replies = [
            (op, args, self._by_deadline(batch.connection, future, missed)) for op, args, future in batch.pending
        ]
        given_up = time.perf_counter()
        return [
            self._record(
                op, args, reply, sent, given_up if answered is None else answered, batch.connection, lane or position
            )
            for position, ((op, args, reply), sent, answered) in enumerate(
                zip(replies, batch.sent, batch.answered, strict=True), 1
            )
        ]

    def _by_deadline(self, connection: Connection, future: futures.Future, missed: str) -> Reply:
        """The reply of a batch's call once the batch deadline has passed: its answer,
        or ``Lost``, saying which deadline it ``missed`` (the adapter's own wait would
        otherwise start a new timeout)."""
        answered = future.done()
        # also lets the adapter forget an unanswered call, and name the deadline it missed
        reply = connection.wait(future, 0, allowed_s=self.call_timeout)
        if answered or not isinstance(reply, Lost):
            return reply
        return Lost(f"no response within {self.call_timeout:g}s {missed}")

    def in_parallel(
        self, connections: Sequence[Connection], requests: Sequence[tuple[str, Mapping[str, Any]]]
    ) -> list[Call]:
        """The same ``requests`` on each connection at once (pipelined on it, on the
        connection's lane), one thread per connection, released together by a barrier.
        Every call is judged: a call whose judging raised (a result that violates its
        schema) ends the scenario as it would on the main thread."""
        barrier = threading.Barrier(len(connections))
        calls: list[list[Call] | None] = [None] * len(connections)
        raised: list[BaseException | None] = [None] * len(connections)

        def one(index: int, connection: Connection) -> None:
            try:
                barrier.wait()
                calls[index] = self.collect(self.submit_all(requests, connection=connection), lane=index + 1)
            except BaseException as exc:  # re-raised on the scenario's thread below
                raised[index] = exc

        threads = [threading.Thread(target=one, args=pair) for pair in enumerate(connections)]
        try:
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        except BaseException:
            # Interrupted (SIGINT/SIGTERM) while starting them: the callers already at the
            # barrier would wait forever for partners that never come, and keep the kit alive.
            barrier.abort()
            raise
        failure = next((exc for exc in raised if exc is not None), None)
        if failure is not None:
            raise failure
        done = [pipeline for pipeline in calls if pipeline is not None]
        if len(done) != len(calls):
            raise RuntimeError(f"in_parallel: {len(calls) - len(done)} of {len(calls)} callers left no result")
        return [call for pipeline in done for call in pipeline]

    def send_line(self, raw: bytes) -> Call:
        """Send a raw line that is not a request; the answer must have id null."""
        began = time.perf_counter()
        reply = self.conn.send_line(raw)
        line = {"line": raw[:200].decode("utf-8", "replace")}
        return self._record("(raw line)", line, reply, began, time.perf_counter(), self.conn)

    def write_task(
        self,
        submission_id: str | None,
        task: Any,
        invocation: Mapping[str, Any] | None = None,
        *,
        connection: Connection | None = None,
    ) -> Call:
        """``write_task``; a None ``submission_id`` is the legacy path."""
        return self.call("write_task", self.write_task_args(submission_id, task, invocation), connection=connection)

    def lose_response(self, submission_id: str, task: Any, loss: Loss = WITHHELD) -> tuple[Call, float | None] | None:
        """``write_task`` whose answer is lost for real as ``loss`` says
        (``Connection.lose_response``), recorded as the ``info`` the caller saw, with the
        seconds until its effect was listed when the connection saw that; None when
        the connection cannot lose an answer."""
        args = self.write_task_args(submission_id, task)
        began = time.perf_counter()
        self._own_process("loses an answer (a stdio server's caller goes away)", taken=True)
        reply = self.conn.lose_response("write_task", args, loss)
        if reply is None:
            return None
        ended = time.perf_counter()
        call = self._record("write_task", args, reply, began, ended, self.conn)
        if loss.kill:
            self._fault("kill", self.conn, ended)
        return call, reply.effect_listed_s if isinstance(reply, Lost) else None

    def effect_of(self, submission_id: str, within: float) -> Mapping[str, Any] | None:
        """Poll ``list_tasks`` until ``submission_id`` has a task, for at most
        ``within`` seconds; the task, or None when none appeared."""
        deadline = time.monotonic() + within
        while True:
            owned = self.tasks().for_submission(submission_id)
            if owned or time.monotonic() > deadline:
                return owned[0] if owned else None
            time.sleep(0.05)

    def write_task_args(
        self, submission_id: str | None, task: Any, invocation: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        args: dict[str, Any] = {"task": task}
        if submission_id is not None:
            args["client_submission_id"] = submission_id
            if submission_id not in self.submission_ids:
                self.submission_ids.append(submission_id)
        if invocation is not None:
            args["invocation"] = dict(invocation)
        return args

    def _record(
        self,
        op: str,
        args: Mapping[str, Any],
        reply,
        began: float,
        ended: float,
        connection: Connection,
        lane: int = 0,
        schema_checked: bool = True,
    ) -> Call:
        """Classify and record a call sent at ``began`` whose answer came (or was given
        up on) at ``ended`` (``time.perf_counter``)."""
        process = self._process(connection)
        call = replace(
            classify(op, args, reply, ended - began, process),
            start_s=self._offset(began),
            lane=lane,
            connection=self._connection_number(connection),
        )
        problem = result_problem(op, call.result) if call.result is not None and schema_checked else None
        if problem:
            # A garbled answer vouches for nothing, not even a rejection: indeterminate.
            call = replace(call, kind="info", message=problem)
        with self._calls_lock:
            self.history.append(call)
        if problem:
            self._blame(call, ScenarioFailed(problem))
        return call

    # -- authoritative state ------------------------------------------------------

    def tasks(
        self, label: str | None = None, *, connection: Connection | None = None, schema_checked: bool = True
    ) -> TaskSet:
        """The tasks in durable state (``list_tasks``); recorded under ``label``. Not
        ``schema_checked``: tasks under keys the schema refuses are listed too."""
        # A shared server's state directory holds the earlier users' tasks (``sharing.py``).
        inherited = self._shared is not None and self._shared[1].inherits
        fresh = not inherited and not any(
            isinstance(event, Call) and (event.op in STATE_CHANGING_OPS or event.op == "list_tasks")
            for event in self.history
        )
        call = self.call("list_tasks", connection=connection, schema_checked=schema_checked)
        snapshot = TaskSet(tuple(self.expect_ok(call, "list_tasks").get("tasks", ())))
        if fresh:
            self.check(
                not snapshot.tasks,
                f"state not isolated: the first list_tasks on a fresh, empty RETRYPROOF_STATE_DIR listed "
                f"{snapshot.count} task(s) ({', '.join(sorted(snapshot.ids)[:5])}); "
                "a harness keeps all its durable state in that directory",
            )
        if label:
            self.evidence.setdefault("tasks", {})[label] = {
                "count": snapshot.count,
                "task_ids": sorted(snapshot.ids),
            }
        return snapshot

    def receipt(self, submission_id: str, label: str, stale_after_s: float = 3600.0) -> Mapping[str, Any] | None:
        """The runtime's diagnostics of one receipt, recorded as evidence under
        ``label``; None when the runtime does not declare ``diagnose``."""
        if not self.has("diagnose"):
            return None
        call = self.call("diagnose", {"client_submission_id": submission_id, "stale_after_s": stale_after_s})
        result = self.expect_ok(call, "diagnose")
        self.evidence.setdefault("receipts", {})[label] = dict(result)
        return result

    def diagnose(self, submission_id: str, label: str, stale_after_s: float = 3600.0) -> Mapping[str, Any]:
        """``receipt`` for a scenario that reads diagnostics: its needs include
        ``diagnose``, so the runner skipped it for a runtime without."""
        found = self.receipt(submission_id, label, stale_after_s)
        if found is None:
            raise Unjudgeable("this scenario reads diagnostics, but the runtime does not declare diagnose")
        return found

    # -- judging ------------------------------------------------------------------

    def check(self, condition: bool, message: str) -> None:
        """Fail the scenario with ``message`` unless ``condition`` holds."""
        if not condition:
            with self._calls_lock:
                last = next((event for event in reversed(self.history) if isinstance(event, Call)), None)
            if last is None:
                raise ScenarioFailed(message)
            self._blame(last, ScenarioFailed(message), "before")

    def expect_ok(self, call: Call, what: str) -> Mapping[str, Any]:
        """The result of a success, or: a lost call makes the scenario ``error`` (nothing to judge),
        a structured error or a conflict makes it ``failed``."""
        if call.kind == "ok" and call.result is not None:
            return call.result
        if not call.answered:
            self._blame(call, Unjudgeable(f"{what}: no answer ({call.message})"))
        if call.result is not None:
            self._blame(
                call, ScenarioFailed(f"{what}: expected success, got conflict {call.summary().get('conflict_reason')}")
            )
        self._blame(
            call, ScenarioFailed(f"{what}: expected success, got error {call.code}: {(call.message or '')[:200]}")
        )

    def expect_disposition(self, call: Call, disposition: str, what: str) -> Mapping[str, Any]:
        """The call answered this disposition; ``conflict`` also needs its reason via
        ``expect_conflict``."""
        if not call.answered:
            self._blame(call, Unjudgeable(f"{what}: no answer ({call.message})"))
        if call.result is None or call.disposition != disposition:
            self._blame(call, ScenarioFailed(f"{what}: expected disposition {disposition}, got {_describe(call)}"))
        return call.result

    def expect_conflict(self, call: Call, reason: str, what: str) -> Mapping[str, Any]:
        result = self.expect_disposition(call, "conflict", what)
        got = (result.get("conflict") or {}).get("reason")
        if got != reason:
            self._blame(call, ScenarioFailed(f"{what}: expected conflict {reason}, got conflict {got}"))
        return result

    def expect_error(self, call: Call, codes: str | Iterable[str], what: str) -> None:
        codes = {codes} if isinstance(codes, str) else set(codes)
        if not call.answered:
            self._blame(call, Unjudgeable(f"{what}: no answer ({call.message})"))
        if call.code not in codes:
            self._blame(
                call, ScenarioFailed(f"{what}: expected error {' or '.join(sorted(codes))}, got {_describe(call)}")
            )

    def _blame(self, call: Call, failure: Exception, mark: FailureMark = "about") -> NoReturn:
        """Raise ``failure``, with ``call`` marked in the history: the call it is about,
        or the last call ``before`` it (report.html's timeline outlines it and links the
        reason to it). Only the first failure is the scenario's: evidence gathered after
        it marks nothing."""
        with self._calls_lock:
            marked = any(isinstance(event, Call) and event.failure for event in self.history)
            if not marked:
                index = next((n for n, event in enumerate(self.history) if event is call), None)
                if index is not None:
                    self.history[index] = replace(call, failure=mark)
        raise failure

    def check_tasks(self, before: TaskSet, after: TaskSet, new: int) -> None:
        """The set checker (``check_sets``) on the scenario's whole history, then the
        scenario's own expectation: exactly ``new`` tasks appeared."""
        with self._calls_lock:
            history = list(self.history)
        found = check_sets(history, before.tasks, after.tasks)
        self.evidence["set_check"] = {**found.evidence(), "expected_new": new}
        for problem in found.problems():
            self.check(False, problem)
        self.check(len(found.added) == new, f"expected {new} new task(s) in list_tasks, found {len(found.added)}")

    def not_applicable(self, reason: str) -> NoReturn:
        raise NotApplicable(reason)

    def skip(self, reason: str) -> NoReturn:
        raise Skipped(reason)

    def note(self, key: str, value: Any) -> None:
        """Attach a JSON-ready fact to the scenario's evidence."""
        self.evidence[key] = value

    # -- seeded data ----------------------------------------------------------------

    def submission_id(self) -> str:
        """A fresh, valid client_submission_id from the scenario's seeded stream."""
        suffix = "".join(self.rng.choice(string.ascii_lowercase + string.digits) for _ in range(10))
        return f"rp-{self.entry.id.lower()}-{suffix}"

    @property
    def task_model(self) -> tuple[str, ...]:
        """The write-task fields the runtime's tasks have (``Connection.task_model``)."""
        return self.conn.task_model

    def task(self, **fields: Any) -> dict[str, Any]:
        """A plausible task with seeded contents; ``fields`` override. It holds only
        the runtime's task model: a bound tool with three fields gets those three."""
        word = lambda: "".join(self.rng.choice(string.ascii_lowercase) for _ in range(self.rng.randint(3, 9)))  # noqa: E731
        task: dict[str, Any] = {
            "sender": self.rng.choice(["PM", "ADMIN", "QA"]),
            "recipient": self.rng.choice(["DEV", "OPS", "SEC"]),
            "subject": f"{word().capitalize()} {word()} {word()}",
            "body": f"{word()} {word()}\n{word()} café {word()}",
            "priority": self.rng.choice(["P0", "P1", "P2", None]),
            "thread_key": f"thread-{self.rng.randrange(10**6)}",
            "references": [f"REF-{self.rng.randrange(1000)}" for _ in range(self.rng.randint(0, 2))],
        }
        model = self.task_model
        if len(model) < len(TASK_FIELDS):
            # A tool that takes these must see them; the full model keeps its seven
            # drawn fields, so a harness run replays as before.
            extra: dict[str, Any] = {
                "parent": f"TASK-{self.rng.randrange(10**6)}",
                "risk_level": self.rng.choice(["low", "high"]),
                "depends_on": [f"TASK-{self.rng.randrange(10**6)}"],
            }
            task.update({name: value for name, value in extra.items() if name in model})
        task.update(fields)
        return {name: value for name, value in task.items() if name in model}


def _shifted(event: HistoryEvent, shift: float) -> HistoryEvent:
    """The event with its times ``shift`` seconds later (untimed events as they are)."""
    if isinstance(event, Fault):
        if event.start_s is None or event.end_s is None:
            return event
        return replace(event, start_s=event.start_s + shift, end_s=event.end_s + shift)
    return event if event.start_s is None else replace(event, start_s=event.start_s + shift)


def _describe(call: Call) -> str:
    if call.result is not None:
        if call.disposition is None:  # not a creation result: say what the success held
            state = call.result.get("state") or call.result.get("outcome")
            return "ok" + (f" ({state})" if isinstance(state, str) else "")
        reason = (
            (call.result.get("conflict") or {}).get("reason")
            if isinstance(call.result.get("conflict"), Mapping)
            else None
        )
        return f"disposition {call.disposition}" + (f" ({reason})" if reason else "")
    if call.code is not None:
        return f"error {call.code}: {(call.message or '')[:200]}"
    return f"no answer ({call.message})"
