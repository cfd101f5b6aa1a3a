"""Process groups, scratch directories and stderr tails: what every child the kit
starts (a harness, a binding's server) lives in, and what an interrupted run ends.

A child runs in a process group of its own, so SIGKILL of the group reaches whatever it
started. Every live group and every scratch directory is kept in one module registry,
so ``end_everything`` (the CLI's SIGINT/SIGTERM handler, and ``atexit``) can end them
all whatever thread started them.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import queue
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any

from retryproof.adapters.connection import HarnessStartError
from retryproof.adapters.pipes import ChildPipes
from retryproof.adapters.procfs import ENDED, running, stat_fields, visible_pids

#: Where every child the kit starts finds its state directory.
STATE_DIR_ENV = "RETRYPROOF_STATE_DIR"
#: How long a stop waits for a pipe's end of file once a child's group is gone; a
#: pipe still open after that is held by a process that escaped the group.
PIPE_GRACE_S = 1.0


# -- the registry of what must end when the kit is interrupted -----------------------

_registry_lock = threading.RLock()  # reentrant: the signal handler runs on the main thread
_live_groups: dict[int, subprocess.Popen] = {}
_scratch_dirs: set[str] = set()
_ending = False


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM reached the kit; ``signum`` says which (exit 128 + signum)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def end_everything() -> None:
    """SIGKILL every live harness process group, remove every scratch directory, and
    refuse every later start: what an interrupted run leaves behind is nothing."""
    global _ending
    with _registry_lock:
        _ending = True
        groups = list(_live_groups.values())
        folders = list(_scratch_dirs)
        _scratch_dirs.clear()
    for popen in groups:
        kill_group(popen)
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)


atexit.register(end_everything)  # a run that ends any other way leaves nothing either


def interrupt(signum: int, frame: object) -> None:
    """A signal handler for SIGINT and SIGTERM: end everything at once, then unwind the
    main thread as ``Interrupted`` (a ``KeyboardInterrupt``, as pytest expects too)."""
    end_everything()
    raise Interrupted(signum)


class Scratch:
    """A scenario's scratch space: ``state`` (RETRYPROOF_STATE_DIR, empty) and ``work``
    (the harness's working directory), removed together by ``remove``."""

    def __init__(self, prefix: str):
        self.root = tempfile.mkdtemp(prefix=prefix)
        with _registry_lock:
            _scratch_dirs.add(self.root)
        self.state = os.path.join(self.root, "state")
        self.work = os.path.join(self.root, "work")
        os.mkdir(self.state)
        os.mkdir(self.work)

    def remove(self) -> None:
        """Hand the directory to the remover thread and return: removing a state
        directory waits on the disk (unlinks behind the fsyncs of every harness
        running beside it, 5 to 40 ms each), and a scenario, whose worker is the
        caller, need not wait for it. It stays registered until it is gone, so an
        interrupt, or the exit (``end_everything``), removes it if the thread has not."""
        _removals.put(self.root)
        _start_remover()

    def __enter__(self) -> Scratch:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.remove()


_removals: queue.SimpleQueue[str] = queue.SimpleQueue()
_remover: threading.Thread | None = None


def _start_remover() -> None:
    global _remover
    with _registry_lock:
        if _remover is None:
            _remover = threading.Thread(target=_remove_handed, daemon=True, name="scratch-remover")
            _remover.start()


def _remove_handed() -> None:
    """The remover thread: each handed scratch directory, removed, then unregistered."""
    while True:
        folder = _removals.get()
        shutil.rmtree(folder, ignore_errors=True)
        with _registry_lock:
            _scratch_dirs.discard(folder)


class StderrTail:
    """A bounded tail of everything a child wrote to stderr (a server: its output too),
    across restarts."""

    def __init__(self, limit: int):
        self.limit = limit
        self._data = bytearray()
        self._dropped = 0
        self._lock = threading.Lock()

    def append(self, chunk: bytes) -> None:
        with self._lock:
            self._data += chunk
            excess = len(self._data) - self.limit
            if excess > 0:
                del self._data[:excess]
                self._dropped += excess

    def follow(self, pipes: ChildPipes, stream: IO[bytes]) -> None:
        """Append what ``stream`` carries until its end: a pipe thread of ``pipes``."""
        for chunk in pipes.chunks(stream):
            self.append(chunk)

    def text(self) -> str:
        with self._lock:
            head = f"[... {self._dropped} earlier bytes dropped]\n" if self._dropped else ""
            return head + self._data.decode("utf-8", errors="replace")


def start_group(command: Sequence[str], **options: Any) -> subprocess.Popen:
    """Start ``command`` in a process group of its own (so killpg ends whatever it
    starts), stdout and stderr piped, registered so that an interrupted run ends it
    (``end_everything``). The registry lock spans start and registration: an interrupt
    cannot fall between them."""
    with _registry_lock:
        if _ending:
            raise HarnessStartError("not started: the kit is shutting down")
        try:
            popen = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, **options
            )
        except OSError as exc:
            raise HarnessStartError(f"cannot run {command[0]!r}: {exc.strerror or exc}") from None
        except BaseException:
            if _ending:
                _end_unregistered_children()
            raise
        _live_groups[popen.pid] = popen
    return popen


