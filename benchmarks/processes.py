"""Every process a command starts, grouped by kind: how many starts, CPU seconds per
start and in all. The map of where a test suite's CPU goes when its tests mostly start
processes (kit runs, harnesses, servers, browsers, pip): a per-test table sums them per
test, this one says which kind of process repeats.

The CPU of each process comes from the kernel's process accounting (``acct(2)``, one
record per process when it ends, killed ones included, in 10 ms ticks), its command line
from a sampler that reads ``/proc`` for each new process (a record names only the
program). Accounting is system-wide and needs CAP_SYS_PACCT (root): processes of other
users of the machine are told apart by ancestry, which stops at a process whose parent
ended first (``RUSAGE_CHILDREN`` of the command is printed beside the sum to compare).
Ticks truncate: each start's figure is low by 5 ms on average.

Accounting already on (an accounting service) has one file at a time: the census would
take its records for the run and then switch it off. It refuses when a usual service's
file is being written; accounting into any other file it cannot see.
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
import struct
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retryproof.adapters.procfs import stat_fields, visible_pids
from retryproof.conformance.errors import KitError

#: Accounting's time unit (AHZ) and /proc's (USER_HZ).
_AHZ = 100
_TICK = os.sysconf("SC_CLK_TCK")
#: A record (struct acct_v3) is 64 bytes; AFORK marks a process that never exec'd.
_RECORD = struct.Struct("<BBHIIIIIIf8H16s")
_AFORK = 0x01
#: The record version read (``ac_version``; 0x80 is added on big-endian machines).
_VERSION = 3
#: Where the accounting services (psacct, acct) of the usual distributions write.
_KNOWN_FILES = ("/var/log/account/pacct", "/var/account/pacct", "/var/log/pacct", "/var/adm/pacct")
#: The signals that switch accounting off on their way (SIGKILL cannot be caught).
_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: Interpreter options that take the next word as their value.
_VALUED = {"-X", "-W", "-Q"}


@dataclass
class Process:
    pid: int
    ppid: int
    born: float  # seconds since the epoch
    lived: float
    cpu: float
    program: str  # the kernel's name for it (15 characters)
    forked_only: bool
    argv: list[str] = field(default_factory=list)


def _comp(value: int) -> int:
    """A comp_t: 13 bits of mantissa, 3 of base-8 exponent."""
    return (value & 0x1FFF) << (3 * (value >> 13))


class Census:
    """Accounting on for the ``with`` block, and a sampler naming each new process.

    Accounting is the machine's, not the process's: left on, the kernel appends a record
    for every process of every user until the next boot. So it goes off on every way out
    of the block: ``__exit__`` switches it off before anything else, and for the block's
    duration SIGINT, SIGTERM and SIGHUP switch it off in their handler before they raise
    (KeyboardInterrupt, SystemExit 128+n), so no second signal can land between the run
    and the switch-off. Only SIGKILL leaves it on (``accton off`` ends it)."""

    def __init__(self, folder: Path, interval: float = 0.01) -> None:
        self.file = folder / "acct"
        self.interval = interval
        self.seen: dict[tuple[int, int], dict] = {}  # (pid, start tick) -> what /proc said
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._armed = False  # acct(path) called: from here on, every way out switches it off
        self._handlers: dict[int, Any] = {}

    def __enter__(self) -> Census:
        try:
            for number in _SIGNALS:
                self._handlers[number] = signal.signal(number, self._on_signal)
            running = _accounting_elsewhere(_KNOWN_FILES)
            if running:
                raise KitError(
                    f"process accounting is already on, into {running[0]}: the census would switch it off",
                    "stop the accounting service (accton off; psacct or acct) for the run, or run without --processes",
                )
            self.file.write_bytes(b"")
            self._armed = True
            if self._libc.acct(str(self.file).encode()) != 0:
                reason = os.strerror(ctypes.get_errno())
                raise KitError(
                    f"cannot turn on process accounting (acct(2): {reason})",
                    "--processes needs root (CAP_SYS_PACCT); run as root or without it",
                )
            _exit_one()  # its record says the version before a long run is spent
            records(self.file.read_bytes()[: _RECORD.size])
            self._thread.start()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        """Off first: records are written by each process as it ends, before its parent
        can reap it, so nothing of the run is missed by switching off at once."""
        try:
            self._off()
        finally:
            self._stop.set()
            if self._thread.is_alive():
                self._thread.join()
            for number, handler in self._handlers.items():
                signal.signal(number, handler)
            self._handlers.clear()

    def _off(self) -> None:
        if self._armed:
            self._libc.acct(None)
            self._armed = False

    def _on_signal(self, number: int, _frame: object) -> None:
        self._off()
        if number == signal.SIGINT:
            raise KeyboardInterrupt
        raise SystemExit(128 + number)

    def _sample(self) -> None:
        """Each new pid's parent and command line; its command line once more while it is
        young, as a child shows its parent's until it execs."""
        young: dict[int, tuple[dict, float]] = {}
        known: set[int] = set()
        while not self._stop.is_set():
            now = time.monotonic()
            pids = set(visible_pids())
            for pid in pids - known:
                entry = _read_stat(pid)
                if entry is not None:
                    self.seen[(pid, entry["start"])] = entry
                    young[pid] = (entry, now)
            for pid, (entry, first) in list(young.items()):
                argv = _read_argv(pid)
                if argv:
                    entry["argv"] = argv
                if now - first > 0.5 or pid not in pids:
                    del young[pid]
            known = pids
            self._stop.wait(self.interval)

    def processes(self) -> list[Process]:
        """The records, each with the parent and command line the sampler saw for its pid
        near its birth (a record's birth is to the second)."""
        boot = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
        by_pid: dict[int, list[dict]] = defaultdict(list)
        for entry in self.seen.values():
            entry["born"] = boot + entry["start"] / _TICK
            by_pid[entry["pid"]].append(entry)
        found = records(self.file.read_bytes())
        for process in found:
            sampled = [entry for entry in by_pid.get(process.pid, []) if abs(entry["born"] - process.born) < 1.6]
            entry = min(sampled, key=lambda e: abs(e["born"] - process.born), default=None)
            if entry:
                process.ppid, process.born, process.argv = entry["ppid"], entry["born"], entry.get("argv", [])
        return found


