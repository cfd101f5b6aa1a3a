"""The process adapter: any harness command line, spoken to over stdin/stdout.

Hostile-harness safety is the point of this module. The harness runs in its own
process group (so SIGKILL reaches its children too) and in a scratch working
directory; a reader thread turns stdout lines into replies and a second thread keeps a
bounded tail of stderr; every wait has a timeout; an overlong line, a closed pipe or a
killed process turns the calls in flight into ``Lost`` instead of a hang. The pipe
threads wait in ``poll`` beside a wake-up pipe (``pipes.ChildPipes``), so a stop never depends on the harness
closing its end: a process that escaped the group (``setsid``) and still holds a pipe
is named in ``survivors()``, never waited on. The harness is the process the kit
started: when it exits, the harness has ended, whatever its children hold (a shell
wrapper's ``sleep 38 &``, node's stdio 'inherit'): its group is ended and the calls in
flight are lost to its end (``watch_leader``). A connection that missed a deadline gets
nothing more (``missed_deadline``): a silent harness costs one timeout, not one per call.
The groups and scratch directories are ``process_groups``'s, shared with the binding's
servers, so an interrupted run ends them all.
"""

from __future__ import annotations

import functools
import json
import os
import queue
import shlex
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, InvalidStateError
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from retryproof.adapters.connection import CALL_TIMEOUT_S, START_TIMEOUT_S, Connection, HarnessStartError, Lost, Reply
from retryproof.adapters.pipes import ChildPipes, LineTooLong
from retryproof.adapters.process_groups import (
    PIPE_GRACE_S,
    STATE_DIR_ENV,
    Scratch,
    StderrTail,
    WrappedCommand,
    forget_group,
    kill_group,
    start_group,
    wait_exit,
    watch_leader,
)
from retryproof.spec.protocol import (
    PROTOCOL,
    Failure,
    ProtocolError,
    Request,
    Success,
    decode_response,
    format_failpoints,
)

FAILPOINTS_ENV = "RETRYPROOF_FAILPOINTS"
#: Noise lines kept for the evidence per connection.
NOISE_LIMIT = 50


def anchored(command: Sequence[str], base: str) -> list[str]:
    """``command`` with every relative word that names an existing path under ``base``
    made absolute: the harness runs in a scratch directory, yet ``node harness.js``
    and ``./harness`` still mean the files the user named. The program itself is
    looked up on PATH unless it holds a slash, so only then is it a path."""

    def path_like(index: int, word: str) -> bool:
        if not word or word.startswith("-") or os.path.isabs(word) or (index == 0 and "/" not in word):
            return False
        return os.path.exists(os.path.join(base, word))

    return [os.path.join(base, word) if path_like(index, word) else word for index, word in enumerate(command)]


def encode_request(request: Request) -> bytes:
    """One request line. Raw UTF-8 when possible; a string that is not Unicode (a lone
    surrogate the kit sends on purpose) can only travel as a JSON escape."""
    message = request.to_json()
    try:
        return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        return json.dumps(message, ensure_ascii=True, separators=(",", ":")).encode("ascii") + b"\n"


class _Process:
    """One harness process and its calls in flight."""

    def __init__(self, popen: subprocess.Popen):
        self.popen = popen
        assert popen.stdin is not None and popen.stdout is not None and popen.stderr is not None
        self.stdin, self.stdout, self.stderr = popen.stdin, popen.stdout, popen.stderr
        self.pipes = ChildPipes((popen.stdin, popen.stdout, popen.stderr))
        self.lock = threading.Lock()
        self.pending: dict[int, Future] = {}
        self.raw_waiters: list[Future] = []  # send_line calls, answered with id null
        self.closed = False
        self.killed_by_kit = False
        # Lines for the harness's stdin. A caller writes its line itself when nothing is
        # queued before it and the pipe takes it whole (most calls: a hand-over to
        # another thread per call cost a wake-up, and a wait for the GIL while the
        # kit's other threads compute); what the pipe does not take goes to one writer
        # thread, so a harness that stops reading fills the pipe and blocks that
        # thread, never a caller (whose wait is bounded by its timeout) or the reader
        # threads. ``queued``: lines in ``outbox`` or being written by that thread.
        self.outbox: queue.SimpleQueue[tuple[Future, bytes] | None] = queue.SimpleQueue()
        self.queued = 0
        self.reap_lock = threading.Lock()
        self.reaped = False
        self.closed_event = threading.Event()  # set once ``_close`` has judged the calls in flight

    def in_flight(self) -> list[Future]:
        return [*self.pending.values(), *self.raw_waiters]


