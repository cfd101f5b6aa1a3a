"""A bound on each phase (setup, call, teardown) of every test, as a pytest plugin
(tests/conftest.py loads it).

A kit run in a process of its own is bounded by the test's timeout, but much of the
suite runs the kit in the test's own process (``kit.retryproof_here``, the runner's
API, in-process pytester sessions, fixtures that compute a shared run), bounded only by
the kit's own timeouts: a hang there would hang the suite. So a phase that runs past
its limit fails: SIGALRM dumps every thread's stack to stderr (the test's captured
output) and raises ``pytest.fail`` in the main thread, which unwinds the run through
its own cleanup (its harnesses and servers are ended as after any failure). Should the
unwinding hang too (a thread the failure cannot reach), after ``UNWIND_S`` a thread ends
every process group and scratch directory the kit started (an ended process runs no
atexit hook, and those would outlive it), and ``REAP_S`` later faulthandler dumps the
stacks again and ends the process: pytest-xdist then names the test its worker crashed
in, and the other workers go on.

The limit is ``PHASE_LIMIT_S``, or ``@pytest.mark.phase_limit(S)`` on a test whose own
bounds add up to more (each step a process with a timeout of its own).
"""

from __future__ import annotations

import contextlib
import faulthandler
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator

import pytest

#: Five times the longest phase measured (the matrix install, 47 s on 2 CPUs at load 13,
#: ``benchmarks/bench_suite.py``): a limit no healthy test meets, and a hang costs CI
#: minutes, not the job's whole timeout.
PHASE_LIMIT_S = 240.0
#: How long the failure may take to unwind before the kit's processes are ended.
UNWIND_S = 60.0
#: How long ending them may take before the process ends.
REAP_S = 10.0
#: Where the process's last words go: a copy of stderr taken before any test runs, as
#: pytest's faulthandler plugin keeps (a test's stderr is captured, and lost with the process).
_stderr: int | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _stderr
    config.addinivalue_line("markers", "phase_limit(seconds): this test's own bound on each of its phases")
    try:
        fileno = sys.stderr.fileno()
    except (AttributeError, ValueError):  # pytest-xdist's worker replaces sys.stderr
        fileno = sys.__stderr__.fileno()
    _stderr = os.dup(fileno)


def pytest_unconfigure(config: pytest.Config) -> None:
    global _stderr
    if _stderr is not None:
        os.close(_stderr)
        _stderr = None


@contextlib.contextmanager
def bounded(what: str, seconds: float) -> Iterator[None]:
    """Fail with ``what`` in the message once ``seconds`` have passed; end the process
    ``UNWIND_S`` seconds later if the failure has not unwound by then. Only the main
    thread receives SIGALRM, and only one bound is armed at a time (an inner one, an
    in-process pytester session's, leaves the outer one in charge)."""
    if threading.current_thread() is not threading.main_thread() or signal.getitimer(signal.ITIMER_REAL)[0]:
        yield
        return

    def overran(signum: int, frame: object) -> None:
        faulthandler.dump_traceback(all_threads=True)
        pytest.fail(
            f"{what} did not end within {seconds:g} s (tests/phase_limit.py): a kit run in the test's "
            "process has no process timeout to end it; every thread's stack at that moment is in "
            "the captured stderr",
            pytrace=False,
        )

    previous = signal.signal(signal.SIGALRM, overran)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    _reaper.arm(seconds + UNWIND_S)
    faulthandler.dump_traceback_later(seconds + UNWIND_S + REAP_S, exit=True, file=2 if _stderr is None else _stderr)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        _reaper.disarm()
        faulthandler.cancel_dump_traceback_later()
        signal.signal(signal.SIGALRM, previous)


class _Reaper:
    """One thread for the process that ends every process group the kit started once an
    armed deadline passes. A timer thread started and cancelled for each phase cost the
    phase 0.15 ms of CPU and 0.6 ms of wall (2 CPUs, load 2), three phases a test; this one
    sleeps until the deadline it last saw and is woken only for an earlier one, so arming
    and disarming it takes a lock and no thread."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._deadline: float | None = None  # time.monotonic()'s, while a phase is armed
        self._waking = math.inf  # when the thread wakes next, unless notified
        self._thread: threading.Thread | None = None

    def arm(self, seconds: float) -> None:
        with self._changed:
            self._deadline = time.monotonic() + seconds
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="phase_limit reaper", daemon=True)
                self._thread.start()
            elif self._deadline < self._waking:
                self._changed.notify()

    def disarm(self) -> None:
        with self._changed:
            self._deadline = None

    def _watch(self) -> None:
        while True:
            with self._changed:
                now = time.monotonic()
                while self._deadline is None or self._deadline > now:
                    self._waking = math.inf if self._deadline is None else self._deadline
                    self._changed.wait(None if self._deadline is None else self._deadline - now)
                    now = time.monotonic()
                self._deadline = None
            groups = sys.modules.get("retryproof.adapters.process_groups")
            if groups is not None:  # else the test started nothing through the kit
                groups.end_everything()


_reaper = _Reaper()


@contextlib.contextmanager
def _phase(item: pytest.Item, phase: str) -> Iterator[None]:
    marker = item.get_closest_marker("phase_limit")
    seconds = marker.args[0] if marker else PHASE_LIMIT_S
    with bounded(f"{item.nodeid}: its {phase}", seconds):
        yield


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with _phase(item, "setup"):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with _phase(item, "call"):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    with _phase(item, "teardown"):
        return (yield)
