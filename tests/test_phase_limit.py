"""The bound on each phase of a test (phase_limit.py), in pytest sessions of their own:
a phase that hangs in the test's process fails with its name and every thread's stack,
and the session goes on; a hang the failure cannot unwind ends the process, its stacks
on stderr, instead of hanging the suite. Both again on a pytest-xdist worker, as the
README's test command runs them."""

from __future__ import annotations

import math
import re
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from kit import until

HERE = Path(__file__).parent
#: The sessions' own conftest: this folder's plugin, with the unwinding shortened.
CONFTEST = f"""
import sys
sys.path.insert(0, {str(HERE)!r})
import phase_limit
phase_limit.UNWIND_S = 0.5
phase_limit.REAP_S = 0.5
pytest_plugins = ["phase_limit"]
"""
HANGS = """
import threading
import pytest

@pytest.fixture
def shared_run():
    threading.Event().wait(60)  # a kit run in this process that never returns

@pytest.mark.phase_limit(0.5)
def test_waits_in_its_setup(shared_run):
    pass

@pytest.mark.phase_limit(0.5)
def test_waits_in_its_call():
    threading.Event().wait(60)

def test_after():
    pass
"""
SWALLOWS = """
@pytest.mark.phase_limit(1)  # its bound covers starting the sleeper too
def test_swallows_its_failure():
    from retryproof.adapters.process_groups import start_group

    sleeper = start_group(["sleep", "600"])  # a harness the kit started, as a run's
    with open("sleeper.pid", "w") as pid:
        pid.write(str(sleeper.pid))
    while True:
        try:
            threading.Event().wait(60)
        except BaseException:
            pass

def test_next():
    pass
"""


def _session(pytester: pytest.Pytester, tests: str, *args: str) -> pytest.RunResult:
    """The session's wall time is no measure of the bounds: it is mostly the start of
    two or three interpreters, which took 33 s on a loaded machine (a CPU shared with 30
    busy processes). A hang that outlived its bound runs its 60 s, and the test fails on
    the outcomes or on this wait."""
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_hangs=tests)
    return pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--durations=0", "--durations-min=0", *args, timeout=120
    )


#: How long a phase failed by its 0.5 s bound may have lasted, by pytest's own clock: the
#: bound, the failure's unwinding (the process ends 1 s after the bound otherwise), and
#: seconds of margin for a loaded machine, where the failing main thread waits for a CPU.
#: A bound kept ten times too late (5 s) fails it.
HUNG_PHASE_S = 4.0


def _failed_by_their_bound(result: pytest.RunResult) -> None:
    result.stdout.fnmatch_lines(
        [
            "*test_hangs.py::test_waits_in_its_setup: its setup did not end within 0.5 s (tests/phase_limit.py)*",
            "*test_hangs.py::test_waits_in_its_call: its call did not end within 0.5 s (tests/phase_limit.py)*",
            "*Captured stderr call*",  # every thread's stack, the hung wait among them
            "*most recent call first*",
            '*File "*test_hangs.py", line 14 in test_waits_in_its_call*',
        ]
    )
    for phase in ("setup", "call"):
        lasted = re.search(
            rf"^([0-9.]+)s {phase} +test_hangs.py::test_waits_in_its_{phase}$", result.stdout.str(), re.M
        )
        assert lasted is not None, result.stdout.str()
        assert float(lasted[1]) < HUNG_PHASE_S, f"its {phase} lasted {lasted[1]} s, its bound is 0.5 s"


def _ended_by_faulthandler(result: pytest.RunResult, folder: Path) -> None:
    """The stacks on the stderr the session started with, after the 1 s bound, 0.5 s of
    unwinding and 0.5 s to end what the kit started, which has ended: an ended process runs
    no atexit hook, and the harness would outlive it."""
    assert "Timeout (0:00:02)!" in result.stderr.str(), result.stderr.str()
    assert "in test_swallows_its_failure" in result.stderr.str(), result.stderr.str()
    status = Path(f"/proc/{(folder / 'sleeper.pid').read_text()}/status")
    assert not status.exists() or "\nState:\tZ" in status.read_text(), "the kit's harness outlived its test's process"


def test_a_hung_phase_fails_with_its_name_and_the_stacks_and_the_session_goes_on(pytester):
    result = _session(pytester, HANGS)
    result.assert_outcomes(passed=1, failed=1, errors=1)
    _failed_by_their_bound(result)


def test_a_hang_the_failure_cannot_unwind_ends_the_process(pytester):
    result = _session(pytester, HANGS.split("@pytest.fixture")[0] + SWALLOWS)
    assert result.ret == 1, result.stdout.str()
    _ended_by_faulthandler(result, pytester.path)
    assert "test_next" not in result.stdout.str()


def test_on_a_pytest_xdist_worker_both_bounds_hold_and_the_crash_is_named(pytester):
    result = _session(pytester, HANGS + SWALLOWS, "-n", "1")
    _failed_by_their_bound(result)
    _ended_by_faulthandler(result, pytester.path)
    # pytest-xdist names the test its worker ended in, and a new worker runs the rest
    result.stdout.fnmatch_lines(["*worker 'gw0' crashed while running 'test_hangs.py::test_swallows_its_failure'*"])
    result.assert_outcomes(passed=2, failed=2, errors=1)


def test_the_reaper_meets_an_earlier_deadline_and_not_a_disarmed_one(monkeypatch):
    """The one reaper thread sleeps until the deadline it last saw: a phase with a shorter
    bound than the one before wakes it, and a phase that ended in time is not reaped."""
    from phase_limit import _Reaper

    ended = threading.Event()
    monkeypatch.setitem(sys.modules, "retryproof.adapters.process_groups", SimpleNamespace(end_everything=ended.set))
    reaper = _Reaper()
    reaper.arm(0.1)
    reaper.disarm()
    assert not ended.wait(0.3), "a disarmed deadline was reaped"
    reaper.arm(300)
    assert until(lambda: reaper._waking < math.inf, within_s=5), "the reaper did not take up an armed deadline"
    reaper.arm(0.1)
    assert ended.wait(5), "an earlier deadline was met only at the later one"
