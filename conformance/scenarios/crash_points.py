"""CRASH-POINTS: a SIGKILL at every durable step of one write, without any hook.

A runtime without failpoints (a server through a binding, a harness that declares
none) still has crash windows: between claiming a key and making the effect, between
two writes of a stored response. Crash-consistency testers find them from the
system calls (ALICE, CrashMonkey); so does this scenario:

1. *Record.* On a fresh state directory the runtime starts untraced and makes one
   write; then ``strace -f -ttt -y -yy -p`` attaches to it and it makes another. Its
   points are the system calls entered while that call ran that change durable state
   or reach another store: a create, write, truncate, rename, link, unlink or mkdir on
   a file of the state directory; a write or send on a socket the runtime connected
   to (a database, a cache). An fsync is no point: a SIGKILL loses no page cache, so a
   kill there leaves what a kill at the next step leaves (DURABILITY-TRACE judges the
   fsyncs).
2. *Kill.* For each point: ``strace --inject=SYSCALL:signal=KILL:when=N`` attaches to
   the running runtime (N: that call's number among its thread's calls of SYSCALL since
   the attach, as strace counts them) and it makes a write of a fresh key; the kernel
   kills it on entering that call. It starts again, untraced, on that state, and the
   key is retried until it answers with its effect within the runtime's recovery bound
   plus a call timeout. The listing must hold that one effect for the key and one task
   more than before. That runtime is then attached to for the next point (``_Chain``):
   one start per point.

strace counts per thread, and any thread's N-th call of SYSCALL triggers the kill: a
point another thread reaches first under the same count, and that no count on its path
can reach either (the path is named after the recording process), is not reachable
this way and is only counted (``unreachable``). Past ``MAX_POINTS`` the points are sampled
evenly. ``RETRYPROOF_CRASH_POINT=SYSCALL:N`` (in the reproduce line of a failure, and
in its replay file) runs that one point.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from retryproof.adapters.binding.connection import BindingConnection
from retryproof.adapters.connection import Connection, HarnessStartError
from retryproof.adapters.process import ProcessConnection
from retryproof.adapters.process_groups import Scratch
from retryproof.conformance import replay_file
from retryproof.conformance.context import Context, ScenarioFailed, Unjudgeable
from retryproof.conformance.scenarios import scenario
from retryproof.conformance.scenarios.common import converge, expect_identity
from retryproof.conformance.strace import AttachError, Syscall, attach_prefix, attached, entered

#: The most points one run kills at; past it they are sampled evenly.
MAX_POINTS = 24
#: Names a reproduction's point: ``SYSCALL:N``.
POINT_ENV = "RETRYPROOF_CRASH_POINT"
#: The runtime's calls get this many times their usual bound (while strace is attached,
#: every system call of the runtime stops at the tracer); its starts are untraced.
SLOWDOWN = 6

_FILE_WRITES = ("write", "pwrite64", "writev", "pwritev", "pwritev2", "ftruncate")
_SENDS = ("sendto", "sendmsg")
_NAMES = ("rename", "renameat", "renameat2", "link", "linkat", "unlink", "unlinkat", "mkdir", "mkdirat", "rmdir")
_OPENS = ("open", "openat", "creat")
TRACED = (*_FILE_WRITES, *_SENDS, *_NAMES, *_OPENS)

_FD = re.compile(r"^-?\d+<(?P<what>.*)>$")
_RESULT_PATH = re.compile(r"^\d+<(?P<path>[^>]*)>")
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
_TCP = re.compile(r"^TCP(?:v6)?:\[(?P<local>.*)->(?P<peer>.*)\]$")
_UNIX = re.compile(r'^UNIX(?:-STREAM)?:\[\d+(?:->\d+)?,"(?P<path>[^"]+)"\]$')


@dataclass(frozen=True)
class Point:
    """A durable step: the ``when``-th call of ``syscall`` in its thread, on ``target``
    (a path in the state directory, or a store's address). With ``path`` the count is
    of the calls on that path (strace ``-P``; the path is relative to the state
    directory), for a step that another thread's calls would otherwise pre-empt."""

    syscall: str
    when: int
    target: str
    path: str | None = None

    @property
    def name(self) -> str:
        return f"{self.syscall}:{self.when}" + (f":{self.path}" if self.path else "")

    def strace_options(self, state_dir: str, path: str | None = None) -> list[str]:
        """strace's options for the kill; ``path`` stands for ``self.path`` (the same
        file under another write's name)."""
        inject = ["-e", f"trace={self.syscall}", "-e", f"inject={self.syscall}:signal=KILL:when={self.when}"]
        on = path or self.path
        if on is None:
            return inject
        return ["-P", os.path.join(os.path.realpath(state_dir), on), *inject]


def find_points(
    calls: list[Syscall], state_dir: str, began: float, ended: float, own_port: int | None
) -> tuple[list[Point], int]:
    """The points among ``calls`` (entry order) entered between ``began`` and
    ``ended``, and how many more there were that no strace count can reach."""
    root = os.path.realpath(state_dir)
    counted: dict[tuple[Any, ...], int] = {}
    first_to_reach: dict[tuple[Any, ...], int] = {}

    def count(key: tuple[Any, ...], call: Syscall) -> int:
        mine = (call.pid, *key)
        when = counted[mine] = counted.get(mine, 0) + 1
        first_to_reach.setdefault((*key, when), call.seq)
        return when

    # A path named after the process that made it (a temporary file's ``.tmp-<pid>-0``)
    # has another name in the next process, so a count on that path never triggers.
    pids = {str(call.pid) for call in calls}
    numbered = []
    for call in calls:
        paths = _paths(call, root)
        numbered.append((call, count((call.name,), call), {path: count((call.name, path), call) for path in paths}))
    points: list[Point] = []
    unreachable = 0
    for call, when, on_path in numbered:
        if call.at is None or not began <= call.at <= ended:
            continue
        target = _target(call, root, own_port)
        if target is None:
            continue
        if first_to_reach[(call.name, when)] == call.seq:
            points.append(Point(call.name, when, target))
            continue
        reachable = [
            path
            for path, nth in on_path.items()
            if first_to_reach[(call.name, path, nth)] == call.seq and not pids & set(re.findall(r"\d+", path))
        ]
        if reachable:
            points.append(Point(call.name, on_path[reachable[0]], target, reachable[0]))
        else:
            unreachable += 1
    return points, unreachable


def _paths(call: Syscall, root: str) -> list[str]:
    """The state directory's files a call names (relative), as strace -P matches them."""
    found = []
    fd = _FD.match(call.args.split(",", 1)[0].strip())
    if fd and fd["what"].startswith("/"):
        found.append(fd["what"])
    if call.name not in _FILE_WRITES and call.name not in _SENDS:  # a write's strings are its data, not paths
        found += [_absolute(text, call.args) for text in _STRING.findall(call.args)]
    inside = [_inside(path, root) for path in found]
    return [path for path in inside if path]


def _target(call: Syscall, root: str, own_port: int | None) -> str | None:
    """What the call makes durable, or None when it is no point."""
    head = call.args.split(",", 1)[0].strip()
    if call.name in _OPENS:
        created = call.name == "creat" or "O_CREAT" in call.args
        opened = _RESULT_PATH.match(call.result)
        named = _paths(call, root)
        if not created:
            return None
        return _inside(opened["path"], root) if opened else (named[0] if named else None)
    if call.name in _FILE_WRITES or call.name in _SENDS:
        fd = _FD.match(head)
        if fd is None:
            return None
        what = fd["what"]
        if tcp := _TCP.match(what):
            local_port = tcp["local"].rsplit(":", 1)[-1]
            return None if own_port is not None and local_port == str(own_port) else f"tcp {tcp['peer']}"
        if unix := _UNIX.match(what):
            return f"unix {unix['path']}"
        return None if call.name in _SENDS else _inside(what, root)
    strings = [_absolute(text, call.args) for text in _STRING.findall(call.args)]
    inside = [_inside(path, root) for path in strings]
    if not any(inside):
        return None
    return " -> ".join(path or "(outside)" for path in inside)


def _absolute(path: str, args: str) -> str:
    if path.startswith("/"):
        return path
    base = re.match(r"^(?:AT_FDCWD|-?\d+)<(?P<dir>[^>]*)>", args)
    return os.path.join(base["dir"], path) if base else path


def _inside(path: str, root: str) -> str | None:
    path = os.path.normpath(path)
    return os.path.relpath(path, root) if path.startswith(root.rstrip("/") + "/") else None


def sample(points: list[Point], cap: int) -> list[Point]:
    """At most ``cap`` points, evenly spread over the write, the first and last kept."""
    if len(points) <= cap:
        return list(points)
    if cap == 1:
        return [points[0]]
    return [points[round(index * (len(points) - 1) / (cap - 1))] for index in range(cap)]


# -- the scenario ----------------------------------------------------------------------


@scenario("CRASH-POINTS", long=20)
def crash_points(ctx: Context) -> None:
    strace = shutil.which("strace") or "strace"  # the runner skips the scenario without it
    # What the runtime runs, without starting it: the run's handshake started it already.
    probe = ctx.unstarted()
    if not isinstance(probe, (BindingConnection, ProcessConnection)):
        ctx.skip("this connection runs no command line the kit can run under strace")
    chosen = os.environ.get(POINT_ENV)
    with contextlib.ExitStack() as scratches:
        chain = _Chain(ctx, _siblings(ctx, probe), strace, scratches)
        points, unreachable = chain.record()
        if chosen:
            points = [point for point in points if point.name == chosen]
            ctx.check(bool(points), f"{POINT_ENV}={chosen} names no point of this runtime's write")
        if not points:
            raise Unjudgeable(
                "the trace of one write shows no system call that makes state durable or reaches a store "
                f"({unreachable} more that strace's count cannot reach): no crash point to kill at "
                "(a store written through mmap alone, say)"
            )
        run = sample(points, MAX_POINTS)
        ctx.note("points_found", len(points))
        ctx.note("points_unreachable", unreachable)
        ctx.note("points_run", len(run))
        outcomes: list[dict[str, Any]] = []
        ctx.note("points", outcomes)
        for point in run:
            outcomes.append(chain.kill_at(point))
        chain.end()
    ctx.note("starts", chain.starts)
    # A point whose kill did not land while the write ran (a file name that differs from
    # write to write, under -P) is still judged, and counted here.
    ctx.note("points_not_reached", sum(not outcome["killed"] for outcome in outcomes))
    failed = [outcome for outcome in outcomes if outcome["outcome"] != "one effect"]
    if failed:
        first = next((outcome for outcome in failed if outcome["killed"]), failed[0])
        ctx.reproduce_env[POINT_ENV] = first["point"]
        ctx.note(
            "replay",
            replay_file.scenario_replay(ctx.entry.id, ctx.seed, ctx.hello.implementation, {POINT_ENV: first["point"]}),
        )
        ctx.check(False, failure_reason(failed, len(run)))


def failure_reason(failed: list[dict[str, Any]], run: int) -> str:
    """What the failed points say, naming first a point whose kill landed: a point whose
    kill did not land broke a write that completed, so it names no crash window."""
    landed = [outcome for outcome in failed if outcome["killed"]]
    first = (landed or failed)[0]
    unlanded = len(failed) - len(landed)
    reason = f"{len(failed)} of {run} crash points broke the write"
    if unlanded:
        reason += f" ({unlanded} of them where the kill did not land: the write completed, then its retry broke)"
    where = f"{first['syscall']} #{first['when']} on {first['target']}"
    if first["killed"]:
        return f"{reason}; first, a SIGKILL entering {where}: {first['outcome']}"
    return f"{reason}; first, the retry after a write whose kill at {where} did not land: {first['outcome']}"


#: A connection whose command the kit runs, so that strace can attach to its process.
Runnable = BindingConnection | ProcessConnection
Sibling = Callable[[str, str], Runnable]


def _siblings(ctx: Context, probe: Connection) -> Sibling:
    """Connections to the same runtime on another state directory, started so that
    strace may attach to them, their calls bounded ``SLOWDOWN`` times the usual."""
    prefix = attach_prefix()

    def make(state: str, work: str) -> Runnable:
        if isinstance(probe, BindingConnection):
            connection: Runnable = BindingConnection(
                probe.binding,
                state,
                call_timeout=probe.call_timeout * SLOWDOWN,
                start_timeout=probe.start_timeout,
                wrap=prefix,
            )
        else:
            assert isinstance(probe, ProcessConnection)
            connection = ProcessConnection(
                [*prefix, *probe.command],
                state,
                shown=probe.shown,
                call_timeout=probe.call_timeout * SLOWDOWN,
                start_timeout=probe.start_timeout,
                work_dir=work,
            )
        ctx.connections.append(connection)
        return connection

    return make


class _Chain:
    """The runtime's servers in turn on one state directory: each is killed by strace
    (attached once it is up) at a point of a write of a fresh key, and the next, started
    on what it left, retries that key and is then armed for the next point, so a point
    costs one start. A count from the attach leaves the start-up and the earlier calls
    out of it, and one first write before any trace leaves the runtime's first-write
    set-up out (every traced write finds a state that holds tasks already). A point
    whose retry broke ends the chain; the next point begins a new one on a fresh state
    directory, so no broken state is judged twice."""

    def __init__(self, ctx: Context, sibling: Sibling, strace: str, scratches: contextlib.ExitStack):
        self.ctx, self.sibling, self.strace, self.scratches = ctx, sibling, strace, scratches
        self.server: Runnable | None = None
        self.scratch: Scratch | None = None
        self.effects = 0  # the tasks the state directory holds
        self.starts = 0
        self.recorded_key = ""

    def _ready(self) -> tuple[Runnable, Scratch]:
        if self.server is None or self.scratch is None:
            self.scratch = self.scratches.enter_context(Scratch("retryproof-crash-points-"))
            self.server = self.sibling(self.scratch.state, self.scratch.work)
            self._start(self.server)
            first = self.ctx.write_task(self.ctx.submission_id(), self.ctx.task(), connection=self.server)
            self.ctx.expect_ok(first, "the first write, before any trace")
            self.effects = 1
        return self.server, self.scratch

    def _start(self, server: Runnable) -> None:
        self.starts += 1
        try:
            server.start()
        except HarnessStartError as exc:
            raise Unjudgeable(f"the runtime did not start: {exc.message}") from None

    def record(self) -> tuple[list[Point], int]:
        """The points of one traced write."""
        server, scratch = self._ready()
        trace_file = os.path.join(scratch.root, "trace")
        self.recorded_key = self.ctx.submission_id()
        options = ["-ttt", "-y", "-yy", "-e", "trace=" + ",".join(TRACED)]
        with self._traced(server, options, trace_file):
            began = time.time()
            call = self.ctx.write_task(self.recorded_key, self.ctx.task(), connection=server)
            ended = time.time()
        self.ctx.expect_ok(call, "the traced write")
        self.effects += 1
        own_port = server.port if isinstance(server, BindingConnection) else None
        with open(trace_file, encoding="utf-8", errors="replace") as handle:
            calls = entered(handle)
        return find_points(calls, scratch.state, began, ended, own_port)

    @contextlib.contextmanager
    def _traced(self, server: Runnable, options: list[str], output: str) -> Iterator[None]:
        leader = server.leader_pid
        assert leader is not None  # started by _ready
        try:
            with attached(self.strace, leader, options, output):
                yield
        except AttachError as exc:
            self.ctx.skip(f"strace could not attach to the runtime here: {exc}")

    def kill_at(self, point: Point) -> dict[str, Any]:
        """Kill the runtime entering ``point`` during a write, start it again, and judge
        the retry; the outcome for the evidence."""
        outcome: dict[str, Any] = {"point": point.name, "syscall": point.syscall, "when": point.when}
        outcome.update(target=point.target, counted_on=point.path or "every call of the thread")
        if point.path is not None and self.effects != 1:
            # A file the write names after what it makes (its task id, say) has the
            # recorded name only in a state like the recorded one: one task before it.
            self.end()
        server, scratch = self._ready()
        submission_id, task = self.ctx.submission_id(), self.ctx.task()
        # A path named after the traced write's key names this write's key here.
        on = point.path.replace(self.recorded_key, submission_id) if point.path else None
        output = os.path.join(scratch.root, f"kill-{self.starts}")
        with self._traced(server, [*point.strace_options(scratch.state, on), "-y", "-yy"], output):
            call = self.ctx.write_task(submission_id, task, connection=server)
            if not call.answered or not server.alive:
                # What else the runtime started goes too, before strace detaches: it
                # cannot detach from a process the kill left dying.
                server.kill()
        outcome["killed"] = not call.answered
        outcome["landed_on"] = landed_on(output, point.syscall, scratch.state)
        if not server.alive:  # killed, even after it answered (a step after the answer)
            server.kill()
            self._start(server)
        try:
            bound = server.recovery_s + self.ctx.call_timeout
            final = converge(self.ctx, submission_id, task, bound, connection=server)
            listed = self.ctx.tasks(connection=server)
            expect_identity(self.ctx, final, listed, submission_id, "the retry after the kill")
            self.ctx.check(
                listed.count == self.effects + 1,
                f"the listing holds {listed.count - self.effects} effects after one write "
                f"({listed.count} tasks, {self.effects} of them from before it)",
            )
            self.effects += 1
            outcome["outcome"] = "one effect"
            outcome["retry"] = final.get("disposition")
        except ScenarioFailed as exc:
            outcome["outcome"] = str(exc)
            self.end()
        return outcome

    def end(self) -> None:
        if self.server is not None:
            self.server.kill()
        self.server = self.scratch = None


def landed_on(output: str, syscall: str, state_dir: str) -> str | None:
    """What the call the kill landed on names (strace's output of an injecting run): the
    call of ``syscall`` that was entered and never returned; None when none was."""
    try:
        with open(output, encoding="utf-8", errors="replace") as handle:
            calls = entered(handle)
    except OSError:
        return None
    root = os.path.realpath(state_dir)
    for call in calls:
        if call.name == syscall and call.result == "?":
            return _target(call, root, None) or call.args[:120]
    return None
