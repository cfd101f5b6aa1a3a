"""adapters/pipes.py: a stop is bounded whatever the child does, and a write after the
kit closed a pipe goes nowhere (never to a descriptor number reused by another file)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

from retryproof.adapters.pipes import ChildPipes, LineTooLong


def child(program: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-S", "-c", program], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


def test_lines_come_whole_and_an_overlong_one_is_refused():
    popen = child("import sys; sys.stdout.write('one\\ntwo\\n' + 'x' * 100 + '\\nlast'); sys.stdout.flush()")
    pipes = ChildPipes((popen.stdin, popen.stdout, popen.stderr))
    lines = []
    try:
        for line in pipes.lines(popen.stdout, 10):
            lines.append(line)
    except LineTooLong as exc:
        lines.append(str(exc))
    popen.wait(10)
    pipes.stop(1, 1)
    assert lines == [b"one\n", b"two\n", "a line longer than 10 bytes"]


def test_a_write_after_close_or_stop_reports_failure_and_writes_nothing():
    popen = child("import sys, time; time.sleep(30)")
    pipes = ChildPipes((popen.stdin, popen.stdout, popen.stderr))
    try:
        pipes.close(popen.stdin)
        decoy_read, decoy_write = os.pipe()  # may take the number stdin had
        try:
            assert pipes.write_all(popen.stdin, b"a line\n") is False
            os.set_blocking(decoy_read, False)
            assert not _readable(decoy_read)
        finally:
            os.close(decoy_read)
            os.close(decoy_write)
    finally:
        popen.kill()
        popen.wait(10)
        pipes.stop(1, 1)
    assert pipes.write_all(popen.stdin, b"late\n") is False
    assert pipes.stop(1, 1) == []  # once only


def test_a_writer_blocked_on_a_child_that_never_reads_is_released_by_the_stop():
    popen = child("import time; time.sleep(30)")
    pipes = ChildPipes((popen.stdin, popen.stdout, popen.stderr))
    outcome: list[bool] = []
    writer = threading.Thread(target=lambda: outcome.append(pipes.write_all(popen.stdin, b"x" * (1 << 22))))
    writer.start()
    writer.join(0.3)
    assert writer.is_alive()  # the pipe is full
    popen.kill()
    popen.wait(10)
    pipes.stop(1, 1)
    writer.join(5)
    assert not writer.is_alive() and outcome == [False]


def test_a_stop_from_one_of_its_own_threads_does_not_wait_for_itself():
    popen = child("pass")
    pipes = ChildPipes((popen.stdin, popen.stdout, popen.stderr))
    done: list[object] = []
    pipes.spawn(lambda: done.append(pipes.stop(0.1, 0.1)), name="stopper")
    pipes.threads[0].join(5)
    popen.wait(10)
    assert done == [[]]


def _readable(fd: int) -> bool:
    try:
        return bool(os.read(fd, 1))
    except BlockingIOError:
        return False
