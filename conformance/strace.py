"""Reading ``strace -f -qq`` output: the system calls of a traced runtime, for the
scenarios that judge a trace (DURABILITY-TRACE) or kill at a point of one
(CRASH-POINTS).

Each line is ``PID [SECONDS.MICROS] NAME(ARGS) = RESULT``; a call another thread's line
interrupted is split into ``NAME(ARGS <unfinished ...>`` and ``<... NAME resumed>REST)
= RESULT``, joined here. The timestamp is there with ``-ttt``.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from retryproof.adapters.process_groups import forget_group, kill_group, start_group

#: strace's first release with ``--seccomp-bpf``.
SECCOMP_SINCE = (5, 3)


@cache
def tracing_options(strace: str) -> tuple[str, ...]:
    """How the scenarios record a trace with ``strace``: following forks, quietly, and,
    where it can, stopping the traced process only at the traced calls
    (``--seccomp-bpf``). Without the filter every system call of the runtime stops at
    the tracer, the thousand of a Python start among them, which made a traced start
    cost about 40% more CPU than an untraced one; the trace is the same either way, and
    where the kernel has no seccomp filter strace falls back to stopping at every call.
    An strace too old to know the option, or that cannot say its version, runs without
    it. (strace 6.1 miscounts an injection's ``when`` under the filter, a kill at a
    thread's second pwrite64 never landing; CRASH-POINTS attaches, where no filter
    applies.)"""
    try:
        done = subprocess.run([strace, "-V"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ("-f", "-qq")
    version = re.search(r"version (\d+)\.(\d+)", done.stdout)
    recent = version is not None and (int(version[1]), int(version[2])) >= SECCOMP_SINCE
    return ("-f", "-qq", "--seccomp-bpf") if recent else ("-f", "-qq")


#: How long strace gets to attach to a running process, and to detach from it.
ATTACH_S = 10.0

#: Yama's ptrace restriction (scope 1): only an ancestor may attach, unless the process
#: named its tracer. strace is the runtime's sibling, so a runtime started with this
#: prefix first allows any tracer (``PR_SET_PTRACER_ANY``), then becomes its command.
PTRACER_ANY = (
    sys.executable,
    "-c",
    "import ctypes, os, sys; ctypes.CDLL(None).prctl(0x59616D61, ctypes.c_ulong(-1), 0, 0, 0); "
    "os.execvp(sys.argv[1], sys.argv[1:])",
)


def attach_prefix() -> tuple[str, ...]:
    """What a runtime's command is run under so that strace can attach to it later:
    nothing where any process of the user may trace any other (no Yama, scope 0, or
    root), else ``PTRACER_ANY``."""
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope", encoding="ascii") as handle:
            scope = int(handle.read().strip() or 0)
    except (OSError, ValueError):
        return ()
    return () if scope == 0 or os.geteuid() == 0 else PTRACER_ANY


class AttachError(Exception):
    """strace could not attach (it said why, in the message)."""


def group_members(leader: int) -> list[int]:
    """The live processes of ``leader``'s process group (a server and what it started;
    a zombie is no process to attach to)."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # it ended meanwhile
        if int(fields[2]) == leader and fields[0] != "Z":  # pgrp, after the state and the parent
            members.append(int(entry))
    return members


