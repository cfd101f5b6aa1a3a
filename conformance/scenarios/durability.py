"""DURABILITY-TRACE: every durable file step is followed by an fsync of its directory.

Kill tests cannot see a missing directory fsync: the file is there after a SIGKILL
because the kernel's page cache survives the process. Only a power cut loses the
directory entry. So this scenario watches the system calls instead: it runs one
creation of the harness under ``strace -f -y`` and checks, on the trace, the POSIX
recipe the contract requires (DUR-1):

* a file created in the state directory and fsynced (it holds a stage) needs an
  fsync (or fdatasync) of its directory, at any moment after the create, before the
  next stage is made durable after the file's own fsync. "Created" means the open made
  a new directory entry: an ``O_CREAT`` open of a file that already exists (a database
  opened again) creates nothing, so it owes nothing;
* a rename into the state directory (temp + fsync + rename) needs the same;
* a directory created in the state directory needs its parent fsynced.

"The next stage is made durable" is the next rename, the next fsync of another
regular file, or the next response line on stdout (committed must be durable before
the answer leaves). A created file that is never fsynced (a lock file) is no stage;
a temporary file that is later renamed is covered by its rename. Which names exist
is known from a listing of the state directory taken before the traced start, and
from the creates, renames and unlinks of the trace.

The scenario is skipped, with the reason, where ``strace`` is missing or cannot
trace; it is never counted as a pass then.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from retryproof.adapters.connection import HarnessStartError
from retryproof.adapters.process import ProcessConnection
from retryproof.adapters.process_groups import Scratch
from retryproof.conformance.context import Unjudgeable
from retryproof.conformance.scenarios import Context, scenario
from retryproof.conformance.strace import Syscall, parse_trace, tracing_options

# The system calls the check needs; -y prints the path behind every fd argument.
TRACED_SYSCALLS = (
    "open",
    "openat",
    "creat",
    "mkdir",
    "mkdirat",
    "rename",
    "renameat",
    "renameat2",
    "link",
    "linkat",
    "unlink",
    "unlinkat",
    "rmdir",
    "fsync",
    "fdatasync",
    "write",
    "chdir",
)

_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
_FD_PATH = re.compile(r"^(?:AT_FDCWD|-?\d+)<(?P<path>[^>]*)>")
_RESULT_PATH = re.compile(r"^\d+<(?P<path>[^>]*)>")


def _unescape(text: str) -> str:
    # strace prints C escapes; paths the contract allows are plain ASCII, so only the
    # escapes that can occur at all are decoded.
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m[1], m[1]), text)


def _strings(args: str) -> list[str]:
    return [_unescape(s) for s in _STRING.findall(args)]


@dataclass(frozen=True)
class Event:
    """A file-system step the check cares about."""

    seq: int
    kind: str  # create | mkdir | rename | remove | sync | respond
    path: str  # absolute; for a rename or link, the new name
    source: str = ""  # a rename's or link's old name
    call: str = ""  # the system call, for the evidence
    exclusive: bool = False  # a create with O_EXCL: the name itself is a fact


def file_events(calls: Iterable[Syscall], cwd: str) -> Iterator[Event]:
    """Turn successful system calls into file events with absolute paths.

    Relative paths resolve against the caller's working directory, which strace -y
    prints beside ``AT_FDCWD``; ``cwd`` is the harness's starting directory.
    """
    cwds: dict[int, str] = {}

    def absolute(pid: int, path: str, base: str | None = None) -> str:
        return os.path.normpath(os.path.join(base or cwds.get(pid, cwd), path))

    for call in calls:
        if not call.ok:
            continue
        head = call.args.split(",", 1)[0].strip()
        fd_path = _FD_PATH.match(head)
        if head.startswith("AT_FDCWD") and fd_path:
            cwds[call.pid] = fd_path["path"]
        name = call.name
        if name == "chdir":
            cwds[call.pid] = absolute(call.pid, _strings(call.args)[0])
        elif name in ("open", "openat", "creat") and (name == "creat" or "O_CREAT" in call.args):
            result_path = _RESULT_PATH.match(call.result)
            path = result_path["path"] if result_path else absolute(call.pid, _strings(call.args)[0])
            yield Event(call.seq, "create", path, call=name, exclusive="O_EXCL" in call.args)
        elif name in ("mkdir", "mkdirat"):
            base = fd_path["path"] if name == "mkdirat" and fd_path else None
            yield Event(call.seq, "mkdir", absolute(call.pid, _strings(call.args)[0], base))
        elif name in ("rename", "renameat", "renameat2", "link", "linkat"):
            strings = _strings(call.args)
            if len(strings) < 2:
                continue
            bases: list[str | None] = [None, None]
            if name.endswith("at") or name == "renameat2":
                # renameat(olddirfd<p>, "old", newdirfd<p>, "new"): the fds carry the bases.
                dir_paths = re.findall(r"(?:AT_FDCWD|-?\d+)<([^>]*)>", call.args)
                if len(dir_paths) >= 2:
                    bases = [dir_paths[0], dir_paths[1]]
            # A link of a complete temp file is an exclusive create that never exposes
            # a torn file; for the check it is a rename that keeps the old name.
            yield Event(
                call.seq,
                "rename",
                absolute(call.pid, strings[1], bases[1]),
                absolute(call.pid, strings[0], bases[0]),
                call="link" if name.startswith("link") else "rename",
            )
        elif name in ("unlink", "unlinkat", "rmdir") and _strings(call.args):
            base = fd_path["path"] if name == "unlinkat" and fd_path else None
            yield Event(call.seq, "remove", absolute(call.pid, _strings(call.args)[0], base), call=name)
        elif name in ("fsync", "fdatasync") and fd_path:
            yield Event(call.seq, "sync", fd_path["path"])
        elif name == "write" and head.startswith("1<"):
            yield Event(call.seq, "respond", "")


@dataclass(frozen=True)
class Violation:
    step: str  # what needed its directory fsynced
    directory: str
    deadline: str  # what happened first

    def describe(self, root: str) -> str:
        return f"{self.step} was not followed by fsync({_rel(self.directory, root)}/) before {self.deadline}"


def _rel(path: str, root: str) -> str:
    rel = os.path.relpath(path, root)
    return "." if rel == "." else rel


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def check_directory_fsyncs(
    events: list[Event], state_dir: str, existing: Iterable[str] = ()
) -> tuple[int, list[Violation]]:
    """Return (durable steps checked, violations) for the steps inside ``state_dir``.

    ``state_dir`` must be the real path (strace -y prints resolved paths) and must
    still exist: whether an fsynced path is a directory is read from the disk.
    ``existing`` holds the absolute paths that existed before the trace began.
    """
    root = os.path.realpath(state_dir)
    renamed_away = {event.source for event in events if event.kind == "rename"}
    present = set(existing)
    # (position the directory fsync may come from, position the deadline runs from, directory, description)
    obligations: list[tuple[int, int, str, str]] = []
    for position, event in enumerate(events):
        made_new = event.path not in present
        if event.kind == "remove":
            present.discard(event.path)
        elif event.kind == "rename":
            if event.call == "rename":  # a link keeps its old name
                present.discard(event.source)
            present.add(event.path)
        elif event.kind in ("create", "mkdir"):
            present.add(event.path)
        if not _inside(event.path, root) or event.path == root:
            continue
        rel = _rel(event.path, root)
        if event.kind == "rename":
            obligations.append(
                (position, position, os.path.dirname(event.path), f"{event.call} {_rel(event.source, root)} -> {rel}")
            )
        elif event.kind == "mkdir":
            obligations.append((position, position, os.path.dirname(event.path), f"mkdir {rel}/"))
        elif event.kind == "create" and made_new and event.path not in renamed_away:
            # A created file is a stage when its name is a fact (O_EXCL) or the runtime
            # fsyncs it; the deadline runs from its own fsync. A lock file is neither.
            synced = next(
                (
                    p
                    for p in range(position + 1, len(events))
                    if events[p].kind == "sync" and events[p].path == event.path
                ),
                None,
            )
            if synced is not None or event.exclusive:
                obligations.append(
                    (position, synced if synced is not None else position, os.path.dirname(event.path), f"create {rel}")
                )

    def is_stage_point(event: Event, owner: str) -> bool:
        if event.kind == "respond":
            return True
        if event.kind == "rename":
            return _inside(event.path, root)
        return (
            event.kind == "sync" and event.path != owner and _inside(event.path, root) and not os.path.isdir(event.path)
        )

    violations = []
    for made, start, directory, description in obligations:
        owner = events[start].path
        deadline = next(
            (later for later in events[start + 1 :] if is_stage_point(later, owner)),
            None,
        )
        until = deadline.seq if deadline is not None else None
        if any(
            later.kind == "sync" and later.path == directory and (until is None or later.seq < until)
            for later in events[made + 1 :]
        ):
            continue
        if deadline is None:
            violations.append(Violation(description, directory, "the process ended"))
        elif deadline.kind == "respond":
            violations.append(Violation(description, directory, "the response was sent"))
        elif deadline.kind == "rename":
            violations.append(
                Violation(
                    description,
                    directory,
                    f"{deadline.call} {_rel(deadline.source, root)} -> {_rel(deadline.path, root)}",
                )
            )
        else:
            violations.append(Violation(description, directory, f"fsync({_rel(deadline.path, root)})"))
    return len(obligations), violations


def existing_paths(state_dir: str) -> set[str]:
    """Every path under ``state_dir`` (real paths, as strace -y prints them)."""
    root = os.path.realpath(state_dir)
    found: set[str] = set()
    for directory, subdirectories, files in os.walk(root):
        found.update(os.path.join(directory, name) for name in (*subdirectories, *files))
    return found


# -- the scenario ----------------------------------------------------------------------


#: Under ``strace -f`` the traced calls stop at the tracer (every call, where strace
#: cannot filter them: ``strace.tracing_options``), so the traced harness
#: gets this many times the run's call timeout (60 s at the default 10 s). That also
#: covers sharing the machine with the other ``--jobs``: what is judged is the order of
#: the calls in the trace, which load does not change, so the scenario does not run alone.
STRACE_SLOWDOWN = 6


@scenario("DURABILITY-TRACE")
def durability_trace(ctx: Context) -> None:
    strace = shutil.which("strace")
    if strace is None:
        ctx.skip("strace is not installed on this machine; the directory-fsync check needs a system-call trace")
    # Started once first: the trace judges a creation on a state the runtime has already
    # set up (a database file it creates at start), not its set-up.
    probe = ctx.unstarted()  # a server through a binding is known untraceable before a start
    command, state_dir = getattr(probe, "command", None), getattr(probe, "state_dir", None)
    work_dir = getattr(probe, "work_dir", None) or os.getcwd()
    if not command or not state_dir:
        ctx.skip("this connection does not run a harness command line, so it cannot be traced")
    ctx.start()
    shown = list(getattr(probe, "shown", command))
    ctx.stop()
    _rehearse(ctx, command, shown, getattr(probe, "start_timeout", ctx.call_timeout))
    with tempfile.TemporaryDirectory(prefix="retryproof-strace-") as scratch:
        trace_file = os.path.join(scratch, "trace")
        existing = existing_paths(state_dir)
        options = [*tracing_options(strace), "-y", "-e", "trace=" + ",".join(TRACED_SYSCALLS), "-o"]
        traced = ProcessConnection(
            [strace, *options, trace_file, "--", *command],
            state_dir,
            shown=["strace", *options, "<trace file>", "--", *shown],
            call_timeout=ctx.call_timeout * STRACE_SLOWDOWN,
            start_timeout=ctx.call_timeout * STRACE_SLOWDOWN,
            work_dir=work_dir,
            wrapped=True,
        )
        ctx.connections.append(traced)
        try:
            traced.start()
        except HarnessStartError as exc:
            ctx.skip(f"strace could not trace the harness here: {(exc.stderr or exc.message).strip()[-300:]}")
        submission_id, task = ctx.submission_id(), ctx.task()
        ctx.expect_ok(ctx.write_task(submission_id, task, connection=traced), "the traced creation")
        traced.stop()
        with open(trace_file, encoding="utf-8", errors="replace") as handle:
            events = list(file_events(parse_trace(handle), work_dir))
    checked, violations = check_directory_fsyncs(events, state_dir, existing)
    root = os.path.realpath(state_dir)
    ctx.note("durable_steps_checked", checked)
    ctx.note("violations", [violation.describe(root) for violation in violations])
    ctx.check(checked > 0, "the trace shows no durable file step in the state directory: nothing was made durable")
    ctx.check(
        not violations,
        f"{len(violations)} durable step(s) without a directory fsync: "
        + "; ".join(v.describe(root) for v in violations[:3]),
    )


def _rehearse(ctx: Context, command: list[str], shown: list[str], start_timeout: float) -> None:
    """One untraced creation on a throwaway state directory, within the run's call
    timeout: a harness that does not answer write_task would otherwise cost the traced
    call's deadline, STRACE_SLOWDOWN times longer, before anything could be judged."""
    with Scratch("retryproof-rehearsal-") as rehearsal:
        untraced = ProcessConnection(
            command,
            rehearsal.state,
            call_timeout=ctx.call_timeout,
            start_timeout=start_timeout,
            work_dir=rehearsal.work,
            shown=shown,
        )
        ctx.connections.append(untraced)
        try:
            untraced.start()
        except HarnessStartError as exc:
            raise Unjudgeable(f"the harness did not start: {exc.message}") from None
        ctx.expect_ok(ctx.write_task(ctx.submission_id(), ctx.task(), connection=untraced), "an untraced creation")
        untraced.kill()
