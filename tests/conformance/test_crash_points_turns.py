"""CRASH-POINTS runs two points at once only while no other scenario of the run has a
process running, and lists them in their order whichever ends first."""

from __future__ import annotations

import subprocess
import threading
import time
from types import SimpleNamespace

from retryproof.adapters.process_groups import forget_group, kill_group, start_group
from retryproof.conformance.scenarios.crash_points import POINTS_AT_ONCE, _in_turn


class Recorder:
    """A point that takes a while, noting how many points ran beside it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.most = 0

    def __call__(self, point: int) -> int:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(0.3 if point == 0 else 0.05)  # the first ends last of its pair
        with self.lock:
            self.now -= 1
        return point


def test_points_run_two_at_a_time_in_a_run_of_their_own_and_keep_their_order():
    one = Recorder()
    assert _in_turn(SimpleNamespace(connections=[]), one, list(range(5))) == [0, 1, 2, 3, 4]
    assert one.most == POINTS_AT_ONCE == 2


def test_points_run_one_at_a_time_beside_another_scenarios_process():
    other = start_group(["sleep", "30"], stdin=subprocess.DEVNULL)
    try:
        one = Recorder()
        assert _in_turn(SimpleNamespace(connections=[]), one, list(range(3))) == [0, 1, 2]
        assert one.most == 1
    finally:
        kill_group(other)
        other.wait(10)
        forget_group(other)
