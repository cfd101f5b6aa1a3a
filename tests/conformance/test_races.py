"""The race probes (A4-CONCURRENT, A4-MULTIPROCESS and FUZZ-MODEL's concurrency probe)
fail a runtime whose check-then-set window is narrow, on every seed tried.

``narrowly-unlocked`` (``broken_runtimes.py``) takes no lock and adds no delay: its
window is the reference's own code between the receipt check and the reservation, as a
library's lookup-then-SET is. Racing one id at a time, a warm runtime of this kind was
hit by about one race in twenty, so five rounds passed it on some seeds and runs. Racing
eight ids at once, one id's callers back to back, a race hit it 141 times in 160 (load 24).

Every scenario here judges ``A4_ROUNDS`` rounds of ``A4_IDS_PER_ROUND`` races
(FUZZ-MODEL's probe the same, before it explores) and misses the runtime only if every
round does. The tests' state is on disk (the temporary directory), where
``benchmarks/bench_races.py`` saw no round of ``narrowly-unlocked`` missed in 60 (0.89 of
its races hit); with the state on tmpfs about one warm round in five missed, yet
A4-CONCURRENT failed the runtime on each of 30 seeds there. No chance is derived from the
races' hit rate: the races of one round miss together, so they are not independent.
"""

from __future__ import annotations

import os
import sys

from kit import by_id, certify

from retryproof.conformance.fuzz.model import PROBE_IDS, PROBE_ROUNDS, Driver
from retryproof.conformance.fuzz.profiles import DEV, ENV_VAR
from retryproof.conformance.scenarios.retries import A4_IDS_PER_ROUND, A4_ROUNDS

BROKEN = os.path.join(os.path.dirname(__file__), "broken_runtimes.py")
RACES = "A4-CONCURRENT,A4-MULTIPROCESS,FUZZ-MODEL"


def test_a_narrow_check_then_set_window_fails_every_race_probe(tmp_path):
    """One seed: the races' timing, not the seed, decides whether a round meets the
    window (the seed draws the ids and the tasks' text), so a second seed was the same run again;
    ``benchmarks/bench_races.py`` tries many."""
    done, report = certify(
        tmp_path,
        f"{sys.executable} -S {BROKEN} narrowly-unlocked",
        "--only",
        RACES,
        seed=1,
        formats="json",
        # In this process: the named profile keeps FUZZ-MODEL's settings off the session's.
        in_process=True,
        env={**os.environ, ENV_VAR: DEV},
    )
    assert report is not None, done.stderr
    scenarios = by_id(report)
    for scenario in ("A4-CONCURRENT", "A4-MULTIPROCESS"):
        judged = scenarios[scenario]
        assert judged["status"] == "failed", (scenario, judged["reason"])
        assert len(judged["evidence"]["dispositions"]) <= A4_ROUNDS * A4_IDS_PER_ROUND
    fuzz = scenarios["FUZZ-MODEL"]
    assert fuzz["status"] == "failed" and "under one submission id probe" in fuzz["reason"], fuzz["reason"]
    # The probe's race is its own minimal history; exploring never began.
    assert fuzz["evidence"]["replay"]["steps"] == [{"step": "race", "ids": PROBE_IDS, "burst": 8}]
    probe = fuzz["evidence"]["fuzz"]["probe"]
    assert probe["rounds"] <= PROBE_ROUNDS and fuzz["evidence"]["fuzz"]["examples"] == 0
    assert done.returncode == 1


def test_fuzz_models_probe_races_as_many_rounds_as_a4():
    """The probe is A4-CONCURRENT's races: a change to one's rounds is a change to both."""
    assert PROBE_ROUNDS == A4_ROUNDS


def test_a_race_step_sends_every_id_before_any_answer_and_the_reference_passes_it(tmp_path):
    from retryproof.adapters.process import ProcessConnection
    from retryproof.conformance.options import REFERENCE_COMMAND
    from retryproof.conformance.outcome import Call

    connection = ProcessConnection(REFERENCE_COMMAND, str(tmp_path), call_timeout=30, start_timeout=30)
    connection.start()
    try:
        driver = Driver(connection, "r")
        driver.apply({"step": "race", "ids": 4, "burst": 3})  # raises ModelViolation on a broken invariant
    finally:
        connection.stop()
    sent = [event.args["client_submission_id"] for event in driver.history if isinstance(event, Call)]
    assert sent == [f"r.race-{n}" for n in range(1, 5) for _ in range(3)]  # one id's callers back to back
    assert all(line.count("created") == 1 and line.count("reused") == 2 for line in driver.log), driver.log