def _end_unregistered_children() -> None:
    """SIGKILL the group of every child of this process that the registry lacks. An
    interrupt's handler runs in the main thread, which may be inside ``Popen`` when it
    comes: the child was started, its pid never returned, and ``end_everything`` did not
    know it. On a loaded machine a SIGINT sent once the harness ran met the kit there in
    4 of 8 runs, and the harness outlived the kit. Only once the kit is ending: another
    thread's child may be between its start and its registration."""
    me = str(os.getpid())
    for pid in visible_pids():
        fields = stat_fields(pid)
        if fields is not None and fields[1] == me and pid not in _live_groups and fields[2] == str(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)


def forget_group(popen: subprocess.Popen) -> None:
    """A reaped group leaves the registry."""
    with _registry_lock:
        _live_groups.pop(popen.pid, None)


def watch_leader(popen: subprocess.Popen, ended: Callable[[], None]) -> None:
    """Call ``ended`` from a thread of its own once the process the kit started, its
    group's leader, has ended, whatever its own children still hold: a shell's
    ``sleep 38 &`` before ``exec``, or node's spawn with stdio 'inherit', keeps the
    pipes open long after the leader died, so their end of file says nothing. The thread
    waits in ``waitid`` with ``WNOWAIT``: blocked in the kernel, it costs no CPU, and it
    leaves the leader unreaped for whoever wants its status. The wait lasts as long as
    the leader, which the kit always ends (``kill_group``: a session leader cannot leave
    its group). Where there is no ``waitid``, nothing is watched: the pipes' end is the
    leader's end, as it was."""
    if hasattr(os, "waitid"):
        threading.Thread(target=_await_leader, args=(popen.pid, ended), daemon=True, name="group-leader").start()


def _await_leader(pid: int, ended: Callable[[], None]) -> None:
    with contextlib.suppress(ChildProcessError):  # reaped already by another thread: it has ended
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    ended()


