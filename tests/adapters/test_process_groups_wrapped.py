"""``WrappedCommand``'s watch over a wrapper's command (strace's child): a command that
ended between two looks is still seen to have run, and what a command left running
(a launcher's server) keeps a wrapper that lives on from being taken as a lost start."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
from kit import until

from retryproof.adapters import process_groups
from retryproof.adapters.process_groups import WrappedCommand, forget_group, kill_group, start_group

#: Wrappers whose child ends before the watch's first look, then live on: one reaps the
#: child (as strace does within microseconds), one leaves it a zombie.
REAPED = "import os, subprocess, sys, time; subprocess.run(['true']); open(sys.argv[1], 'w').close(); time.sleep(60)"
ZOMBIE = "import os, sys, time\nif os.fork() == 0: os._exit(0)\ntime.sleep(0.2); open(sys.argv[1], 'w').close(); time.sleep(60)"
#: A wrapper whose child (a launcher) forks a grandchild that runs on for argv[2] seconds,
#: and ends at once.
LAUNCHER = (
    "import os, subprocess, sys, time\n"
    "launcher = 'import os, sys, time\\nif os.fork() == 0: time.sleep(float(sys.argv[1]))'\n"
    "subprocess.run([sys.executable, '-S', '-c', launcher, sys.argv[2]])\n"
    "open(sys.argv[1], 'w').close(); time.sleep(60)"
)


def _started(tmp_path, *command: str) -> subprocess.Popen:
    """``command`` started as the kit starts a wrapper, once it has said (a file) that its
    child has ended."""
    mark = tmp_path / "child-ended"
    popen = start_group([sys.executable, "-S", "-c", *command[:1], str(mark), *command[1:]])
    deadline = time.monotonic() + 30
    while not mark.exists():
        assert time.monotonic() < deadline and popen.poll() is None, "the wrapper never ran its child"
        time.sleep(0.01)
    return popen


def _watched(popen: subprocess.Popen, within: float) -> tuple[str | None, int | None]:
    """What the watch says within ``within`` seconds, and the wrapper's status then (None
    while it runs; a watch that gave the start up has killed it)."""
    try:
        with WrappedCommand(popen) as watch:
            until(lambda: watch.lost is not None, within, 0.02)
        return watch.lost, popen.wait(10) if watch.lost else popen.poll()
    finally:
        kill_group(popen)
        popen.wait(10)
        forget_group(popen)
        popen.stdout.close()
        popen.stderr.close()


@pytest.mark.parametrize("wrapper", [REAPED, ZOMBIE], ids=["reaped", "zombie"])
def test_a_child_that_ended_before_the_first_look_was_seen_to_run(tmp_path, monkeypatch, wrapper):
    """Alive at no look (a child of 20 to 50 ms on a loaded machine is not), it was taken
    as never seen, and the start was given up only after ``WRAPPED_CHILDLESS_S``."""
    monkeypatch.setattr(process_groups, "WRAPPED_CHILDLESS_S", 60.0)
    assert _watched(_started(tmp_path, wrapper), within=10) == (
        "the command python runs ended while python lived on",
        -signal.SIGKILL,
    )


def test_a_grandchild_that_runs_on_keeps_the_start_watched_not_lost(tmp_path):
    """A launcher forks the server and ends; the wrapper lives on (as ``strace -f`` does,
    tracing the server): the server, in the wrapper's group, is no lost start while it
    runs. Nothing is said in 3 s. (A server in a session of its own, traced by strace:
    tests/bindings/test_binding_wrapped_start.py.)"""
    popen = _started(tmp_path, LAUNCHER, "60")
    assert _watched(popen, within=3) == (None, None)


def test_a_grandchild_that_ends_later_is_a_lost_start_then(tmp_path):
    """The launcher's server ends 1 s in while the wrapper lives on: the start is lost
    then, within a grace or two of that end, not at the start's bound."""
    popen = _started(tmp_path, LAUNCHER, "1.0")
    began = time.monotonic()
    assert _watched(popen, within=10) == ("the command python runs ended while python lived on", -signal.SIGKILL)
    assert time.monotonic() - began < 5, "noticed at the bound, not at the server's end"