def _traced_by(pid: int, tracer: int) -> bool:
    """Every thread of ``pid`` is traced by ``tracer`` (a process that ended counts as traced)."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    for thread in threads:
        try:
            with open(f"/proc/{pid}/task/{thread}/status", encoding="ascii", errors="replace") as handle:
                status = handle.read()
        except OSError:
            continue
        match = re.search(r"^TracerPid:\s*(\d+)", status, re.MULTILINE)
        if match is None or int(match[1]) != tracer:
            return False
    return True


@contextlib.contextmanager
def attached(strace: str, leader: int, options: Sequence[str], output: str) -> Iterator[subprocess.Popen]:
    """strace attached (``-f -p``) to every process of ``leader``'s group, ``options``
    (what to trace, what to inject) written to ``output``, from the moment every thread
    is traced; detached at the end (a process it killed is gone by then). A count
    (``when=N``) counts each thread's calls from the attach, so the start-up and the
    calls before it are outside it. No ``--seccomp-bpf``: a filter is installed at a
    process's exec, never on attach."""
    pids = group_members(leader)
    command = [strace, "-f", "-qq", *(arg for pid in pids for arg in ("-p", str(pid))), *options, "-o", output]
    tracer = start_group(command, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + ATTACH_S
        while not all(_traced_by(pid, tracer.pid) for pid in pids):
            if tracer.poll() is not None or time.monotonic() > deadline:
                assert tracer.stderr is not None
                said = tracer.stderr.read().decode(errors="replace").strip() if tracer.poll() is not None else ""
                raise AttachError(said[-300:] or f"strace did not attach within {ATTACH_S:g}s")
            time.sleep(0.002)
        yield tracer
    finally:
        if tracer.poll() is None:
            tracer.send_signal(signal.SIGINT)  # strace detaches and exits; its tracees run on
        try:
            tracer.communicate(timeout=ATTACH_S)
        except subprocess.TimeoutExpired:
            kill_group(tracer)  # the kernel detaches the tracees of a tracer that died
            tracer.communicate()
        forget_group(tracer)


_HEAD = r"^(?P<pid>\d+)\s+(?:(?P<at>\d+\.\d+)\s+)?"
_COMPLETE = re.compile(_HEAD + r"(?P<name>\w+)\((?P<args>.*)\)\s+=\s+(?P<result>.*)$")
_UNFINISHED = re.compile(_HEAD + r"(?P<name>\w+)\((?P<args>.*?)\s*<unfinished \.\.\.>$")
_RESUMED = re.compile(_HEAD + r"<\.\.\. (?P<name>\w+) resumed>(?P<args>.*)\)\s+=\s+(?P<result>.*)$")


@dataclass(frozen=True)
class Syscall:
    """One system call of a trace."""

    seq: int
    pid: int
    name: str
    args: str
    result: str
    #: When it was entered (seconds since the epoch), with ``-ttt``.
    at: float | None = None

    @property
    def ok(self) -> bool:
        return not self.result.startswith("-1")


def parse_trace(lines: Iterable[str]) -> list[Syscall]:
    """The completed calls in completion order: an interrupted call is placed where
    it completed (its effect is certain only then)."""
    return _numbered(_read(lines)[1])


def entered(lines: Iterable[str]) -> list[Syscall]:
    """Every call in the order the calls were entered (where a kill injected at entry
    lands); a call the trace never shows completed has the result ``?``."""
    return _numbered(_read(lines)[0])


def _read(lines: Iterable[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The calls in entry order and the completed ones in completion order."""
    entries: list[dict[str, Any]] = []
    completed: list[dict[str, Any]] = []
    pending: dict[tuple[int, str], dict[str, Any]] = {}
    for raw in lines:
        line = raw.rstrip("\n")
        if match := _UNFINISHED.match(line):
            record = _record(match, "?")
            entries.append(record)
            pending[(record["pid"], record["name"])] = record
        elif match := _RESUMED.match(line):
            key = (int(match["pid"]), match["name"])
            if key in pending:
                record = pending.pop(key)
                record["args"] += match["args"]
                record["result"] = match["result"].strip()
                completed.append(record)
        elif match := _COMPLETE.match(line):
            record = _record(match, match["result"].strip())
            entries.append(record)
            completed.append(record)
    return entries, completed


def _record(match: re.Match[str], result: str) -> dict[str, Any]:
    at = match["at"]
    return {
        "pid": int(match["pid"]),
        "name": match["name"],
        "args": match["args"],
        "result": result,
        "at": float(at) if at else None,
    }


def _numbered(records: list[dict[str, Any]]) -> list[Syscall]:
    return [Syscall(seq, **record) for seq, record in enumerate(records)]