def kill_group(popen: subprocess.Popen) -> None:
    try:
        os.killpg(popen.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class OutputTooLong(Exception):
    """A child printed more than the reader's limit to stdout."""


#: How long an ended process's reaping may wait for another thread that is reaping it.
WAITPID_CONTENTION_S = 0.05


def wait_exit(popen: subprocess.Popen, timeout: float) -> int:
    """``popen.wait(timeout)``, woken the moment the process ends. ``Popen.wait`` with a
    timeout polls, sleeping 0.5 ms and doubling up to 50 ms, so a SIGKILLed harness,
    gone in about a millisecond, was met a few milliseconds late: in a run that ends
    about a hundred, time in which the scenario waited for nothing. On Linux a pidfd
    says when the process ends; elsewhere it polls as ``Popen.wait`` does.
    ``subprocess.TimeoutExpired`` when it has not ended within ``timeout``."""
    if popen.returncode is not None or not hasattr(os, "pidfd_open"):
        return popen.wait(timeout)
    deadline = time.monotonic() + max(0.0, timeout)
    try:
        pidfd = os.pidfd_open(popen.pid)
    except OSError:  # reaped already (another thread's wait), or no pidfd on this kernel
        return popen.wait(timeout)
    try:
        # Unreaped after the pidfd was opened, the pid still named this process when it
        # was (a pid is reused only once reaped): the pidfd's readiness is its end.
        ended = True
        if popen.poll() is None:
            poller = select.poll()
            poller.register(pidfd, select.POLLIN)
            ended = bool(poller.poll(max(0.0, timeout) * 1000))
    finally:
        os.close(pidfd)
    if not ended:
        raise subprocess.TimeoutExpired(popen.args, timeout)
    # Ended, but ``poll`` answers None while another thread holds Popen's waitpid lock
    # (two threads wait on one harness: its reader and the scenario): ``wait`` rides
    # that out where one ``poll`` would call a dead process alive.
    return popen.wait(max(deadline - time.monotonic(), WAITPID_CONTENTION_S))


#: How often ``WrappedCommand`` looks at the wrapper's children: two small /proc reads.
WRAPPED_POLL_S = 0.02
#: How long a wrapper whose command has ended gets to end too, as strace does at once
#: with its command's status, and to say its last words (strace's reason) on stderr.
WRAPPED_GRACE_S = 0.5
#: A wrapper (strace) starts its command within milliseconds of its own start; one seen
#: with no command for this long has lost it before the first look.
WRAPPED_CHILDLESS_S = 5.0


def listed_children(pid: int) -> list[int] | None:
    """The children of ``pid`` (any of its threads'), zombies not yet reaped among them,
    from /proc; None when /proc cannot tell (no such process, or a kernel without
    ``/proc/PID/task/TID/children``)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    children: list[int] = []
    told = False
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as listed:
                children += (int(child) for child in listed.read().split())
            told = True
        except OSError:  # a thread that ended meanwhile, or no such file on this kernel
            continue
    return children if told else None


def reaped_a_child(pid: int) -> bool:
    """Whether ``pid`` has waited for a child of its own: its ``cminflt`` (the minor
    faults of the children it reaped) is above 0. The kernel adds a child's faults there
    when its real parent reaps it, not when a tracer reaps a tracee it did not fork
    (strace -f's grandchildren), and a child that ran at all faulted (fork's
    copy-on-write, exec's first pages). A child living 20 to 50 ms, alive at no look of a
    loaded machine's watch and reaped by strace within microseconds, is seen so. It is a
    child, not the command: strace 6.1 may fork and reap probes of its own before it
    runs the command (cminflt 12 to 23), so a look in between may take the command as
    ended; the grace and then the command, running in the wrapper's group, keep that
    start."""
    fields = stat_fields(pid)
    return fields is not None and int(fields[8]) > 0


def _keeps_running_for(wrapper: int) -> bool:
    """Whether a process other than ``wrapper`` that has not ended is in its process
    group (a server a launcher forked and left) or traced by it (``strace -f``'s
    grandchild in a session of its own): a scan of all /proc, for the rare wrapper whose
    child has ended but which lives on."""
    for pid in visible_pids():
        if pid == wrapper:
            continue
        fields = stat_fields(pid)
        if fields is None or fields[0] in ENDED:
            continue
        if int(fields[2]) == wrapper or _tracer(pid) == wrapper:
            return True
    return False


def _tracer(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8", errors="replace") as status:
            for line in status:
                if line.startswith("TracerPid:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class WrappedCommand:
    """While a ``with`` block waits for a command run under a wrapper (strace), watch
    the command itself, not only the wrapper the kit started: once the wrapper's child
    has ended (or the wrapper has had none for ``WRAPPED_CHILDLESS_S``), the wrapper
    lives on past ``WRAPPED_GRACE_S``, and nothing the command started is left running
    (in the wrapper's process group, or traced by the wrapper), SIGKILL the wrapper's
    group and say why in ``lost``. The wait then ends as it does for a server that dies
    at start. strace 6.1 now and then loses a multithreaded server's start ("pid ... has
    delayed wait data set already"): the server ended, strace lived on holding its
    pipes, and the wait for the server's ready took its whole bound (a Restate run
    145 s, not 45). A launcher that forks the server and exits is no lost start: under
    ``strace -f`` strace lives on tracing the server, which may take its time to be
    ready. Linux only (/proc); elsewhere, and where /proc cannot tell, it watches
    nothing. ``wrapped`` false: the command runs under no wrapper, and nothing is
    watched (``lost`` stays None), so a caller has one way for both."""

    def __init__(self, popen: subprocess.Popen, wrapped: bool = True):
        self.popen = popen
        self.lost: str | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="wrapped-command", daemon=True) if wrapped else None

    def __enter__(self) -> WrappedCommand:
        if self._thread is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()

    def _watch(self) -> None:
        began, seen = time.monotonic(), False
        pid = self.popen.pid
        wrapper = os.path.basename(str(self.popen.args[0] if isinstance(self.popen.args, list) else self.popen.args))
        while self.popen.poll() is None:  # once the wrapper ends, the wait sees that itself
            listed = listed_children(pid)
            if listed is None:
                return
            children = [child for child in listed if running(child)]
            # A child ended between two looks was still seen: a zombie, or one reaped.
            seen = seen or bool(listed) or reaped_a_child(pid)
            if not children and (seen or time.monotonic() - began >= WRAPPED_CHILDLESS_S):
                if self._done.wait(WRAPPED_GRACE_S) or self.popen.poll() is not None:
                    return  # it ended, as a wrapper does after its command: the wait sees that
                if _keeps_running_for(pid):
                    continue  # what the command started runs on: looked at again a grace later
                ran = "ended" if seen else f"was not seen running within {WRAPPED_CHILDLESS_S:g}s"
                self.lost = f"the command {wrapper} runs {ran} while {wrapper} lived on"
                kill_group(self.popen)
                return
            if self._done.wait(WRAPPED_POLL_S):
                return


class Abandoned(Exception):
    """The caller gave up on a command whose answer no longer matters (``run_to_end``'s
    ``abandon``)."""


def run_to_end(
    command: Sequence[str],
    env: Mapping[str, str],
    timeout: float,
    limit: int,
    cwd: str | None = None,
    abandon: Callable[[], bool] | None = None,
) -> tuple[int, bytes, str]:
    """Run a short-lived command (a binding's listing query) to its end: ``(status,
    stdout, stderr's tail)``. Bounded every way a foreign command can stretch it: it gets
    ``timeout`` seconds (``subprocess.TimeoutExpired``), stdout at most ``limit`` bytes
    (``OutputTooLong``: ``yes`` would fill memory), stderr its last ``limit`` bytes, and
    a process it left running holding the pipes is not waited for. Whatever it
    started, in its group, is SIGKILLed when it ends, however it ends (``sh -c "sleep
    4242 & ..."`` left the sleep behind), and an interrupted run ends it too. It runs
    in ``cwd`` (a binding's folder) when given. ``abandon``, asked at every pass (50 ms at
    most apart), ends it early (``Abandoned``): its answer no longer matters."""
    popen = start_group(command, stdin=subprocess.DEVNULL, env=dict(env), cwd=cwd)
    assert popen.stdout is not None and popen.stderr is not None
    out, err = bytearray(), StderrTail(limit)
    open_fds = {popen.stdout.fileno(): out.extend, popen.stderr.fileno(): err.append}
    deadline = time.monotonic() + timeout
    ended = False
    try:
        while open_fds:
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(list(command), timeout)
            if abandon is not None and abandon():
                raise Abandoned(f"{command[0]} was abandoned")
            # Once it has ended, only what its pipes hold is read, without waiting: a
            # survivor may hold them open.
            ready, _, _ = select.select(list(open_fds), [], [], 0 if ended else min(left, 0.05))
            for fd in ready:
                chunk = os.read(fd, 1 << 16)
                if chunk:
                    open_fds[fd](chunk)
                else:
                    del open_fds[fd]
            if len(out) > limit:
                raise OutputTooLong(f"more than {limit} bytes on stdout")
            if not ready:
                if ended:
                    break  # ended, and its pipes drained
                # It may have written its answer and ended after this select timed out:
                # the next pass reads the pipes before anything is concluded. (Breaking
                # here lost a listing's whole answer under load: "exited 0 but printed nothing".)
                ended = popen.poll() is not None
        status = wait_exit(popen, max(0.0, deadline - time.monotonic()))
        return status, bytes(out), err.text()
    finally:
        kill_group(popen)
        try:
            wait_exit(popen, PIPE_GRACE_S)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
            pass
        forget_group(popen)
        popen.stdout.close()
        popen.stderr.close()
