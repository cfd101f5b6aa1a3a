"""Reading ``strace -f -q`` output: the system calls of a traced runtime, for the
scenarios that judge a trace (DURABILITY-TRACE) or kill at a point of one
(CRASH-POINTS).

Each line is ``PID [SECONDS.MICROS] NAME(ARGS) = RESULT``; a call another thread's line
interrupted is split into ``NAME(ARGS <unfinished ...>`` and ``<... NAME resumed>REST)
= RESULT``, joined here. The timestamp is there with ``-ttt``.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any, NamedTuple

#: strace's first release with ``--seccomp-bpf``.
SECCOMP_SINCE = (5, 3)


@cache
def tracing_options(strace: str) -> tuple[str, ...]:
    """How the scenarios record a trace with ``strace``: following forks, quietly but
    for how each thread ended (``-q``: ``+++ exited with 0 +++``, ``+++ killed by
    SIGKILL +++``; ``-qq`` printed neither, and a call a thread was in when another
    thread's exit_group ended it read as one a kill ended, ``NthEntry``), and,
    where it can, stopping the traced process only at the traced calls
    (``--seccomp-bpf``). Without the filter every system call of the runtime stops at
    the tracer, the thousand of a Python start among them, which made a traced start
    cost about 40% more CPU than an untraced one; the trace is the same either way, and
    where the kernel has no seccomp filter strace falls back to stopping at every call.
    An strace too old to know the option, or that cannot say its version, runs without
    it. CRASH-POINTS parks its kill-phase call under the filter too (``delay_enter``):
    strace 6.1 does not deliver an injected ``signal=`` under it once ``when`` is 2 or
    more, but it counts ``when`` right for a delay."""
    try:
        done = subprocess.run([strace, "-V"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ("-f", "-q")
    version = re.search(r"version (\d+)\.(\d+)", done.stdout)
    recent = version is not None and (int(version[1]), int(version[2])) >= SECCOMP_SINCE
    return ("-f", "-q", "--seccomp-bpf") if recent else ("-f", "-q")


_HEAD = r"^(?P<pid>\d+)\s+(?:(?P<at>\d+\.\d+)\s+)?"
_COMPLETE = re.compile(_HEAD + r"(?P<name>\w+)\((?P<args>.*)\)\s+=\s+(?P<result>.*)$")
_UNFINISHED = re.compile(_HEAD + r"(?P<name>\w+)\((?P<args>.*?)\s*<unfinished \.\.\.>$")
_ENTERING = re.compile(_HEAD + r"(?P<name>\w+)\((?P<args>.*)$")
_RESUMED = re.compile(_HEAD + r"<\.\.\. (?P<name>\w+) resumed>(?P<args>.*)\)\s+=\s+(?P<result>.*)$")
#: How a thread ended, without ``-qq``: ``+++ exited with N +++`` (by an exit) or
#: ``+++ killed by SIGKILL +++``.
_EXITED = re.compile(_HEAD + r"\+\+\+ exited with \d+ \+\+\+$")


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


class Entry(NamedTuple):
    """A thread's ``when``-th entry of a call in a trace as far as it is written."""

    call: Syscall
    #: Whether the trace shows that call finished (returned a result).
    finished: bool
    #: The same thread's earlier entries of that call, in order (``when - 1`` of them).
    earlier: tuple[Syscall, ...]
    #: Whether the trace shows the thread ended in that call (``= ?``).
    ended: bool = False
    #: Whether it ended by an exit (strace's ``+++ exited with N +++``): another thread
    #: of its process called exit_group, so no kill ended the call. Without that line
    #: (strace -qq prints none) a thread that ended in a call is taken as killed there.
    exited: bool = False

    @property
    def running(self) -> bool:
        """Entered, and neither returned nor ended as far as the trace is written: a
        call parked at entry, or one still running."""
        return not self.finished and not self.ended


class NthEntry:
    """The first ``when``-th entry of ``name`` by one thread in the output of an
    ``strace -f -e trace=NAME`` as far as it is written, read as strace writes it: each
    ``read`` is given what was written since the last, so a watch over a long start
    parses each line once, not the whole trace every few milliseconds. The last line may
    still be unterminated: strace writes a call's entry when the thread enters it and
    its result when it returns, so a call parked at entry
    (``inject=NAME:delay_enter=...``) is an unterminated last line, or one that another
    thread's line cut (``<unfinished ...>``). Once found, the entry is followed to its
    end: its resumed line (the result of a cut call) and the line saying how its thread
    ended, where the thread ended in it."""

    def __init__(self, name: str, when: int):
        self.name, self.when = name, when
        self._threads: dict[int, list[Syscall]] = {}
        self._partial = b""
        self._found: Entry | None = None

    def read(self, data: bytes) -> Entry | None:
        """The entry as far as the trace is written, ``data`` appended to it."""
        *lines, self._partial = (self._partial + data).split(b"\n")
        for raw in lines:
            line = raw.decode("utf-8", "replace")
            if self._found is not None:
                self._found = _followed(self._found, line)
                continue
            match = _COMPLETE.match(line) or _UNFINISHED.match(line)
            if match and match["name"] == self.name:
                self._found = self._entry(match, keep=True)
        if self._found is not None:
            return self._found
        # The unterminated last line: looked at, not kept (it is read again once ended).
        tail = self._partial.decode("utf-8", "replace")
        match = _COMPLETE.match(tail) or _ENTERING.match(tail)
        return self._entry(match, keep=False) if match and match["name"] == self.name else None

    def _entry(self, match: re.Match[str], keep: bool) -> Entry | None:
        mine = self._threads.setdefault(int(match["pid"]), [])
        call = Syscall(len(mine), **_record(match, "?"))
        if len(mine) + 1 == self.when:
            result = _result(match) if match.re is _COMPLETE else None
            return Entry(call, result not in (None, "?"), tuple(mine), ended=result == "?")
        if keep:
            mine.append(call)
        return None


def _followed(entry: Entry, line: str) -> Entry:
    """``entry`` once its thread's ``line`` is read: the result of a cut call, and how
    the thread ended if it ended in the call (an exit, or a kill)."""
    if entry.finished or entry.exited or not line.startswith(f"{entry.call.pid} "):
        return entry
    if entry.ended:
        return entry._replace(exited=_EXITED.match(line) is not None)
    resumed = _RESUMED.match(line)
    if resumed and resumed["name"] == entry.call.name:
        result = _result(resumed)
        return entry._replace(finished=result != "?", ended=result == "?")
    return entry


class Follower:
    """A trace file read as strace writes it: ``written()`` gives the bytes written since
    the last reading (none before strace made the file), ``entered()`` the calls entered
    on the lines completed since the last (an unfinished call is entered; a line still
    being written waits for the next read)."""

    def __init__(self, path: str):
        self.path = path
        self._offset = 0
        self._partial = b""

    def written(self) -> bytes:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self._offset)
                data = handle.read()
        except FileNotFoundError:
            return b""
        self._offset += len(data)
        return data

    def entered(self) -> list[Syscall]:
        *lines, self._partial = (self._partial + self.written()).split(b"\n")
        return entered(line.decode("utf-8", "replace") for line in lines)


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
                record["result"] = _result(match)
                completed.append(record)
        elif match := _COMPLETE.match(line):
            record = _record(match, _result(match))
            entries.append(record)
            completed.append(record)
    return entries, completed


def _result(match: re.Match[str]) -> str:
    """A call's result as written, but ``?`` for every way strace says the thread ended in
    the call: ``= ? <unavailable>`` is what it writes when it could not read the result
    because the thread had vanished (an exit_group, a kill) by the time it looked. A
    result that goes on after ``?`` otherwise (``? ERESTARTSYS ...``) is a return."""
    result = match["result"].strip()
    return "?" if result == "? <unavailable>" else result


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