def records(data: bytes) -> list[Process]:
    """The processes of an accounting file as its records say (born mid-second, as a
    record's birth is to the second); refuses any record not of version 3."""
    found = []
    for offset in range(0, len(data) - _RECORD.size + 1, _RECORD.size):
        flag, version, _, _, _, _, pid, ppid, btime, etime, *comps, comm = _RECORD.unpack_from(data, offset)
        if version != _VERSION:
            raise KitError(
                f"process accounting wrote a record of version {version & 0x7F}"
                f"{' (big-endian)' if version & 0x80 else ''} at byte {offset}; the census reads only"
                f" version {_VERSION} (struct acct_v3, little-endian)",
                "a kernel built with CONFIG_BSD_PROCESS_ACCT_V3 writes those; run without --processes",
            )
        found.append(
            Process(
                pid=pid,
                ppid=ppid,
                born=btime + 0.5,
                lived=etime / _AHZ,
                cpu=(_comp(comps[0]) + _comp(comps[1])) / _AHZ,
                program=comm.split(b"\0")[0].decode(errors="replace"),
                forked_only=bool(flag & _AFORK),
            )
        )
    return found


def _accounting_elsewhere(files: tuple[str, ...], exit_one: Callable[[], None] | None = None) -> list[str]:
    """The known accounting files a process's end appends to. The kernel says nowhere
    whether accounting is on or where it writes (/proc/sys/kernel/acct holds only its
    free-space thresholds), so a file of the usual services is watched across one
    process's end; accounting into any other file is not seen, and the census switches
    it off."""
    sizes = {path: _size(path) for path in files}
    if not any(size is not None for size in sizes.values()):
        return []
    (exit_one or _exit_one)()
    return [path for path, size in sizes.items() if size is not None and (_size(path) or 0) > size]


def _size(path: str) -> int | None:
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def _exit_one() -> None:
    """A process that ends at once; its record is written before its parent can reap it."""
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


