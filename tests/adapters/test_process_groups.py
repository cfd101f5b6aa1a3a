"""Scratch directories: removed off the caller's thread, registered until they are gone;
short-lived commands run to their end with all they printed; a child's end is waited
for within a bound."""

from __future__ import annotations

import contextlib
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time

import pytest
from kit import until

from retryproof.adapters import process_groups
from retryproof.adapters.process_groups import Scratch, run_to_end, wait_exit
from retryproof.adapters.procfs import running


def gone(path: str, within_s: float = 30.0) -> bool:
    return until(lambda: not os.path.exists(path), within_s, 0.01)


def test_a_removed_scratch_directory_goes_with_its_files_and_leaves_the_registry():
    with Scratch("retryproof-test-") as scratch:
        for folder in (scratch.state, scratch.work):
            with open(os.path.join(folder, "file"), "w", encoding="utf-8") as handle:
                handle.write("x")
        assert scratch.root in process_groups._scratch_dirs
    assert gone(scratch.root)
    assert until(lambda: scratch.root not in process_groups._scratch_dirs, 30.0, 0.01)


def test_a_directory_handed_to_the_remover_stays_registered_until_it_is_gone(monkeypatch):
    """So an interrupt (``end_everything``) still finds what the thread has not removed."""
    scratch = Scratch("retryproof-test-")
    # A queue no thread reads: the remover never gets to it.
    monkeypatch.setattr(process_groups, "_removals", queue.SimpleQueue())
    monkeypatch.setattr(process_groups, "_start_remover", lambda: None)
    try:
        scratch.remove()
        assert os.path.isdir(scratch.root) and scratch.root in process_groups._scratch_dirs
    finally:
        monkeypatch.undo()
        scratch.remove()
    assert gone(scratch.root)


def test_a_command_that_answers_and_ends_while_nobody_reads_keeps_its_answer(monkeypatch):
    """The race a loaded machine meets: the wait for output times out, then the command
    prints and ends before its exit is checked. A binding's listing command lost its
    whole answer so ("exited 0 but printed nothing") and a scenario failed for it."""
    real_select = select.select
    timed_out_once: list[bool] = []

    def select_that_times_out_once(readers, writers, errors, timeout):
        if not timed_out_once:
            timed_out_once.append(True)
            time.sleep(1.0)  # meanwhile the command prints its answer and ends
            return [], [], []
        return real_select(readers, writers, errors, timeout)

    monkeypatch.setattr(process_groups.select, "select", select_that_times_out_once)
    status, stdout, _ = run_to_end([sys.executable, "-S", "-c", "print('answer')"], dict(os.environ), 30.0, 1 << 16)
    assert timed_out_once and (status, stdout) == (0, b"answer\n")


def test_wait_exit_meets_a_killed_process_at_its_end_and_bounds_a_running_one():
    child = subprocess.Popen([sys.executable, "-S", "-c", "import time; time.sleep(60)"])
    try:
        began = time.monotonic()
        with pytest.raises(subprocess.TimeoutExpired):
            wait_exit(child, 0.2)
        assert time.monotonic() - began >= 0.2  # its bound, not less
        os.kill(child.pid, signal.SIGKILL)
        assert wait_exit(child, 30.0) == -signal.SIGKILL
        assert wait_exit(child, 0.0) == -signal.SIGKILL  # reaped already: its status again
    finally:
        child.kill()
        child.wait()
    ended = subprocess.Popen([sys.executable, "-S", "-c", "raise SystemExit(3)"])
    ended.wait()  # reaped by another wait first: its status stands
    assert wait_exit(ended, 1.0) == 3


def test_wait_exit_meets_an_end_another_thread_is_reaping_too():
    """A harness's reader thread and its scenario both wait for its end: ``Popen.poll``
    answers None while the other holds the waitpid lock, which must not read as alive."""
    for _ in range(40):
        child = subprocess.Popen([sys.executable, "-S", "-c", "import time; time.sleep(60)"])
        answers: list[object] = []

        def wait(child: subprocess.Popen = child, answers: list[object] = answers) -> None:
            try:
                answers.append(wait_exit(child, 10.0))
            except subprocess.TimeoutExpired as exc:
                answers.append(exc)

        waiters = [threading.Thread(target=wait) for _ in range(3)]
        for waiter in waiters:
            waiter.start()
        time.sleep(0.005)
        child.kill()
        for waiter in waiters:
            waiter.join(15)
        assert answers == [-signal.SIGKILL] * 3


def test_kill_group_ends_what_the_started_process_started_too():
    """A harness's own children (a wrapper's runtime, a server's workers) are in its
    group: ``kill_group`` SIGKILLs the group, not only its leader, or they outlive it."""
    program = "import os, sys, time\nif os.fork() == 0: time.sleep(60)\nelse: print(os.getpid()); sys.stdout.flush(); time.sleep(60)"
    leader = process_groups.start_group([sys.executable, "-S", "-c", program])
    try:
        assert leader.stdout is not None
        assert int(leader.stdout.readline()) == leader.pid
        [child] = until_children(leader.pid)
        process_groups.kill_group(leader)
        assert wait_exit(leader, 10) == -signal.SIGKILL
        assert until(lambda: not running(child), 10, 0.01), f"the leader's child {child} outlived kill_group"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(leader.pid, signal.SIGKILL)
        leader.wait(10)
        process_groups.forget_group(leader)
        leader.stdout.close()
        leader.stderr.close()


def until_children(pid: int) -> list[int]:
    """The children ``pid`` has forked, once it has one (the fork may still be under way)."""
    children: list[int] = []

    def forked() -> bool:
        children[:] = process_groups.listed_children(pid) or []
        return bool(children)

    assert until(forked, 10, 0.01), f"{pid} forked no child"
    return children
