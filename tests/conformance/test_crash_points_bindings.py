"""CRASH-POINTS over a binding whose server goes on starting after its port accepts
(``still_starting.py``: fsynced start-up records every 20 ms, for 0.4 s past its
ready): the recorded write waits until the server has settled, so its points are the
write's, and a listing that waits for its server ends as soon as that server has."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from kit import by_id, once_per_session, retryproof_here

from retryproof.adapters.binding.connection import BindingConnection
from retryproof.adapters.connection import Lost
from retryproof.conformance.options import load_binding

STILL_STARTING = Path(__file__).with_name("still-starting.yaml")
REFERENCE_HTTP = Path(__file__).parents[2] / "adapters" / "bindings" / "reference-http.yaml"
LOGGING_LISTINGS = Path(__file__).with_name("logging-listings.yaml")
#: The points of the write itself: a temporary file created, written, renamed.
WRITE_POINTS = [
    ("openat:1:effect-000001.json.tmp", "effect-000001.json.tmp"),
    ("write:1:effect-000001.json.tmp", "effect-000001.json.tmp"),
    ("rename:1", "effect-000001.json.tmp -> effect-000001.json"),
]


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory, strace: str) -> tuple[str, dict]:
    """CRASH-POINTS over ``logging-listings.yaml`` on seed 1, its output and its
    scenario: one run, read by both tests about what is none of the write's points.
    Its server is still-starting.yaml's that also records each listing it answers: it
    goes on starting past its ready all the same, so the run shows both.

    Its server writes no bytecode: under pytest-xdist the session caches bytecode under a
    prefix of its own (conftest.py), and a server that is the first of the session to
    import ``http.server`` compiles it at its start, renaming each ``.pyc`` into place in
    its main thread. That thread then reaches ``rename`` #1 before the write's thread, so
    the kit rightly names the write's rename by its file (``rename:1:effect-...``), and
    the points followed which test of the session started such a server first."""

    def run(directory: Path) -> tuple[str, dict]:
        out = directory / "out"
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        done = retryproof_here(
            "run",
            "--binding",
            str(LOGGING_LISTINGS),
            "--only",
            "CRASH-POINTS",
            "--seed",
            "1",
            "--out",
            str(out),
            env=env,
        )
        return done.stdout, by_id(json.loads((out / "report.json").read_text()))["CRASH-POINTS"]

    return once_per_session(tmp_path_factory, "crash-points-logged-listings", run)


def test_a_server_still_starting_after_its_ready_is_settled_before_the_recorded_write(logged):
    """Before, its start-up's writes fell inside the recorded write: 5 of 8 points were
    ``startup.log``'s, whose kills landed while the kit read the listing before
    the write, and that listing waited 10 s for a dead server (51 s in all)."""
    stdout, scenario = logged
    assert scenario["status"] == "passed", stdout
    evidence = scenario["evidence"]
    assert evidence["settled_before_the_write"]["calls"] > 0  # it went on after its ready
    assert [(o["point"], o["target"]) for o in evidence["points"]] == WRITE_POINTS
    assert all(o["landed_as_recorded"] and not o["landed_before_the_write"] for o in evidence["points"])


def test_the_listing_before_a_write_ends_when_its_server_has(tmp_path):
    """A listing command that retries a refused connection (as one that waits for its
    server to come up does) is abandoned once the server has ended: the write cannot be
    sent, and the answer says why, not the listing's own timeout 10 s later."""
    state = tmp_path / "state"
    state.mkdir()
    connection = BindingConnection(load_binding(str(STILL_STARTING)), str(state))
    connection.start()
    try:
        connection.kill()
        reply = connection.call("write_task", {"client_submission_id": "k-1", "task": {"subject": "Fix login"}})
    finally:
        connection.kill()
    assert reply == Lost("the server ended while the listing command ran")