class ProcessConnection(Connection):
    """Runs ``command`` with the state directory in its environment.

    ``call_timeout`` bounds each call, ``start_timeout`` the handshake, and
    ``max_line_bytes`` one response line; stderr keeps its last ``stderr_limit`` bytes.
    The harness runs in ``work_dir`` (default: the state directory's parent's
    ``work`` folder when it is a ``Scratch``, else a scratch folder of its own).
    Relative paths on the command line are resolved against the kit's working
    directory, which is also put on PYTHONPATH (as ``python -m`` would have it).
    Evidence shows the command as ``shown`` (default: as given, before that
    resolution), so reports carry no paths of the machine that ran them.
    """

    def __init__(
        self,
        command: Sequence[str],
        state_dir: str,
        *,
        call_timeout: float = CALL_TIMEOUT_S,
        start_timeout: float = START_TIMEOUT_S,
        max_line_bytes: int = 1 << 20,
        stderr_limit: int = 64 << 10,
        stop_timeout: float = 5.0,
        work_dir: str | None = None,
        shown: Sequence[str] | None = None,
        wrapped: bool = False,
    ):
        self.invoked_from = os.getcwd()
        self.command = anchored(command, self.invoked_from)
        self.shown = tuple(command if shown is None else shown)
        #: ``command`` runs the harness under a wrapper (strace, for CRASH-POINTS): the
        #: handshake then also ends once the wrapper's child has (``WrappedCommand``).
        self.wrapped = wrapped
        self.state_dir = state_dir
        self.work_dir = work_dir
        self.call_timeout = call_timeout
        self.start_timeout = start_timeout
        self.max_line_bytes = max_line_bytes
        self.stop_timeout = stop_timeout
        self.hello: Mapping[str, Any] | None = None
        self.missed_deadline: str | None = None
        #: Lines the harness wrote that answer nothing (protocol noise), for evidence.
        self.noise: list[str] = []
        self._stderr = StderrTail(stderr_limit)
        self._processes: list[_Process] = []
        self._next_id = 0
        self._id_lock = threading.Lock()
        self._own_work: Scratch | None = None
        self._survivors: list[dict[str, Any]] = []

    # -- lifecycle ---------------------------------------------------------------

    @property
    def _current(self) -> _Process | None:
        return self._processes[-1] if self._processes else None

    @property
    def alive(self) -> bool:
        current = self._current
        return current is not None and not current.closed and current.popen.poll() is None

    def start(self, failpoints: Mapping[str, str] | None = None) -> Mapping[str, Any]:
        if self.alive:
            raise RuntimeError("the harness is already running; kill or stop it first")
        if self.missed_deadline:
            raise HarnessStartError(
                f"not started again: the harness missed an earlier deadline ({self.missed_deadline})",
                self.stderr_text(),
            )
        if self.work_dir is None:
            self._own_work = Scratch("retryproof-work-")
            self.work_dir = self._own_work.work
        env = dict(os.environ)
        env[STATE_DIR_ENV] = self.state_dir
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (self.invoked_from, env.get("PYTHONPATH"))))
        env.pop(FAILPOINTS_ENV, None)
        if failpoints:
            env[FAILPOINTS_ENV] = format_failpoints(failpoints)
        self._stderr.append(f"[retryproof: start #{len(self._processes) + 1}: {shlex.join(self.shown)}]\n".encode())
        popen = start_group(self.command, stdin=subprocess.PIPE, env=env, cwd=self.work_dir)
        process = _Process(popen)
        self._processes.append(process)
        watch_leader(popen, functools.partial(self._leader_ended, process))
        for target in (self._read_stdout, self._write_stdin):
            process.pipes.spawn(target, process, name=f"harness-{target.__name__}")
        process.pipes.spawn(self._stderr.follow, process.pipes, process.stderr, name="harness-stderr")
        with WrappedCommand(popen, wrapped=self.wrapped) as watch:
            reply = self.call("hello", {"protocol": PROTOCOL}, timeout=self.start_timeout)
        problem = watch.lost or _exited_before_hello(process, reply) or _handshake_problem(reply)
        if problem:
            self.kill()
            raise HarnessStartError(problem, self.stderr_text())
        assert isinstance(reply, Success)  # _handshake_problem names every other reply
        hello = dict(reply.result)
        self.hello = hello
        return hello

    def kill(self) -> None:
        process = self._current
        if process is None:
            return
        process.killed_by_kit = process.killed_by_kit or process.popen.poll() is None
        kill_group(process.popen)
        self._reap(process)

    def stop(self) -> None:
        process = self._current
        if process is None:
            return
        if self.alive:
            self.call("shutdown", {}, timeout=self.stop_timeout)
            process.outbox.put(None)  # the writer thread closes the harness's input
            try:
                wait_exit(process.popen, self.stop_timeout)
            except subprocess.TimeoutExpired:
                process.killed_by_kit = True
        # Whatever the harness left behind in its group goes too.
        kill_group(process.popen)
        self._reap(process)

    def _reap(self, process: _Process) -> None:
        """Wait for the killed group's leader, let the pipe threads read to end of file,
        and close the pipes; every step bounded, and done once however many threads
        ask (an interrupt ends a scenario while its start threads are still failing).
        A pipe still open after the group is gone is held by an escaped process: it is
        named, and no longer read."""
        with process.reap_lock:
            if not process.reaped:
                self._reap_once(process)
        if self._own_work is not None and not self.alive:
            self._own_work.remove()
            self._own_work = None
            self.work_dir = None

    def _reap_once(self, process: _Process) -> None:
        try:
            wait_exit(process.popen, self.stop_timeout)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
            pass
        process.outbox.put(None)
        self._survivors += process.pipes.stop(PIPE_GRACE_S, self.stop_timeout)
        process.reaped = True
        forget_group(process.popen)

    def survivors(self) -> list[dict[str, Any]]:
        return list(self._survivors)

    def exit_statuses(self) -> list[int | None]:
        return [process.popen.poll() for process in self._processes]

    def stderr_text(self) -> str:
        return self._stderr.text()

    # -- calls -------------------------------------------------------------------

    def submit(self, op: str, args: Mapping[str, Any] | None = None, *, args_json: str | None = None) -> Future:
        with self._id_lock:
            self._next_id += 1
            request_id = self._next_id  # unique across restarts, so late answers cannot match
        future: Future = Future()
        future.request_id = request_id  # type: ignore[attr-defined]
        future.op = op  # type: ignore[attr-defined]
        if args_json is None:
            line = encode_request(Request(request_id, op, dict(args or {})))
        else:
            line = b'{"id":%d,"op":%s,"args":%s}\n' % (request_id, json.dumps(op).encode(), args_json.encode("utf-8"))
        return self._send(future, line, request_id)

    def send_line(self, raw: bytes, timeout: float | None = None) -> Reply:
        future: Future = Future()
        future.request_id = None  # type: ignore[attr-defined]
        future.op = "(raw line)"  # type: ignore[attr-defined]
        return self.wait(self._send(future, raw.rstrip(b"\n") + b"\n", None), timeout)

    def _send(self, future: Future, line: bytes, request_id: int | None) -> Future:
        process = self._current
        if process is None:
            _settle(future, Lost("the harness was never started"))
            return future
        if self.missed_deadline:
            _settle(future, Lost(f"not sent: the harness missed an earlier deadline ({self.missed_deadline})"))
            return future
        with process.lock:
            if process.closed:
                _settle(future, Lost("the harness is not running"))
                return future
            if request_id is None:
                process.raw_waiters.append(future)
            else:
                process.pending[request_id] = future
            # Under the lock, written or queued: lines keep their order.
            written = 0 if process.queued else process.pipes.write_some(process.stdin, line)
            if written is not None and written < len(line):
                process.queued += 1
                process.outbox.put((future, line[written:]))
            elif written is None:
                self._forget(process, future)
        if written is None:
            self._unwritten(process, future)
        return future

    def _write_stdin(self, process: _Process) -> None:
        while (item := process.outbox.get()) is not None:
            future, line = item
            written = process.pipes.write_all(process.stdin, line)
            with process.lock:
                process.queued -= 1
                if not written:
                    self._forget(process, future)
            if not written:
                self._unwritten(process, future)
        process.pipes.close(process.stdin)  # end of input

    @staticmethod
    def _unwritten(process: _Process, future: Future) -> None:
        # A line not yet written when the kit killed the harness is lost to the kill.
        why = "the kit killed the harness" if process.killed_by_kit else "the harness closed its input"
        _settle(future, Lost(why))

    def wait(self, pending: Future, timeout: float | None = None, *, allowed_s: float | None = None) -> Reply:
        limit = self.call_timeout if timeout is None else timeout
        try:
            return pending.result(limit)
        except FutureTimeout:
            process = self._current
            if process is not None:
                with process.lock:
                    self._forget(process, pending)
            if _settle(pending, Lost(f"no response within {limit:g}s")):
                allowed = limit if allowed_s is None else allowed_s
                self.missed_deadline = (
                    self.missed_deadline or f"{getattr(pending, 'op', 'a call')}: no response within {allowed:g}s"
                )
            return pending.result()

    @staticmethod
    def _forget(process: _Process, future: Future) -> None:
        request_id = getattr(future, "request_id", None)
        if request_id is not None:
            process.pending.pop(request_id, None)
        if future in process.raw_waiters:
            process.raw_waiters.remove(future)

    # -- reader threads ----------------------------------------------------------

    def _read_stdout(self, process: _Process) -> None:
        reason = None
        try:
            for line in process.pipes.lines(process.stdout, self.max_line_bytes):
                if line.strip():
                    self._dispatch(process, line)
        except LineTooLong as exc:
            reason = f"the harness wrote {exc}"
            self.noise.append(reason)
            kill_group(process.popen)
        self._close(process, reason)

    def _dispatch(self, process: _Process, line: bytes) -> None:
        try:
            reply = decode_response(line)
        except ProtocolError as exc:
            self._unattributable(process, f"unreadable line ({exc.message}): {line[:200]!r}")
            return
        with process.lock:
            target = None if reply.id is None else process.pending.pop(reply.id, None)
            if target is None and process.raw_waiters:
                # A line that is not a request is answered with id null, or with the id
                # the line carried (PROTOCOL-R6), so an answer under no call's id answers
                # the oldest raw line; a success there is judged, not lost.
                target = process.raw_waiters.pop(0)
        if target is not None:
            _settle(target, reply)
        elif isinstance(reply, Failure) and reply.id is None:
            self._unattributable(process, f"answer with id null: {reply.code}: {reply.message[:200]}", reply)
        else:
            self._unattributable(process, f"answer for id {reply.id}, which is not a call in flight")

    def _unattributable(self, process: _Process, what: str, reply: Reply | None = None) -> None:
        """A line that answers no call in flight: protocol noise. It is kept for the
        evidence, and it ends the oldest call in flight at once as ``Lost`` with the
        noise as its reason (it may well be that call's garbled answer); a call the
        noise wrongly ends was indeterminate anyway once the stream stopped making sense."""
        if len(self.noise) < NOISE_LIMIT:
            self.noise.append(what)
        with process.lock:
            flight = process.in_flight()
            if not flight:
                return
            self._forget(process, flight[0])
        raw = getattr(flight[0], "request_id", None) is None  # a send_line call: a null-id answer is its own
        _settle(flight[0], reply if reply is not None and raw else Lost(what))

    def protocol_noise(self) -> list[str]:
        return list(self.noise)

    def _close(self, process: _Process, reason: str | None) -> None:
        try:
            status = wait_exit(process.popen, self.stop_timeout)
        except subprocess.TimeoutExpired:
            status = None
        if reason is None:
            if process.killed_by_kit:
                reason = "the kit killed the harness"
            elif status is not None and status < 0:
                reason = f"the harness died of signal {signal.Signals(-status).name}"
            else:
                reason = f"the harness closed its output (exit status {status})"
        with process.lock:
            process.closed = True
            flight = process.in_flight()
            process.pending.clear()
            process.raw_waiters.clear()
            process.outbox.put(None)  # the writer thread ends after what is queued
        for future in flight:
            _settle(future, Lost(reason))
        process.closed_event.set()

    def _leader_ended(self, process: _Process) -> None:
        """The process the kit started is the harness: once it has ended, the harness
        has, whatever its children still hold. Its group is ended, so the pipes those
        children inherited close and the reader judges the calls in flight as at any end
        of output (``_close``: "the harness died of signal SIGKILL"); should a process
        that escaped the group still hold stdout after ``PIPE_GRACE_S``, the calls are
        judged without waiting for it. A leader the kit has reaped meanwhile (its stop or
        kill) is left to that: its pid may name another process by now."""
        if process.closed or process.popen.returncode is not None:
            return
        kill_group(process.popen)
        if not process.closed_event.wait(PIPE_GRACE_S):
            self._close(process, None)


