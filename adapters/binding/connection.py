"""``BindingConnection``: an MCP server or an HTTP API behind the same ``Connection``
interface as a harness, so catalogue scenarios run over it unchanged.

The connection starts the server command in its own process group with
``RETRYPROOF_STATE_DIR`` (and a free loopback port in ``RETRYPROOF_PORT`` when the
binding's wire listens), waits until the wire says it is ready (the port accepts; MCP
``initialize`` succeeds) within the start timeout, and SIGKILLs or stops it like a
harness. Which wire it speaks (``transports/``) it never asks. It translates the
protocol ops a binding can offer:

- ``hello`` is synthesized from the binding: ``write_task`` plus what it ``offers``,
  no failpoints, so scenarios needing failpoints, ``tamper`` or ``diagnose`` are
  skipped by the runner's needs check;
- ``write_task`` is the bound call, its answer mapped by the binding's rules onto a
  creation result or a rejection; an answer no rule maps is ``info``;
- ``list_tasks`` and ``read_task`` come from the authoritative listing, never from
  what a call claimed.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from retryproof.adapters.binding import answers
from retryproof.adapters.binding.binding_file import Binding
from retryproof.adapters.binding.proxy import Proxy
from retryproof.adapters.binding.transports import Gone, Server, Transport, parse_json
from retryproof.adapters.binding.transports.base import MAX_ANSWER_BYTES
from retryproof.adapters.connection import CALL_TIMEOUT_S, START_TIMEOUT_S, Connection, HarnessStartError, Lost, Reply
from retryproof.adapters.loopback import PORT_TRIES, PortTaken, start_on_free_port
from retryproof.adapters.loss import WITHHELD, Loss
from retryproof.adapters.process_groups import (
    PIPE_GRACE_S,
    STATE_DIR_ENV,
    Abandoned,
    OutputTooLong,
    StderrTail,
    WrappedCommand,
    forget_group,
    kill_group,
    run_to_end,
    start_group,
    wait_exit,
)
from retryproof.spec.digest import DIGEST_SCHEMA_VERSION, ContractError, request_digest
from retryproof.spec.protocol import Failure, Success, greeting

PORT_ENV = "RETRYPROOF_PORT"
#: Ops a binding translates; every other op is answered unknown_op.
OPS = ("write_task", "list_tasks", "read_task")
#: The share of the call timeout a listing command gets: the rest is for the op's own
#: answer, so a command that hangs is named as the cause, not reported as "no answer".
LISTING_SHARE = 0.8
#: Calls in flight at once on one connection: an A4 round and FUZZ-MODEL's probe race
#: eight ids with eight callers each, every call sent before any answer is read.
MAX_IN_FLIGHT = 64
#: How often a fault that waits for the effect polls the listing.
LISTING_POLL_S = 0.02


class BindingConnection(Connection):
    settles_in_flight = True

    def __init__(
        self,
        binding: Binding,
        state_dir: str,
        *,
        call_timeout: float = CALL_TIMEOUT_S,
        start_timeout: float = START_TIMEOUT_S,
        stop_timeout: float = 5.0,
        stderr_limit: int = 64 << 10,
        wrap: tuple[str, ...] = (),
    ):
        self.binding = binding
        #: A command line the server's command runs under (``strace ...``, for CRASH-POINTS).
        self.wrap = wrap
        self.recovery_s = binding.recovery_s
        self.task_model = binding.task_model
        self.normalizes = binding.normalizes
        # Without a reused rule, created answers are told apart by the listing.
        self._ledger = None if binding.says_reused else answers.Ledger.of(state_dir)
        self.state_dir = state_dir
        self.call_timeout = call_timeout
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.hello: Mapping[str, Any] | None = None
        self._stderr = StderrTail(stderr_limit)
        self._servers: list[Server] = []
        self._survivors: list[dict[str, Any]] = []
        self._exchanges: list[dict[str, Any]] = []
        #: When the last ``write_task`` sent its request (wall time, as strace's ``-ttt``
        #: stamps calls), None while it has not: CRASH-POINTS, which makes one write at a
        #: time, tells the server's calls for the listing read before the request from
        #: the write's own, and a kill in that listing from one in the write.
        self.sent_at: float | None = None
        self._pool = ThreadPoolExecutor(MAX_IN_FLIGHT, thread_name_prefix="binding-call")

    # -- lifecycle ---------------------------------------------------------------

    @property
    def _current(self) -> Server | None:
        return self._servers[-1] if self._servers else None

    @property
    def port(self) -> int | None:
        """The loopback port the current server listens on (None over stdio)."""
        current = self._current
        return current.port if current is not None else None

    @property
    def alive(self) -> bool:
        current = self._current
        return current is not None and current.popen.poll() is None

    def start(self, failpoints: Mapping[str, str] | None = None) -> Mapping[str, Any]:
        if failpoints:
            raise HarnessStartError("a binding target has no failpoints; the kit cannot arm " + ", ".join(failpoints))
        if self.alive:
            raise RuntimeError("the server is already running; kill or stop it first")
        binding = self.binding
        try:
            if binding.wire.listens:
                start_on_free_port(self._start_server, self._port_taken)
            else:
                self._start_server(None)
        except PortTaken:
            raise HarnessStartError(
                f"the server's port was taken by another program {PORT_TRIES} times in a row",
                self.stderr_text(),
            ) from None
        except Gone as exc:
            self.kill()
            raise HarnessStartError(f"the server was not ready: {exc.reason}", self.stderr_text()) from None
        implementation = {"name": binding.name, "version": binding.version, "language": binding.target}
        self.hello = greeting(implementation, list(binding.capabilities), [])
        return self.hello

    def _port_taken(self, taken: PortTaken) -> None:
        """End a start on a port another program took: never this runtime's start."""
        self.kill()
        self._servers.pop()
        self._stderr.append(f"[retryproof: {taken}; starting again on another port]\n".encode())

    def _start_server(self, port: int | None) -> None:
        """One start of the server on ``port``, waited for until ready."""
        binding = self.binding
        env = dict(os.environ)
        env[STATE_DIR_ENV] = self.state_dir
        env.pop(PORT_ENV, None)
        if port is not None:
            env[PORT_ENV] = str(port)
        env.update(binding.start_env(port, self.state_dir))
        command = [*self.wrap, *binding.start_command(port, self.state_dir)]
        # As the binding writes it: reports carry no interpreter path, port or state dir.
        shown = shlex.join(binding.command)
        self._stderr.append(f"[retryproof: start #{len(self._servers) + 1}: {shown}]\n".encode())
        stdio = not binding.wire.listens
        # Registered like a harness's group, so an interrupted run (SIGINT, SIGTERM, exit)
        # SIGKILLs the server too (process_groups.end_everything).
        popen = start_group(
            command, stdin=subprocess.PIPE if stdio else subprocess.DEVNULL, env=env, cwd=binding.directory
        )
        server = Server(popen, port, binding.base_url(port))
        self._servers.append(server)
        streams = [popen.stderr] if stdio else [popen.stderr, popen.stdout]
        for stream in streams:
            server.pipes.spawn(self._stderr.follow, server.pipes, stream, name="binding-output")
        server.wire = binding.wire(binding, server)
        # Under a wrapper (strace) the server is the wrapper's child: its end, while the
        # wrapper lives on, ends the wait as the server's own end does without one. A
        # start the watch gave up is gone, also when the server got ready just then.
        watch = WrappedCommand(popen, wrapped=bool(self.wrap))
        try:
            with watch:
                server.wire.ready(self.start_timeout)
        except Gone:
            if watch.lost is None:
                raise
        if watch.lost is not None:
            raise Gone(watch.lost)

    def kill(self) -> None:
        server = self._current
        if server is None:
            return
        server.killed_by_kit = server.killed_by_kit or server.popen.poll() is None
        kill_group(server.popen)
        self._reap(server)

    def stop(self) -> None:
        """Graceful, as the wire asks: stdio servers see their input close, listening
        servers get SIGTERM."""
        server = self._current
        if server is None:
            return
        if self.alive:
            assert server.wire is not None  # a live server got its wire when it started
            server.wire.stop()
            try:
                wait_exit(server.popen, self.stop_timeout)
            except subprocess.TimeoutExpired:
                server.killed_by_kit = True
        kill_group(server.popen)
        self._reap(server)

    def _reap(self, server: Server) -> None:
        try:
            wait_exit(server.popen, self.stop_timeout)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
            pass
        self._survivors += server.pipes.stop(PIPE_GRACE_S, self.stop_timeout)
        forget_group(server.popen)

    def exit_statuses(self) -> list[int | None]:
        return [server.popen.poll() for server in self._servers]

    def survivors(self) -> list[dict[str, Any]]:
        return list(self._survivors)

    def exchanges(self) -> list[dict[str, Any]]:
        return list(self._exchanges)

    def stderr_text(self) -> str:
        return self._stderr.text()

    # -- calls -------------------------------------------------------------------

    def submit(self, op: str, args: Mapping[str, Any] | None = None, *, args_json: str | None = None) -> Future:
        server = self._current
        if server is None or args_json is not None:
            future: Future = Future()
            future.set_result(
                Lost("the server was never started" if server is None else "a binding sends no raw JSON text")
            )
            return future
        return self._pool.submit(self._serve, server, op, dict(args or {}))

    def wait(self, pending: Future, timeout: float | None = None, *, allowed_s: float | None = None) -> Reply:
        limit = self.call_timeout if timeout is None else timeout
        try:
            return pending.result(limit)
        except FutureTimeout:
            return Lost(f"no response within {limit if allowed_s is None else allowed_s:g}s")

    def send_line(self, raw: bytes, timeout: float | None = None) -> Reply:
        return Lost("a binding has no line framing to send raw bytes on")

    def lose_response(self, op: str, args: Mapping[str, Any], loss: Loss = WITHHELD) -> Reply | None:
        """Lose the answer of one ``write_task`` as ``loss`` says (``adapters/loss.py``):
        for a listening wire through a loopback proxy of the kit's own (``proxy.py``),
        after which the retry comes as a new caller (a new MCP session); for a stdio
        wire on the pipe the kit owns, where the caller then goes away (its input
        closes; a server that outlives that is SIGKILLed), so the retry meets a new
        process on the same state."""
        server = self._current
        key = args.get("client_submission_id")
        if op != "write_task" or server is None or server.wire is None or not isinstance(key, str):
            return None
        if server.wire.ends_when_left:
            return self._lose_on_the_pipe(server, dict(args), loss)
        with Proxy(server.port or 0) as proxy:
            held = proxy.arm(key.encode("ascii", "replace"))
            wire = server.wire.through(proxy.url(server.base_url or ""))
            pending = self._pool.submit(self._serve, server, op, dict(args), wire)
            listed_s = None
            if held.request_seen.wait(self.call_timeout):
                with contextlib.suppress(Gone):
                    listed_s = self._await_fault(server, key, loss, held.answered)
            if loss.kill:
                self.kill()
            held.close()
            if loss.kind == "cut" and not held.answered.is_set() and self.alive:
                with contextlib.suppress(Gone):  # through the proxy, as the call went
                    wire.abandon(self.call_timeout)
            reply = self.wait(pending)
        if self.alive:
            with contextlib.suppress(Gone):
                server.wire.ready(self.call_timeout)  # the retry is a new caller
        if not isinstance(reply, Lost):  # the proxy never saw the call: nothing was lost
            return Lost(f"the kit could not interpose on the call ({held.describe()}); it answered {reply}")
        return Lost(f"{loss.describe()['fault']}: {held.describe()}", listed_s)

    def _await_fault(self, server: Server, key: str, loss: Loss, answered: threading.Event) -> float | None:
        """Wait until the moment ``loss`` names (bounded by a call timeout); an answer
        that arrives first is withheld all the same. When the wait polled the listing
        and saw the effect: seconds until the last listing that did not hold it yet
        began (the effect was made after that, however slow the listing)."""
        began = time.monotonic()
        deadline = began + self.call_timeout
        if loss.kind == "cut" and not loss.when_listed:
            answered.wait(min(loss.after_s or 0.0, self.call_timeout))
            return None
        unlisted_s, seen = 0.0, False
        while time.monotonic() < deadline:
            done = answered.is_set()
            asked = time.monotonic() - began
            listed = self._listing(server)
            if not isinstance(listed, Failure) and any(item["client_submission_id"] == key for item in listed):
                seen = True
                break
            unlisted_s = asked
            if done:
                break
            time.sleep(LISTING_POLL_S)
        if loss.kind == "withheld":
            answered.wait(max(0.0, deadline - time.monotonic()))
        return unlisted_s if seen else None

    def _lose_on_the_pipe(self, server: Server, args: dict[str, Any], loss: Loss) -> Reply:
        assert server.wire is not None  # the caller checked
        answered = threading.Event()
        pending = self._pool.submit(self._serve, server, "write_task", args)
        pending.add_done_callback(lambda _: answered.set())
        began = time.monotonic()
        listed_s = None
        with contextlib.suppress(Gone):
            listed_s = self._await_fault(server, str(args["client_submission_id"]), loss, answered)
        # What the caller left behind when it went away: an answer that had arrived (and
        # is not delivered), or none yet.
        arrived = answered.is_set() and not isinstance(pending.result(0), Lost)
        if loss.kill:
            self.kill()
        server.wire.stop()
        closed_after = time.monotonic() - began
        try:
            wait_exit(server.popen, self.stop_timeout)
        except subprocess.TimeoutExpired:
            self.kill()  # a server that outlives its caller's input is ended like a hung one
        what = "the answer had arrived" if arrived else "no answer yet"
        fault = loss.describe()["fault"]
        return Lost(
            f"{fault}: {what}; the caller closed the server's input {closed_after:.3f}s after the request", listed_s
        )

    def _serve(self, server: Server, op: str, args: dict[str, Any], wire: Transport | None = None) -> Reply:
        try:
            if op == "write_task":
                return self._write_task(server, args, wire)
            if op in ("list_tasks", "read_task"):
                listed = self._listing(server)
                if isinstance(listed, Failure):
                    return listed
                if op == "list_tasks":
                    return Success(0, {"tasks": [{k: v for k, v in item.items() if k != "task"} for item in listed]})
                item = next((item for item in listed if item["task_id"] == args.get("task_id")), None)
                if item is None:
                    return Failure(None, "not_found", f"the listing holds no effect {args.get('task_id')!r}")
                return Success(
                    0, {key: item[key] for key in ("task_id", "task", "client_submission_id", "request_digest")}
                )
            return Failure(None, "unknown_op", f"a binding translates {', '.join(OPS)}, not {op}")
        except Gone as exc:
            return Lost(exc.reason)
        except (UnicodeError, ValueError) as exc:  # a key a header cannot carry, say
            return Lost(f"the kit cannot send this call over {self.binding.target}: {exc}")

    def _write_task(self, server: Server, args: dict[str, Any], wire: Transport | None = None) -> Reply:
        """``wire``: the server's wire aimed at the kit's proxy, for a call whose answer is lost."""
        self.sent_at = None
        binding = self.binding
        task = args.get("task")
        key = args.get("client_submission_id")
        if "client_submission_id" in args and not isinstance(key, str):
            return Lost(f"a binding sends a key as a string, not {key!r}")
        arguments = answers.call_arguments(binding, task)
        if isinstance(arguments, str):
            return Lost(arguments)
        listed_before: set[str] = set()
        if self._ledger is not None:
            # Read while the server lives: once it has ended the call cannot be sent, and a
            # listing command that waits for its server (retrying a refused connection)
            # would hold the caller until its own bound (10.5 s for Restate's, per kill).
            before = self._listing(server, while_alive=True)
            if isinstance(before, Failure):
                return Lost(f"the kit could not read the listing before the call: {before.message}")
            listed_before = {item["task_id"] for item in before}
        wire = wire or server.wire
        assert wire is not None  # a started server got its wire
        self.sent_at = time.time()
        answer = wire.call(arguments, key, self.call_timeout)
        rule = answers.meaning(binding, answer)
        exchanged = answers.exchange(binding, key, answer, rule)
        self._exchanges.append(exchanged)
        if rule is None:
            return answers.unmapped(
                f"no outcome rule of the binding matches the answer: {answers.describe(answer, binding)}"
            )
        if rule.means in answers.REJECTIONS:
            return Failure(None, answers.REJECTIONS[rule.means], f"{rule.means}: {answers.describe(answer)}")
        try:
            digest = request_digest(task)
        except ContractError as exc:
            return answers.unmapped(f"the service answered {rule.means} for a task write-task-v1 refuses ({exc})")
        task_id = answers.effect_id(answers.resolve(answer, binding.task_id))
        if rule.means != "conflict":
            if task_id is None:
                return answers.unmapped(
                    f"{rule.means}, but {binding.task_id} names no effect in the answer: {answers.describe(answer)}"
                )
            means = rule.means
            if self._ledger is not None and means == "created":
                # The evidence says which answers were classified by the listing, and how.
                means = exchanged["judged_by_listing"] = self._ledger.judge(task_id, listed_before)
            return Success(0, answers.id_path_result(means, task_id, key, digest))
        return self._conflict(server, key, task_id, digest, answer)

    def _conflict(self, server: Server, key: str | None, task_id: str | None, digest: str, answer: Any) -> Reply:
        """A conflict names what the key is bound to; the kit reads that from the
        authoritative listing, not from the answer."""
        if key is None:
            return answers.unmapped(f"a conflict for a call without a key: {answers.describe(answer)}")
        listed = self._listing(server)
        if isinstance(listed, Failure):
            return listed
        owned = [item for item in listed if item["client_submission_id"] == key]
        if len(owned) != 1:
            return answers.unmapped(
                f"the service answered conflict, but its listing holds {len(owned)} effects for {key}"
            )
        bound = owned[0]
        conflict = {
            "reason": "digest_mismatch",
            "receipt_request_digest": bound["request_digest"],
            "receipt_digest_schema_version": DIGEST_SCHEMA_VERSION,
        }
        return Success(0, answers.id_path_result("conflict", task_id or bound["task_id"], key, digest, conflict))

    def _listing(self, server: Server, while_alive: bool = False) -> list[dict[str, Any]] | Failure:
        listing = self.binding.listing
        if "command" in listing:
            ended = (lambda: server.popen.poll() is not None) if while_alive else None
            ran = self._run_listing_command(tuple(listing["command"]), server.port, ended)
            if isinstance(ran, Failure):
                return ran
            answer = ran
        else:
            assert server.wire is not None  # a started server got its wire
            answer, failed = server.wire.listing(self.call_timeout)
            if failed:
                return answers.unmapped(f"{failed} {answers.describe(answer)}")
        return answers.listed_tasks(self.binding, answer)

    def _run_listing_command(
        self, command: tuple[str, ...], port: int | None, ended: Callable[[], bool] | None = None
    ) -> dict[str, Any] | Failure:
        words = self.binding.fill(command, port, self.state_dir)
        env = {**os.environ, STATE_DIR_ENV: self.state_dir, **self.binding.start_env(port, self.state_dir)}
        # Within the call's own timeout, so a hung command is named as such, not "no answer".
        timeout = self.call_timeout * LISTING_SHARE
        try:
            status, stdout, stderr = run_to_end(
                words, env, timeout, MAX_ANSWER_BYTES, cwd=self.binding.directory, abandon=ended
            )
        except Abandoned:
            raise Gone("the server ended while the listing command ran") from None
        except subprocess.TimeoutExpired:
            raise Gone(f"the listing command did not end within {timeout:g}s") from None
        except OutputTooLong:
            raise Gone(f"the listing command printed more than {MAX_ANSWER_BYTES} bytes") from None
        except HarnessStartError as exc:
            return answers.unmapped(f"the listing command: {exc.message}")
        if status != 0:
            return answers.unmapped(f"the listing command exited with status {status}: {stderr[-500:]}")
        if not stdout.strip():
            return answers.unmapped(f"the listing command exited 0 but printed nothing: {stderr[-500:]}")
        return {"body": parse_json(stdout)}