def _read_stat(pid: int) -> dict | None:
    fields = stat_fields(pid)
    if fields is None:
        return None
    return {"pid": pid, "ppid": int(fields[1]), "start": int(fields[19]), "argv": _read_argv(pid)}


def _read_argv(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [word.decode(errors="replace") for word in raw.split(b"\0") if word]


def parents(processes: list[Process]) -> Callable[[Process], Process | None]:
    """A process's parent: the process of its parent's pid alive at its birth (pids wrap)."""
    by_pid: dict[int, list[Process]] = defaultdict(list)
    for process in processes:
        by_pid[process.pid].append(process)

    def parent(process: Process) -> Process | None:
        for candidate in by_pid.get(process.ppid, []):
            if candidate.born - 1 <= process.born <= candidate.born + candidate.lived + 1:
                return candidate
        return None

    return parent


def descendants(processes: list[Process], root: int, since: float) -> list[Process]:
    """The processes born after ``since`` whose chain of parents reaches ``root``."""
    parent = parents(processes)
    kept = []
    for process in processes:
        step: Process | None = process if process.born >= since - 1 else None
        for _ in range(64):
            if step is None or step.pid == root:
                break
            step = parent(step)
        if step is not None:
            kept.append(process)
    return kept


def kind(process: Process, parent_argv: list[str] | None = None) -> str:
    """A process's kind: its program, and for an interpreter what it runs (a module and,
    for the kit's CLI, its command; a script's name; the reference's way of serving)."""
    argv = process.argv
    if process.program.startswith("chrom"):  # helpers name their type (in one rewritten word)
        found = [word[len("--type=") :] for word in " ".join(argv).split() if word.startswith("--type=")]
        return f"chromium {found[0] if found else 'browser'}"
    if process.forked_only:
        return f"fork of {kind(Process(0, 0, 0, 0, 0, process.program, False, parent_argv or []))}"
    if not argv:
        return f"{process.program} (not sampled)"
    program = os.path.basename(argv[0])
    if not re.match(r"python[\d.]*$", program):
        return program
    words = argv[1:]
    while words and words[0].startswith("-") and words[0][:2] not in ("-m", "-c"):
        words = words[2:] if words[0] in _VALUED else words[1:]
    if words and words[0][:2] in ("-m", "-c") and len(words[0]) > 2:  # -mpytest
        words = [words[0][:2], words[0][2:], *words[1:]]
    if not words:
        return "python"
    if words[0] == "-c":
        code = words[1] if len(words) > 1 else ""
        if "exec(eval(sys.stdin.readline()))" in code:
            return "python: pytest-xdist worker"
        return "python -c " + " ".join(code.split())[:30]
    module = words[1] if words[0] == "-m" and len(words) > 1 else ""
    script = os.path.basename(words[0]) if words[0] != "-m" else ""
    rest = words[2:] if module else words[1:]
    if module in ("retryproof.conformance.cli", "retryproof") and rest:
        return f"kit CLI: retryproof {rest[0]}"
    if module == "retryproof.reference_impl" or script == "launch.py":
        how = "-m" if module else "launch.py"
        serves = " ".join(word for word in rest if word in ("--http", "--mcp", "stdio", "http")) or "harness"
        return f"reference {serves} ({how}{', --fault' if '--fault' in rest else ''})"
    if module == "pytest" or script in ("pytest", "py.test"):
        return "python -m pytest"
    return f"python -m {module}" if module else f"python {script}"


def table(processes: list[Process], top: int) -> list[list[str]]:
    """Rows of kind, starts, CPU seconds in all, per start and wall seconds per start,
    the costliest kind first."""
    argv = {process.pid: process.argv for process in processes}
    kinds: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for process in processes:
        totals = kinds[kind(process, argv.get(process.ppid))]
        totals[0] += 1
        totals[1] += process.cpu
        totals[2] += process.lived
    ranked = sorted(kinds.items(), key=lambda item: -item[1][1])[:top]
    return [[name, str(int(n)), f"{cpu:.1f}", f"{cpu / n:.3f}", f"{wall / n:.2f}"] for name, (n, cpu, wall) in ranked]
