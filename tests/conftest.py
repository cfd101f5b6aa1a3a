"""Shared test configuration: the FUZZ-MODEL Hypothesis profiles, the ``strace``
fixture of the DURABILITY-TRACE tests, the ``pytester`` sessions of the plugin tests, and
how many pytest-xdist workers ``-n auto`` starts.

The profiles are registered here so ``pytest --hypothesis-profile retryproof-nightly``
can select one. Nothing is loaded globally: Hypothesis loads its own ``ci`` profile
when it detects CI, and the fuzz tests take their budget from
``retryproof.conformance.fuzz.profiles.fuzz_settings()``, which inherits from that profile
instead of replacing it.
"""

import os
import shutil
import subprocess

import pytest
from kit import UNUSED_PLUGINS

from retryproof.conformance.fuzz.profiles import register_profiles

pytest_plugins = ["pytester"]

register_profiles()


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytest's own ``pytester``, whose sessions (in this process or a new one) load no
    plugin they never use (``kit.UNUSED_PLUGINS``). An in-process session imports every
    plugin afresh and drops it after: the anyio plugin alone cost each such session
    0.3 CPU-s (22 sessions of test_pytest_plugin.py's bad input: 8.0 CPU-s with it, 1.3
    without, PYTHONDONTWRITEBYTECODE=1 as in CI, where nothing it imports is cached)."""
    monkeypatch.setenv("PYTEST_ADDOPTS", " ".join(UNUSED_PLUGINS))
    return pytester


@pytest.fixture(scope="session")
def strace() -> str:
    """The strace binary, when it is installed and may trace here; the test is skipped
    otherwise. Installed is not enough: a container without ptrace rights has the
    binary, and DURABILITY-TRACE then skips, which a test expecting a verdict would
    misread."""
    binary = shutil.which("strace")
    if binary is None:
        pytest.skip("strace is not installed")
    done = subprocess.run([binary, "-f", "-qq", "-o", os.devnull, "true"], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        pytest.skip(f"strace cannot trace here: {done.stderr.strip()[-200:]}")
    return binary


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (.ci/run): two workers per CPU this process may use, and one more. Most
    of a test's time is spent in the processes it starts (kit runs, harnesses, servers,
    pytest sessions), and much of it waiting on them (call timeouts, restarts, a run-alone
    turn, a crash point's retries), so with few workers the CPUs stood idle. Measured on 2
    CPUs (``--dist worksteal``, back to back, load 0.5-3.6, 2026-12-02): 5 workers 168.9 s
    wall and 270 CPU-s, 3 workers 204.5 s and 255 CPU-s (with the suite of that time; an
    older suite: 2 workers 106 s and 91 s, 3 workers 82 s and 83 s, 4 workers 85 s)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return 2 * cpus + 1