def test_what_the_server_does_for_the_listing_read_before_the_write_is_no_point(logged):
    """The kit reads the listing before it sends the write (the binding has no reused
    rule), and this server records each listing it answers in ``listings.log``, fsynced.
    Those calls come before the request is sent, so they are none of the write's points.
    Before, the recorded window began before that listing: ``listings.log``'s create and
    write were points, and their kills, which landed in the listing of the kill runs
    (the write never sent), counted as landed on their recorded calls."""
    stdout, scenario = logged
    assert scenario["status"] == "passed", stdout
    evidence = scenario["evidence"]
    assert [(o["point"], o["target"]) for o in evidence["points"]] == WRITE_POINTS
    assert evidence["points_landed_elsewhere"] == []


def test_a_binding_says_when_it_sent_the_write_and_not_when_the_listing_ended_it(tmp_path):
    """CRASH-POINTS takes a write as sent when the connection says so: after the listing
    read before it, or never, when the server ended during that listing."""
    state = tmp_path / "state"
    state.mkdir()
    connection = BindingConnection(load_binding(str(STILL_STARTING)), str(state))
    args = {"client_submission_id": "k-1", "task": {"subject": "Fix login"}}
    connection.start()
    try:
        asked = time.time()
        assert not isinstance(connection.call("write_task", args), Lost)
        assert connection.sent_at is not None and asked < connection.sent_at < time.time()
        connection.kill()
        assert connection.call("write_task", args) == Lost("the server ended while the listing command ran")
    finally:
        connection.kill()
    assert connection.sent_at is None  # reset by the second call, which was never sent


def test_a_traced_start_lost_while_strace_lives_on_is_tried_again_at_once(tmp_path, strace):
    """strace 6.1 lost a traced server's start and lived on (Restate's server died;
    "delayed wait data set already"): the wait for the server's ready took its whole
    bound, 60 s of a CRASH-POINTS run. The recording's first start is lost that way
    here: the wait ends when the server does, the start is tried once more, and the
    scenario is judged, well within that bound. At one point of the write
    (``RETRYPROOF_CRASH_POINT``): the lost start is the recording's, before any point,
    and each of the others would cost a traced start of the server and of this fake."""
    fake = tmp_path / "bin" / "strace"
    fake.parent.mkdir()
    lives_on = Path(__file__).with_name("strace_lives_on.py")
    fake.write_text(f'#!/bin/sh\nexec {sys.executable} -S {lives_on} {strace} {tmp_path / "lost"} "$@"\n')
    fake.chmod(0o755)
    out = tmp_path / "out"
    path = f"{fake.parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, "PATH": path, "RETRYPROOF_CRASH_POINT": "link:1"}  # the task linked into place
    began = time.monotonic()
    done = retryproof_here(
        "run", "--binding", str(REFERENCE_HTTP), "--only", "CRASH-POINTS", "--seed", "1", "--out", str(out), env=env
    )
    took = time.monotonic() - began
    scenario = by_id(json.loads((out / "report.json").read_text()))["CRASH-POINTS"]
    assert scenario["status"] == "passed", done.stdout
    assert [point["point"] for point in scenario["evidence"]["points"]] == ["link:1"]
    (lost,) = scenario["evidence"]["traced_starts_failed_once"]
    assert "delayed wait data set already" in lost
    assert took < 30, f"the lost start cost {took:.1f}s"  # 60 s of waiting before


def test_a_point_a_compiling_start_named_by_its_file_is_found_where_the_start_compiled_nothing(tmp_path, strace):
    """Where the recording's server compiled ``http.server`` at its start, the write's
    rename was ``rename:1:effect-000001.json.tmp`` (that thread's rename #1 came first),
    and its reproduce line named that. Here the server writes no bytecode, so the
    recording names it ``rename:1``: the line still runs that call, counted on its file."""
    out = tmp_path / "out"
    point = "rename:1:effect-000001.json.tmp"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "RETRYPROOF_CRASH_POINT": point}
    done = retryproof_here(
        "run", "--binding", str(STILL_STARTING), "--only", "CRASH-POINTS", "--seed", "1", "--out", str(out), env=env
    )
    scenario = by_id(json.loads((out / "report.json").read_text()))["CRASH-POINTS"]
    assert scenario["status"] == "passed", done.stdout
    (outcome,) = scenario["evidence"]["points"]
    assert (outcome["point"], outcome["counted_on"], outcome["landed_as_recorded"]) == (
        point,
        "effect-000001.json.tmp",
        True,
    )
