"""CRASH-POINTS: a SIGKILL at every durable step of one write, without any hook.

A runtime without failpoints (a server through a binding, a harness that declares
none) still has crash windows: between claiming a key and making the effect, between
two writes of a stored response. Crash-consistency testers find them from the
system calls (ALICE, CrashMonkey); so does this scenario:

1. *Record.* On a fresh state directory the runtime runs under ``strace -f -ttt -y
   -yy`` and, once it has settled (below), makes one write. Its points are the system
   calls entered while that call ran that change durable state or reach another
   store: a create, write, truncate, rename, link, unlink or mkdir on a file of the
   state directory; a write or send on a socket the runtime connected to (a
   database, a cache). An fsync is no point: a SIGKILL loses no page cache, so a
   kill there leaves what a kill at the next step leaves (DURABILITY-TRACE judges
   the fsyncs). Nor is a re-open with O_CREAT (no O_TRUNC) of a file the trace
   shows created earlier and not removed or renamed away since: it changes nothing
   either (``points_redundant``; the reference's journal lock is re-opened so on each
   write). Only what the trace
   proves counts: a file it never showed created is taken as new, and a removal or
   rename whose names it cannot resolve forgets every file. The rule trusts that no
   process outside the traced tree removes the runtime's files between two of its
   calls (strace follows the runtime's children, not a database server's).
2. *Kill.* For each point, on a fresh state directory, the runtime runs under strace
   and makes the same write, and is killed entering the point's call (N: that call's
   number among its thread's calls of SYSCALL, as strace counts them), before it
   runs. It starts again, untraced, on that state, and the key is retried until it
   answers with its effect within the runtime's recovery bound plus a call timeout.
   The listing must hold exactly that one effect.

Settling. A server may say it is ready while it goes on starting: Restate's ingress
accepted while its storage was still opening its databases, so its start-up's writes
fell inside the recorded write and became nearly all its points, and their kills landed
while the kit read the binding's listing before the write, which was never sent. So
after the ready the recording waits until the runtime has entered no durable call for
a quarter of its start's time, or, once it has entered one, for 0.2 s or three times
the longest pause between its calls since when longer (5 ms to 0.5 s; at most
``SETTLE_BOUND_S`` in all), as the evidence says (``settled_before_the_write``). A runtime that made no durable call
meanwhile (the reference) runs its kill phase exactly as before; where the recording
saw one, each kill-phase start waits as long for the point's own syscall to go quiet on
the targets a point can have (a log line on stderr is none). The write is sent when
the kit sends its request: a binding without a reused rule first has the kit read its
listing, and the server's calls for that listing are not the write's, so the recording
starts at the request (``BindingConnection.sent_at``). A kill that lands before the
write is sent (during that wait, in that listing, or on a call strace shows entered
before it) is a crash state of the start, not the point's: the write is then not sent,
and the point is listed as landed elsewhere (``landed_before_the_write``), never
counted as tested. What settling cannot remove is a server's periodic work (a
heartbeat every second) that falls inside the write: those calls stay points, and the
per-thread rules below tell where their kills landed.

How the kill lands. Where strace has ``--seccomp-bpf`` (``tracing_options``), the
kill-phase start runs under it, so the runtime stops at the tracer only at the point's
syscall: without the filter every call of a Python start stops there, which made each
such start cost about 1.7 times an untraced one. Under the filter strace 6.1 does not
deliver an injected ``signal=KILL`` once ``when`` is 2 or more, but it counts right for
``delay_enter``: strace holds the N-th call at entry (parked, not run, its entry line
written), the kit reads strace's output as it is written (every ``POLL_S``) and
SIGKILLs the process group as soon as the parked entry shows, strace with it (a killed
tracee alone leaves strace holding the output pipe until the delay ends). The delay is
twice the traced call's timeout, so a park the kit never sees is still parked when the
write times out and the kit kills it. The parked entry names its target (``landed_on``)
and its thread's earlier calls of the count: a kill on another target than the recorded
one, or on the same target in a thread whose earlier calls acted on other things
(``thread_as_recorded``: another thread's path, say a background flush that reached the
count first), is listed (``points_landed_elsewhere``), so the evidence never passes it
off as the point's, and a run where no kill landed on its recorded call is an error.
Between the park and the kill the runtime's other threads run for a few milliseconds,
where ``signal=KILL`` stopped them at once; the parked thread has not made the call, and whatever the others did meanwhile is what they could have done
before any SIGKILL: a state a crash may leave, which the contract must survive all the
same. An strace without the filter injects the kill itself (``signal=KILL``), as before.

strace counts per thread, and any thread's N-th call of SYSCALL triggers the kill: a
point another thread reaches first under the same count, and that no count on its path
can reach either (the path is named after the recording process), is not reachable
this way and is only counted (``unreachable``). Past ``MAX_POINTS`` the points are sampled
evenly. The points run one after another: two at once (tried, 0.74x for DBOS's 24
points) let each point's checks mark, and its retries overwrite, the other's calls and
evidence, so a report's details would follow the timing. ``RETRYPROOF_CRASH_POINT=SYSCALL:N`` (in the reproduce line of a failure, and in its
replay file) runs that one point, a redundant one too, or ``SYSCALL:N:PATH`` a point
counted on its path. A start that does more the first time (Python compiling a
module and renaming its bytecode into place, in another thread) takes a count before
the write's thread does, and the write's call is then named by its path: such a name
finds the same call in a run whose start did not (``Found.on_their_paths``).

A target named after the process that made it (the reference's temporary
``.tmp-<pid>-0``) is shown with ``<pid>`` for that process's id (``unnumbered``), so a
report reads the same for one seed; whether a kill landed as recorded is judged on the
names themselves.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import shutil
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import cache, partial
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from retryproof.adapters.connection import Connection, HarnessStartError
from retryproof.adapters.process import ProcessConnection
from retryproof.adapters.process_groups import Scratch
from retryproof.conformance import replay_file
from retryproof.conformance.context import Context, ScenarioFailed, Unjudgeable
from retryproof.conformance.scenarios import scenario
from retryproof.conformance.scenarios.common import converge, expect_identity
from retryproof.conformance.strace import Follower, NthEntry, Syscall, entered, tracing_options

#: The most points one run kills at; past it they are sampled evenly.
MAX_POINTS = 24
#: Names a reproduction's point: ``SYSCALL:N``.
POINT_ENV = "RETRYPROOF_CRASH_POINT"
#: A traced start and call get this many times their usual bound (every traced call
#: stops at the tracer).
SLOWDOWN = 6
#: After it says it is ready, the runtime is watched until it has entered no durable
#: call for this share of its start's time (within the two bounds), or for
#: ``SETTLE_GAPS`` times the longest pause between its calls since, when longer (a
#: loaded machine stretches a start's pauses, and its start with them; up to the upper
#: bound): a server that goes on starting past its ready (Restate's storage opened its
#: databases for 0.5 s after its port accepted) does so before the write, not inside
#: it. A quiet runtime (the reference: 15-50 ms) costs that much once.
SETTLE_SHARE = 0.25
SETTLE_GAPS = 3
SETTLE_MIN_S, SETTLE_MAX_S = 0.005, 0.5
#: The least quiet a runtime seen going on after its ready is given: until its second
#: call there is no pause to scale by (a 90 ms start, 23 ms of quiet, met a start-up
#: tail's second write 30 ms after its first under load 11).
SETTLE_TAIL_S = 0.2
#: The longest wait for a runtime to settle: one that never does is written to anyway.
SETTLE_BOUND_S = 10.0

_FILE_WRITES = ("write", "pwrite64", "writev", "pwritev", "pwritev2", "ftruncate")
_SENDS = ("sendto", "sendmsg")
_NAMES = ("rename", "renameat", "renameat2", "link", "linkat", "unlink", "unlinkat", "mkdir", "mkdirat", "rmdir")
_OPENS = ("open", "openat", "creat")
TRACED = (*_FILE_WRITES, *_SENDS, *_NAMES, *_OPENS)

_FD = re.compile(r"^-?\d+<(?P<what>.*)>$")
_RESULT_PATH = re.compile(r"^\d+<(?P<path>[^>]*)>")
#: A call's arguments as strace -y prints them: a descriptor with its path (``AT_FDCWD</d>``,
#: ``5</d/f>``, ``3<UNIX:[1,"/s"]>``) or a string.
_ARGUMENT = re.compile(
    r'(?P<fd>(?:AT_FDCWD|-?\d+)<(?P<dir>(?:[^>"]|"(?:[^"\\]|\\.)*")*)>)|"(?P<string>(?:[^"\\]|\\.)*)"'
)
_TCP = re.compile(r"^TCP(?:v6)?:\[(?P<local>.*)->(?P<peer>.*)\]$")
_UNIX = re.compile(r'^UNIX(?:-STREAM)?:\[\d+(?:->\d+)?,"(?P<path>[^"]+)"\]$')

if TYPE_CHECKING:
    from retryproof.adapters.binding.connection import BindingConnection

T = TypeVar("T")


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
    #: What the recording thread's earlier calls counted with this one acted on (``_what``):
    #: a kill that lands on the same target after other calls is another thread's.
    before: tuple[str, ...] = field(default=(), compare=False)
    #: ``target`` as the report shows it, the recording's process ids as ``<pid>``
    #: (``unnumbered``); None: ``target`` as it is.
    shown: str | None = field(default=None, compare=False)

    @property
    def name(self) -> str:
        return f"{self.syscall}:{self.when}" + (f":{self.path}" if self.path else "")

    def strace_options(self, state_dir: str, park_us: int | None = None) -> list[str]:
        """strace's options for this point: a kill injected at the call, or, with
        ``park_us``, the call held at entry that long (the kit kills meanwhile)."""
        action = f"delay_enter={park_us}" if park_us else "signal=KILL"
        inject = ["-e", f"trace={self.syscall}", "-e", f"inject={self.syscall}:{action}:when={self.when}"]
        if self.path is None:
            return inject
        return ["-P", os.path.join(os.path.realpath(state_dir), self.path), *inject]


@dataclass(frozen=True)
class Found:
    """What the recorded trace holds: the points, the points no strace count can reach
    (counted), the points that change nothing (counted), and the same calls as the
    points and redundant points named by their thread's count, each counted on its
    path instead where that count reaches it (``RETRYPROOF_CRASH_POINT`` finds them)."""

    points: list[Point]
    unreachable: int
    redundant: list[Point]
    on_their_paths: list[Point] = field(default_factory=list)


@dataclass(frozen=True)
class Settled:
    """How the recording's runtime settled after its ready: the quiet it was given, the
    durable calls it entered meanwhile, and how long that took."""

    quiet_s: float
    calls: int
    waited_s: float

    @property
    def kill_phase_quiet_s(self) -> float | None:
        """What each kill-phase start waits for: the same quiet where the recording saw
        the runtime go on after its ready, else nothing (a quiet runtime's kill phase
        runs as it always did)."""
        return self.quiet_s if self.calls else None


def settle(entered_at: Callable[[], list[float]], quiet_s: float, stop: Callable[[], bool] = lambda: False) -> Settled:
    """Wait from now until the runtime has entered no call of ``entered_at`` (the entry
    times of the calls its trace shows since the last asking) for ``quiet_s``, or for
    ``SETTLE_GAPS`` times the longest pause between two of them when longer, and for
    ``SETTLE_TAIL_S`` once it has entered one (each at most ``SETTLE_MAX_S``); at most
    ``SETTLE_BOUND_S`` in all, or until ``stop``."""
    ready = time.time()
    seen: list[float] = []
    while True:
        seen = sorted([*seen, *(at for at in entered_at() if at >= ready)])
        pause = max((later - earlier for earlier, later in itertools.pairwise(seen)), default=0.0)
        quiet = max(quiet_s, min(max(SETTLE_GAPS * pause, SETTLE_TAIL_S if seen else 0.0), SETTLE_MAX_S))
        last = seen[-1] if seen else ready
        now = time.time()
        if now - last >= quiet or now - ready >= SETTLE_BOUND_S or stop():
            return Settled(round(quiet, 3), len(seen), round(now - ready, 3))
        time.sleep(min(last + quiet - now, 0.05))


def find_points(calls: list[Syscall], state_dir: str, began: float, ended: float, own_port: int | None) -> Found:
    """The points among ``calls`` (entry order) entered between ``began`` and ``ended``."""
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
    pids = frozenset(str(call.pid) for call in calls)
    numbered = []
    existing: set[str] = set()
    # What each thread's calls acted on, per count: a point's ``before``.
    acted_on: dict[tuple[Any, ...], list[str]] = {}
    for call in calls:
        paths = _paths(call, root)
        changes = _reopens(call, root, existing)
        numbered.append(
            (call, count((call.name,), call), {path: count((call.name, path), call) for path in paths}, changes)
        )
        what = _what(call, root)
        for key in [(call.name,), *((call.name, path) for path in paths)]:
            acted_on.setdefault((call.pid, *key), []).append(what)
    points: list[Point] = []
    redundant: list[Point] = []
    on_their_paths: list[Point] = []
    unreachable = 0
    for call, when, on_path, changes in numbered:
        if call.at is None or not began <= call.at <= ended:
            continue
        target = _target(call, root, own_port)
        if target is None:
            continue
        found = points if changes else redundant
        shown = unnumbered(target, pids)
        reachable = [
            Point(call.name, nth, target, path, tuple(acted_on[(call.pid, call.name, path)][: nth - 1]), shown)
            for path, nth in on_path.items()
            if first_to_reach[(call.name, path, nth)] == call.seq and unnumbered(path, pids) == path
        ]
        if first_to_reach[(call.name, when)] == call.seq:
            before = tuple(acted_on[(call.pid, call.name)][: when - 1])
            found.append(Point(call.name, when, target, before=before, shown=shown))
            # A start that does more (a module's bytecode compiled and renamed into place
            # in another thread, the first time only) names this call by its path: a
            # reproduce line from such a run must find it here too.
            on_their_paths += reachable[:1]
        elif reachable:
            found.append(reachable[0])
        else:
            unreachable += 1
    return Found(points, unreachable, redundant, on_their_paths)


def unnumbered(target: str, pids: frozenset[str]) -> str:
    """``target`` with each number that is one of ``pids`` (the traced process's and its
    threads' ids) written ``<pid>``: a file named after the process that made it has
    another name in every run, and a report must read the same for one seed."""
    return re.sub(r"\d+", lambda number: "<pid>" if number[0] in pids else number[0], target)


def _reopens(call: Syscall, root: str, existing: set[str]) -> bool:
    """Whether ``call`` may change the state directory, keeping ``existing`` (the files
    this trace shows created and not since removed or renamed away) up to date. An open
    with O_CREAT of such a file, without O_TRUNC, changes nothing: a kill entering it
    leaves what a kill at the next point leaves. Only what the trace proves counts: a
    file the trace never showed created is taken as new, and a removal or rename whose
    names the trace does not resolve (a relative name without a directory descriptor)
    forgets every file, since it may have removed any of them."""
    names = _names(call)
    inside = [_inside(name, root) if name else None for name in names]
    if call.name in _OPENS:
        opened = _RESULT_PATH.match(call.result)
        path = _inside(opened["path"], root) if opened else (inside[-1] if inside else None)
        if path is None or not ("O_CREAT" in call.args or call.name == "creat"):
            return True
        was = path in existing
        if call.ok and call.result != "?":
            existing.add(path)
        return not was or call.name == "creat" or "O_TRUNC" in call.args
    if not call.ok or call.result == "?" or call.name not in _NAMES:
        return True
    if None in names:
        existing.clear()
    elif call.name.startswith("rename"):
        _forget(existing, inside[0])
        if len(inside) > 1 and inside[1]:
            existing.add(inside[1])
    elif call.name.startswith(("link", "mkdir")) and inside[-1]:
        existing.add(inside[-1])
    elif call.name.startswith(("unlink", "rmdir")):
        _forget(existing, inside[0])
    return True


def _names(call: Syscall) -> list[str | None]:
    """The paths a call names, each resolved against the directory descriptor before it
    (``renameat(3</a>, "f", 4</b>, "g")``: ``/a/f``, ``/b/g``); None for a relative name
    with none (the process's working directory is not in the trace). Not for a write,
    whose strings are its data."""
    names: list[str | None] = []
    directory = None
    for argument in _ARGUMENT.finditer(call.args):
        if argument["fd"]:
            directory = argument["dir"] if argument["dir"].startswith("/") else None
            continue
        path = argument["string"]
        names.append(path if path.startswith("/") else os.path.join(directory, path) if directory else None)
    return names


def _forget(existing: set[str], path: str | None) -> None:
    """A file or directory removed or renamed away, and whatever was under it."""
    if path:
        existing -= {known for known in existing if known == path or known.startswith(path + "/")}


def _paths(call: Syscall, root: str) -> list[str]:
    """The state directory's files a call names (relative), as strace -P matches them."""
    found = []
    fd = _FD.match(call.args.split(",", 1)[0].strip())
    if fd and fd["what"].startswith("/"):
        found.append(fd["what"])
    if call.name not in _FILE_WRITES and call.name not in _SENDS:  # a write's strings are its data, not paths
        found += [name for name in _names(call) if name]
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
    inside = [_inside(name, root) if name else None for name in _names(call)]
    if not any(inside):
        return None
    return " -> ".join(path or "(outside)" for path in inside)


def _what(call: Syscall, root: str) -> str:
    """What a call acts on, for telling one thread's path from another's: its
    descriptor's file or socket (a write, a send), else the names it gives (an open, a
    rename), each relative when in the state directory."""
    fd = _FD.match(call.args.split(",", 1)[0].strip())
    if call.name in _FILE_WRITES or call.name in _SENDS:
        named = [fd["what"] if fd else "(unresolved)"]
    else:
        named = [name or "(unresolved)" for name in _names(call)]
    return " -> ".join(_inside(name, root) or name for name in named)


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
    if not isinstance(probe, ProcessConnection) and _as_binding(probe) is None:
        ctx.skip("this connection runs no command line the kit can run under strace")
    sibling = _siblings(ctx, probe)
    submission_id, task = ctx.submission_id(), ctx.task()
    chosen = os.environ.get(POINT_ENV)
    try:
        found, settled = _traced(ctx, partial(_record, ctx, sibling, strace, submission_id, task))
    except _TracedStartFailed as exc:
        ctx.skip(f"strace could not run the runtime here (twice): {exc}")
    ctx.note("settled_before_the_write", asdict(settled))
    points, unreachable = found.points, found.unreachable
    if chosen:
        named = [*points, *found.redundant, *found.on_their_paths]
        points = [point for point in named if point.name == chosen]
        ctx.check(bool(points), f"{POINT_ENV}={chosen} names no point of this runtime's write")
    if not points:
        raise Unjudgeable(
            "the trace of one write shows no system call that makes state durable or reaches a store "
            f"({unreachable} more that strace's count cannot reach): no crash point to kill at "
            "(a store written through mmap alone, say)"
        )
    run = sample(points, MAX_POINTS)
    park = "--seccomp-bpf" in tracing_options(strace)
    ctx.note("points_found", len(points))
    ctx.note("points_unreachable", unreachable)
    ctx.note("points_redundant", [point.name for point in found.redundant])
    ctx.note("points_run", len(run))
    ctx.note("kill", "parked at entry, then SIGKILL" if park else "strace signal=KILL at entry")
    outcomes: list[dict[str, Any]] = []
    ctx.note("points", outcomes)
    # A point strace lost the start of twice is named, not judged: one lost point must
    # not skip the points that ran (Restate-binding: 24 judged, one lost, all skipped).
    not_started: list[dict[str, str]] = []
    ctx.note("points_not_started", not_started)
    for point in run:
        try:
            kill = partial(_kill_at, ctx, sibling, strace, point, submission_id, task, park, settled.kill_phase_quiet_s)
            outcomes.append(_traced(ctx, kill))
        except _TracedStartFailed as exc:
            not_started.append({"point": point.name, "strace": str(exc)})
    # A point whose kill did not land while the write ran (a file name that differs from
    # run to run, under -P) is still judged, and counted here; so is a kill that landed
    # on another call than the recorded one (its crash state is real, but not the point's).
    ctx.note("points_not_reached", sum(not outcome["killed"] for outcome in outcomes))
    ctx.note("points_landed_elsewhere", [o["point"] for o in outcomes if o["killed"] and not o["landed_as_recorded"]])
    failed = [outcome for outcome in outcomes if outcome["outcome"] != "one effect"]
    if failed:
        first = _first(failed)
        ctx.reproduce_env[POINT_ENV] = first["point"]
        ctx.note(
            "replay",
            replay_file.scenario_replay(ctx.entry.id, ctx.seed, ctx.hello.implementation, {POINT_ENV: first["point"]}),
        )
        ctx.check(False, failure_reason(failed, len(run)))
    if not any(outcome["landed_as_recorded"] for outcome in outcomes):
        # Every write completed or was killed elsewhere: no crash state of this runtime's
        # own points was tested, so there is nothing to pass.
        raise Unjudgeable(
            f"no kill of the {len(run)} crash points landed on its recorded call "
            f"({len(not_started)} not started under strace, {sum(not outcome['killed'] for outcome in outcomes)} "
            "writes completed, the rest landed elsewhere): "
            "no crash point was tested"
        )


def _first(failed: list[dict[str, Any]]) -> dict[str, Any]:
    """The failure to name and replay first: a kill on the recorded call, else any kill,
    else a write that completed."""
    return next(
        (outcome for outcome in failed if outcome["landed_as_recorded"]),
        next((outcome for outcome in failed if outcome["killed"]), failed[0]),
    )


def failure_reason(failed: list[dict[str, Any]], run: int) -> str:
    """What the failed points say, naming first a point whose kill landed on its
    recorded call: a point whose kill did not land broke a write that completed, so it
    names no crash window, and one that landed elsewhere names the call it landed on."""
    first = _first(failed)
    unlanded = sum(not outcome["killed"] for outcome in failed)
    reason = f"{len(failed)} of {run} crash points broke the write"
    if unlanded:
        reason += f" ({unlanded} of them where the kill did not land: the write completed, then its retry broke)"
    where = f"{first['syscall']} #{first['when']} on {first['target']}"
    if first["killed"] and first.get("landed_before_the_write"):
        where += " (it landed before the write was sent)"
    elif first["killed"] and not first["landed_as_recorded"] and first.get("landed_on"):
        by = ", in a thread whose earlier calls differ" if first.get("thread_as_recorded") is False else ""
        where += f" (it landed on {first['landed_on']}{by})"
    if first["killed"]:
        return f"{reason}; first, a SIGKILL entering {where}: {first['outcome']}"
    return f"{reason}; first, the retry after a write whose kill at {where} did not land: {first['outcome']}"


Sibling = Callable[[str, str, tuple[str, ...], float], Connection]


def _siblings(ctx: Context, probe: Connection) -> Sibling:
    """Connections to the same runtime on another state directory, its command run
    under a prefix (strace), with bounds ``slowdown`` times the usual."""

    def make(state: str, work: str, prefix: tuple[str, ...], slowdown: float) -> Connection:
        binding = _as_binding(probe)
        if binding is not None:
            connection: Connection = type(binding)(
                binding.binding,
                state,
                call_timeout=binding.call_timeout * slowdown,
                start_timeout=binding.start_timeout * slowdown,
                wrap=prefix,
            )
        else:
            assert isinstance(probe, ProcessConnection)
            connection = ProcessConnection(
                [*prefix, *probe.command],
                state,
                shown=[*(["strace", "..."] if prefix else []), *probe.shown],
                call_timeout=probe.call_timeout * slowdown,
                start_timeout=probe.start_timeout * slowdown,
                work_dir=work,
                wrapped=bool(prefix),
            )
        ctx.connections.append(connection)
        return connection

    return make


def _as_binding(connection: Connection) -> BindingConnection | None:
    """``connection`` when it reaches a server through a binding. The binding's modules
    are imported only then: every harness run loads this scenario before its first one
    starts, and would pay for them (60 ms of CPU) there."""
    if isinstance(connection, ProcessConnection):
        return None
    from retryproof.adapters.binding.connection import BindingConnection

    return connection if isinstance(connection, BindingConnection) else None


def _port(connection: Connection) -> int | None:
    """The port of a binding's server; a harness listens on none."""
    binding = _as_binding(connection)
    return None if binding is None else binding.port


class _TracedStartFailed(Exception):
    """The runtime did not start under strace; the message says what strace and it said."""


def _start(ctx: Context, connection: Connection, traced: bool) -> None:
    try:
        connection.start()
    except HarnessStartError as exc:
        if traced:
            connection.kill()
            raise _TracedStartFailed((exc.stderr or exc.message).strip()[-300:]) from None
        raise Unjudgeable(f"the runtime did not start: {exc.message}") from None


def _traced(ctx: Context, attempt: Callable[[], T]) -> T:
    """``attempt`` (a recording or a point, each on a fresh scratch), once more when the
    runtime did not start under strace; a second loss propagates. strace 6.1 loses a
    multithreaded runtime's start now and then ("pid ... has delayed wait data set
    already"): Restate's CRASH-POINTS passed in one matrix run and was skipped in the
    next, on the same seed."""
    try:
        return attempt()
    except _TracedStartFailed as exc:
        ctx.evidence.setdefault("traced_starts_failed_once", []).append(str(exc))
        return attempt()


def _record(ctx: Context, sibling: Sibling, strace: str, submission_id: str, task: dict) -> tuple[Found, Settled]:
    with Scratch("retryproof-crash-points-") as scratch:
        trace_file = os.path.join(scratch.root, "trace")
        prefix = (
            strace,
            *tracing_options(strace),
            "-ttt",
            "-y",
            "-yy",
            "-e",
            "trace=" + ",".join(TRACED),
            "-o",
            trace_file,
            "--",
        )
        traced = sibling(scratch.state, scratch.work, prefix, SLOWDOWN)
        started = time.monotonic()
        _start(ctx, traced, traced=True)
        quiet_s = min(max(SETTLE_SHARE * (time.monotonic() - started), SETTLE_MIN_S), SETTLE_MAX_S)
        own_port = _port(traced)
        settled = settle(partial(_durable_entries, Follower(trace_file), scratch.state, own_port), quiet_s)
        asked = time.time()
        ctx.expect_ok(ctx.write_task(submission_id, task, connection=traced), "the traced write")
        ended = time.time()
        # From the request's sending on: a binding's listing read before it is not the write.
        began = _sent_at(traced, asked) or asked
        traced.kill()
        with open(trace_file, encoding="utf-8", errors="replace") as handle:
            calls = entered(handle)
        return find_points(calls, scratch.state, began, ended, own_port), settled


def _durable_entries(follower: Follower, state_dir: str, own_port: int | None) -> list[float]:
    """When the calls on the trace's lines since the last reading that are points
    (``_target``) were entered: what settling waits on, in the recording and in the kill
    phase alike (a runtime that logs to stderr twice a second would never go quiet)."""
    root = os.path.realpath(state_dir)
    return [call.at for call in follower.entered() if call.at and _target(call, root, own_port)]


def _sent_at(connection: Connection, asked: float) -> float | None:
    """When the write asked for at ``asked`` was sent: a binding's connection first
    reads the listing where its binding has no reused rule, and says when it sent the
    request after it (None: never, the server ended during that listing); a harness's
    request goes out as asked."""
    binding = _as_binding(connection)
    return asked if binding is None else binding.sent_at


def _kill_at(
    ctx: Context,
    sibling: Sibling,
    strace: str,
    point: Point,
    submission_id: str,
    task: dict,
    park: bool,
    quiet_s: float | None,
) -> dict:
    """Kill the runtime entering ``point`` during the write, restart it, and judge the
    retry; the outcome for the evidence. With ``park`` (strace has
    --seccomp-bpf) the call is parked and killed by the kit, and the outcome says which
    call the kill landed on; without, strace's injected SIGKILL kills (and where it
    landed is taken to be the point's call, as strace counts it).

    With ``quiet_s`` (the recording saw the runtime go on after its ready) the write
    waits, as the recording's did, until the point's call has not been entered on a
    point's target for that long. A kill that lands before the write is sent (in that
    wait, or in the listing a binding reads before sending it: ``_sent_at``) landed before
    the write, which is then not sent (nothing would answer it); with ``park``, so is a
    kill in the start (the killer watches it) and one on an entry strace shows made
    before the write was sent. Without ``park`` the kit has no killer: a kill strace
    injects in the start fails that start, so the point is tried once more and then
    named not started, never judged; one injected in the instant between the kit's
    seeing the runtime alive and sending a harness's write is taken as the write's.

    The park lasts twice the write's bound: should the killer miss the parked entry, the
    write times out while the call is still parked, and the kill that ends it lands on
    the point all the same (read back from the trace)."""
    outcome: dict[str, Any] = {"point": point.name, "syscall": point.syscall, "when": point.when}
    outcome.update(target=point.shown or point.target, counted_on=point.path or "every call of the thread")
    with Scratch("retryproof-crash-point-") as scratch:
        bound = ctx.call_timeout * SLOWDOWN
        trace_file = os.path.join(scratch.root, "trace")
        # Without --seccomp-bpf (no park) tracing_options are those flags less the filter.
        options = point.strace_options(scratch.state, park_us=int(2 * bound * 1_000_000) if park else None)
        prefix = (strace, *tracing_options(strace), "-ttt", "-y", "-yy", *options, "-o", trace_file, "--")
        traced = sibling(scratch.state, scratch.work, prefix, SLOWDOWN)
        # Watching from the start: a kill on a call the start enters ends it at once (a
        # start that then fails is that kill's, not strace's), not after the start's bound.
        killer = _Killer(trace_file, point, 2 * bound + SETTLE_BOUND_S)
        try:
            with killer if park else contextlib.nullcontext():
                try:
                    _start(ctx, traced, traced=True)
                except _TracedStartFailed:
                    if not killer.killed:
                        raise
                if quiet_s is not None:
                    durable = partial(_durable_entries, Follower(trace_file), scratch.state, _port(traced))
                    settle(durable, quiet_s, lambda: not traced.alive)
                asked, unsent = time.time(), not traced.alive
                answered = not unsent and ctx.write_task(submission_id, task, connection=traced).answered
                sent = None if unsent else _sent_at(traced, asked)
            outcome["killed"] = not answered
        finally:
            traced.kill()
        if not park:
            outcome["landed_before_the_write"] = bool(outcome["killed"] and sent is None)
            outcome["landed_as_recorded"] = bool(outcome["killed"] and sent is not None)
        else:
            outcome["killed_by"] = "the parked entry" if killer.killed else "the write's timeout"
            landed = killer.landed(scratch.state, _port(traced))
            outcome["landed_on"] = unnumbered(landed.target, killer.pids) if outcome["killed"] and landed else None
            # The same target reached by the same path: a thread whose earlier calls acted
            # on other things is not the recorded one (its crash state is not the point's).
            # None: no parked entry to compare (the write completed).
            outcome["thread_as_recorded"] = None if landed is None else _same_targets(point.before, landed.earlier)
            # Entered before the write was sent: a crash state of the runtime's start.
            early = sent is None or (landed is not None and landed.at is not None and landed.at < sent)
            outcome["landed_before_the_write"] = bool(outcome["killed"] and early)
            outcome["landed_as_recorded"] = bool(
                outcome["killed"]
                and not early
                and landed is not None
                and _same_target(point.target, landed.target)
                and outcome["thread_as_recorded"]
            )
        plain = sibling(scratch.state, scratch.work, (), 1)
        _start(ctx, plain, traced=False)
        try:
            final = converge(ctx, submission_id, task, plain.recovery_s + ctx.call_timeout, connection=plain)
            listed = ctx.tasks(connection=plain)
            expect_identity(ctx, final, listed, submission_id, "the retry after the kill")
            ctx.check(listed.count == 1, f"the listing holds {listed.count} effects after one write")
            outcome["outcome"] = "one effect"
            outcome["retry"] = final.get("disposition")
        except ScenarioFailed as exc:
            outcome["outcome"] = str(exc)
        finally:
            plain.kill()
    return outcome


#: How often the killer reads the parked trace: the other threads of the runtime run
#: this long at most (plus a scheduling delay) between the park and the kill.
POLL_S = 0.002


class _Killer:
    """Reads a kill-phase trace as strace writes it and SIGKILLs the runtime's process
    as soon as the point's call shows entered and parked (strace holds it at entry);
    bounded by ``bound_s`` and by the ``with`` block (the start, the settling and the
    write)."""

    def __init__(self, trace_file: str, point: Point, bound_s: float):
        self.trace_file, self.point, self.bound_s = trace_file, point, bound_s
        self.killed = False
        #: The parked thread's id and its process's: the numbers a file it names after
        #: its process carries (``unnumbered``); empty until a park is seen.
        self.pids: frozenset[str] = frozenset()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="crash-point-killer", daemon=True)

    def __enter__(self) -> _Killer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._done.set()
        self._thread.join(self.bound_s)

    def _watch(self) -> None:
        deadline = time.monotonic() + self.bound_s
        # Each poll parses only what strace wrote since the last: a long multithreaded
        # start's trace is read once, not once every POLL_S.
        watch, trace = NthEntry(self.point.syscall, self.point.when), Follower(self.trace_file)
        while not self._done.wait(POLL_S) and time.monotonic() < deadline:
            seen = watch.read(trace.written())
            if seen is None:
                continue
            call = seen.call
            # Parked: the call has not run, and will not. An entry whose thread already
            # ended in it (another thread's exit_group) is no park, and not this kill's.
            if seen.running:
                try:
                    # The whole group, strace with it: a killed tracee alone leaves strace
                    # holding its output pipe open until the park's delay ends. Marked
                    # first: a start the kill ends must find it marked.
                    self.pids = _process_ids(call.pid)
                    group = os.getpgid(call.pid)
                    if group != os.getpgrp():
                        self.killed = True
                        os.killpg(group, signal.SIGKILL)
                except ProcessLookupError:
                    self.killed = False
            return

    def landed(self, state_dir: str, own_port: int | None) -> Landed | None:
        """The call the kill landed on, read from the whole trace once strace has ended
        (the parked entry's arguments complete): the point's entry if it never finished,
        whoever killed it (this killer, or the kit when the write timed out); None when it
        finished, when its thread ended in it by an exit (exit_group: no kill landed
        there), or when it was never entered."""
        seen = NthEntry(self.point.syscall, self.point.when).read(Follower(self.trace_file).written())
        if seen is None or seen.finished or seen.exited:
            return None
        root = os.path.realpath(state_dir)
        target = _target(seen.call, root, own_port) or "(not a point)"
        return Landed(target, tuple(_what(call, root) for call in seen.earlier), seen.call.at)


def _process_ids(tid: int) -> frozenset[str]:
    """A thread's id and its process's (``Tgid``), read while it lives: a request's
    thread writes a file named after its process, whose id strace shows only where
    the process's first thread made a traced call."""
    ids = {str(tid)}
    with contextlib.suppress(OSError), open(f"/proc/{tid}/status", encoding="ascii") as status:
        ids.update(line.split()[1] for line in status if line.startswith("Tgid:"))
    return frozenset(ids)


class Landed(NamedTuple):
    """The call a kill landed on: its target, what its thread's earlier calls counted
    with it acted on, and when it was entered (strace -ttt)."""

    target: str
    earlier: tuple[str, ...]
    at: float | None


def _same_targets(recorded: tuple[str, ...], landed: tuple[str, ...]) -> bool:
    """Whether two threads' calls acted on the same things in the same order (as
    ``_same_target`` compares one)."""
    return len(recorded) == len(landed) and all(map(_same_target, recorded, landed))


def _same_target(recorded: str, landed: str | None) -> bool:
    """Whether a kill landed on the recorded point's call, as far as its target tells:
    the same kind of call on the same kind of file in the same directory, or on the same
    socket. A name differs from run to run where it carries a pid, a random temporary
    name or a generated id, so a word (hyphens joining it) holding a digit, or of 8
    characters or more, is taken as such a part (``.tmp-93yz_trd`` and ``.tmp-_c6krmor``
    match, and so do two uuids, ``TASK-1`` and ``TASK-2``; ``tasks/a.json`` and
    ``tasks/a.lock`` do not). A TCP socket is the same where its ends are
    (``_endpoints``): two stores on one host differ by their ports, which that rule took
    for numbers that vary and so matched any two TCP peers."""
    if landed is None:
        return False
    sockets = _endpoints(recorded), _endpoints(landed)
    if sockets != (None, None):
        return sockets[0] == sockets[1]

    def shape(target: str) -> str:
        return re.sub(
            r"[\w-]+", lambda word: "*" if len(word[0]) >= 8 or re.search(r"\d", word[0]) else word[0], target
        )

    return shape(recorded) == shape(landed)


def _endpoints(target: str) -> tuple[str, ...] | None:
    """A TCP socket's ends as a target names them (``tcp PEER``, ``_target``) or as its
    descriptor does (``TCP:[LOCAL->PEER]``, ``_what``), each an address and a port; None
    for anything else. A port in the kernel's ephemeral range is one the kernel handed
    out (a connecting client's, or a server's bound to port 0, as the kit's are) and
    differs from run to run, so it matches any other such port; an address, and any
    other port (a database's 5432, a cache's 6379), must be the same."""
    if tcp := _TCP.match(target):
        ends = [tcp["local"], tcp["peer"]]
    elif target.startswith("tcp "):
        ends = [target[len("tcp ") :]]
    else:
        return None
    low, high = _ephemeral_ports()
    named = []
    for end in ends:
        address, _, port = end.rpartition(":")
        named.append(f"{address}:*" if port.isdigit() and low <= int(port) <= high else end)
    return tuple(named)


@cache
def _ephemeral_ports() -> tuple[int, int]:
    """The kernel's range of ports it hands out (Linux's default where unreadable)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as ports:
            low, high = (int(port) for port in ports.read().split())
    except (OSError, ValueError):
        return 32768, 60999
    return low, high
