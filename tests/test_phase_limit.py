"""The bound on each phase of a test (phase_limit.py), in pytest sessions of their own:
a phase that hangs in the test's process fails with its name and every thread's stack,
and the session goes on; a hang the failure cannot unwind ends the process, its stacks
on stderr, instead of hanging the suite."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

HERE = Path(__file__).parent
#: The sessions' own conftest: this folder's plugin, with the unwinding shortened.
CONFTEST = f"""
import sys
sys.path.insert(0, {str(HERE)!r})
import phase_limit
phase_limit.UNWIND_S = 1.0
pytest_plugins = ["phase_limit"]
"""


def _session(pytester: pytest.Pytester, tests: str) -> tuple[pytest.RunResult, float]:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_hangs=tests)
    began = time.monotonic()
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=60)
    return result, time.monotonic() - began


def test_a_hung_phase_fails_with_its_name_and_the_stacks_and_the_session_goes_on(pytester):
    result, took = _session(
        pytester,
        """
import threading
import pytest

@pytest.fixture
def shared_run():
    threading.Event().wait(60)  # a kit run in this process that never returns

@pytest.mark.phase_limit(1)
def test_waits_in_its_setup(shared_run):
    pass

@pytest.mark.phase_limit(1)
def test_waits_in_its_call():
    threading.Event().wait(60)

def test_after():
    pass
""",
    )
    result.assert_outcomes(passed=1, failed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*test_hangs.py::test_waits_in_its_setup: its setup did not end within 1 s (tests/phase_limit.py)*",
            "*test_hangs.py::test_waits_in_its_call: its call did not end within 1 s (tests/phase_limit.py)*",
        ]
    )
    # every thread's stack, the hung wait among them
    result.stdout.fnmatch_lines(
        [
            "*Captured stderr call*",
            "*most recent call first*",
            '*File "*test_hangs.py", line 14 in test_waits_in_its_call*',
        ]
    )
    assert took < 30, took


def test_a_hang_the_failure_cannot_unwind_ends_the_process(pytester):
    result, took = _session(
        pytester,
        """
import threading
import pytest

@pytest.mark.phase_limit(1)
def test_swallows_its_failure():
    while True:
        try:
            threading.Event().wait(60)
        except BaseException:
            pass

def test_never_reached():
    pass
""",
    )
    assert result.ret == 1, result.stdout.str()
    assert "test_never_reached" not in result.stdout.str()
    assert "Timeout (0:00:02)!" in result.stderr.str(), result.stderr.str()
    assert "in test_swallows_its_failure" in result.stderr.str(), result.stderr.str()
    assert took < 30, took