def _settle(future: Future, reply: Reply) -> bool:
    """Give ``future`` ``reply`` unless another thread gave it one first; whether this
    one did. The reader (an answer, the harness's end), the writer (a line left
    unwritten) and a caller (its timeout) may end one call at once: a look whether it
    was done, then a set, raced (``InvalidStateError`` in a thread, seen when SIGTERM
    met 30000 pipelined calls). The future's own lock makes set-if-not-done one step."""
    try:
        future.set_result(reply)
    except InvalidStateError:
        return False
    return True


def _exited_before_hello(process: _Process, reply: Reply) -> str | None:
    """Why a harness gave no hello, when it simply ended (``--harness true``, a
    crashing start-up): its exit status says more than the pipe that closed."""
    if not isinstance(reply, Lost):
        return None
    try:
        status = wait_exit(process.popen, 0.5)
    except subprocess.TimeoutExpired:
        return None  # still running: the hello timed out, and the reply says so
    return f"the harness exited with status {status} before answering hello" if status >= 0 else None


def _handshake_problem(reply: Reply) -> str | None:
    if isinstance(reply, Lost):
        return reply.reason
    if isinstance(reply, Failure):
        return f"hello answered error {reply.code}: {reply.message[:200]}"
    assert isinstance(reply, Success)
    if reply.result.get("protocol") != PROTOCOL:
        return f"hello answered protocol {str(reply.result.get('protocol'))[:80]!r}, expected {PROTOCOL!r}"
    return None
